"""A store tells the truth about its progress: rows written per array, the step they reach and
a heartbeat, after every chunk and while idle; open_run reads the run's state and the valid
prefix of every array."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("zarr")


def _store(tmp_path, rows=(40, 14), every=(1, 3)):
    from flycuda.recording import store

    specs = [store.ArraySpec("angles", 3, rows[0], ["a", "b"], every[0], 3, 8),
             store.ArraySpec("qpos", 3, rows[1], ["x", "y", "z"], every[1], 3, 4)]
    return store.create(str(tmp_path / "s.zarr"), specs, {"timestep": 0.001})


def _write(writer, name, k0, n, width, seed):
    data = np.random.default_rng(seed).standard_normal((3, n, width)).astype(np.float32)
    writer.put(name, 0, k0, data)
    return data


def test_progress_after_every_chunk_and_the_prefix_read_back(tmp_path):
    from flycuda.recording import store
    from flycuda.recording.runs import open_run

    group = _store(tmp_path)
    w = store.Writer(group)
    a = np.concatenate([_write(w, "angles", 8 * c, 8, 2, c) for c in range(3)], axis=1)
    q = _write(w, "qpos", 0, 4, 3, 9)
    w.close()
    info = store.open_store(str(tmp_path / "s.zarr")).attrs["flycuda"]
    p = info["progress"]
    assert p["rows_written"] == {"angles": 24, "qpos": 4}
    assert p["step"] == min(24 * 1 - 1, 4 * 3 - 1) == 11  # qpos's next sample, at step 12, is missing
    assert p["heartbeat"]["pid"] == os.getpid() and p["heartbeat"]["host"] == socket.gethostname()
    assert w.progress_writes >= 1
    doc = json.load(open(tmp_path / "s.zarr" / "zarr.json"))
    assert "consolidated_metadata" in doc  # still one read for xarray
    run = open_run(str(tmp_path / "s.zarr"))
    assert run.state == "running"  # this process, alive, its store not closed
    assert run.step == 11 and run.rows == {"angles": 24, "qpos": 4}
    assert np.array_equal(run.read("angles"), a) and np.array_equal(run.read("qpos", [1]), q[[1]])
    assert "running" in run.line() and "angles 24/40" in run.line()


def _rewrite_heartbeat(path, **beat):
    from flycuda.recording import store

    group = store.open_store(path, "r+")
    info = dict(group.attrs["flycuda"])
    info["progress"] = dict(info["progress"], heartbeat=dict(info["progress"]["heartbeat"], **beat))
    group.attrs["flycuda"] = info


def test_open_run_tells_each_state(tmp_path):
    from flycuda.recording import store
    from flycuda.recording.progress import STALE_S
    from flycuda.recording.runs import open_run

    path = str(tmp_path / "s.zarr")
    group = _store(tmp_path)
    w = store.Writer(group)
    _write(w, "angles", 0, 8, 2, 0)
    w.close()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _rewrite_heartbeat(path, pid=int(dead.stdout))
    assert open_run(path).state == "interrupted"  # its process is gone from this host
    _rewrite_heartbeat(path, host="another-node", unix=time.time() - 2 * STALE_S)
    assert open_run(path).state == "interrupted"  # a stale heartbeat from another host
    _rewrite_heartbeat(path, host="another-node", unix=time.time())
    assert open_run(path).state == "running"      # a fresh one
    store.mark(store.open_store(path, "r+"), complete=False, status="preempted at step 7 (SIGTERM)",
               rows_written={"angles": 8, "qpos": 3})
    run = open_run(path)
    assert run.state == "preempted" and run.status == "preempted at step 7 (SIGTERM)" and run.step == 7
    store.mark(store.open_store(path, "r+"), complete=False, status="incomplete: ValueError: x",
               rows_written={"angles": 8})
    assert open_run(path).state == "failed"
    store.mark(store.open_store(path, "r+"), complete=True, status="complete", rows_written={"angles": 40, "qpos": 14})
    run = open_run(path)
    assert run.state == "complete" and run.complete and run.rows == {"angles": 40, "qpos": 14} and run.step == 39


def test_a_live_writer_beats_without_chunks(tmp_path, monkeypatch):
    from flycuda.recording import store

    monkeypatch.setattr(store, "HEARTBEAT_S", 0.05)
    w = store.Writer(_store(tmp_path))
    time.sleep(0.5)
    w.close()
    assert w.progress_writes >= 3  # one at the start, then beats though nothing was queued


def test_valid_step_is_bounded_by_the_arrays_still_filling():
    from flycuda.recording.progress import valid_step

    rows, every = {"a": 10, "b": 4}, {"a": 1, "b": 3}
    assert valid_step({"a": 0, "b": 0}, rows, every) == -1
    assert valid_step({"a": 10, "b": 2}, rows, every) == 5   # b's sample at step 6 is missing
    assert valid_step({"a": 10, "b": 4}, rows, every) == 9   # all written: the last sample's step
    assert valid_step({"a": 3, "b": 4}, rows, every) == 2


def test_open_run_refuses_what_is_not_a_recording(tmp_path):
    from flycuda.errors import StoreError
    from flycuda.recording.runs import open_run

    with pytest.raises(StoreError, match="no recording at"):
        open_run(str(tmp_path / "none.zarr"))
