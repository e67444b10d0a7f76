"""A replay killed (SIGKILL at three points) or preempted (SIGTERM) resumes from its latest
snapshot into a store equal, bit for bit, to the store of a run never interrupted; what cannot
be resumed is refused in one line with nothing written."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers.killed import arrays, assert_same_store, copy_run, killed, store_digest

pytestmark = pytest.mark.needs_warp

# 3 hexapod worlds, 200 steps; chunks of 16 rows of joint angles: a snapshot every 16 steps
KW = dict(device="cpu", worlds=3, duration=0.1, observe=["angles", "qpos@5", "qvel@7"], chunk_bytes=3 * 42 * 4 * 16,
          progress=False, snapshot_seconds=0)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from flycuda.replay import replay

    path = tmp_path_factory.mktemp("ref") / "ref.zarr"
    replay(record=str(path), **KW)
    return path


@pytest.mark.parametrize("at,n", [("step", 37), ("flush", 3), ("snapshot-part", 4), ("snapshot-marker", 4)],
                         ids=["mid-chunk", "after-a-flush", "in-a-snapshot-file", "before-its-marker"])
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, reference, at, n, capsys):
    from flycuda.recording.runs import open_run
    from flycuda.replay import replay

    store = tmp_path / "run.zarr"
    assert killed(store, at, n, kw=KW) == -signal.SIGKILL
    run = open_run(store)
    assert run.state == "interrupted" and -1 <= run.step < 200  # a dead pid on this host; -1: not every array has a chunk
    ref = arrays(reference)
    for name, rows in run.rows.items():  # the valid prefix is the uninterrupted run's
        assert np.array_equal(run.read(name), ref[name][:, :rows], equal_nan=True), name
    res = replay(record=str(store), resume=str(store), **KW)
    if at == "snapshot-part":  # the half-written file was never marked: the snapshot before it serves
        assert res.resumed_from == 47
    if at == "snapshot-marker":  # the file without its marker is passed over too
        assert res.resumed_from == 47
    assert_same_store(store, reference)


def test_sigterm_marks_the_store_preempted_and_resumes(tmp_path, reference):
    from flycuda.recording.runs import open_run
    from flycuda.replay import replay

    store = tmp_path / "run.zarr"
    assert killed(store, "step", 50, "TERM", kw=KW) == 128 + signal.SIGTERM
    run = open_run(store)
    assert run.state == "preempted" and run.status == "preempted at step 50 (SIGTERM)"
    assert run.step == 50 and run.rows["angles"] == 51  # the filling chunks flushed too
    snaps = sorted(os.listdir(str(store) + ".resume"))
    assert snaps[-2:] == ["step-000000000050.json", "step-000000000050.pt"]  # the last snapshot is the stop's
    assert replay(resume=str(store), **KW).resumed_from == 50
    assert_same_store(store, reference)


@pytest.fixture(scope="module")
def preempted(tmp_path_factory):
    store = tmp_path_factory.mktemp("preempted") / "run.zarr"
    assert killed(store, "step", 100, "TERM", kw=KW) == 128 + signal.SIGTERM
    return store


@pytest.mark.parametrize("change,named", [({"worlds": 4}, "worlds=3"), ({"mode": "loop"}, "mode='clamp'"),
                                          ({"observe": ["angles", "qpos@5"]}, "observe="),
                                          ({"model": "neuromechfly-capsules"}, None)],
                         ids=["worlds", "mode", "observables", "model"])
def test_resume_with_other_settings_is_refused_and_writes_nothing(tmp_path, preempted, change, named):
    from flycuda.errors import FlycudaError
    from flycuda.replay import replay

    if "model" in change:
        pytest.importorskip("flygym")
    store = copy_run(preempted, tmp_path)
    before = store_digest(store)
    with pytest.raises(FlycudaError) as e:
        replay(**dict(KW, resume=str(store), **change))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"cannot resume {store}") and (named is None or named in msg)
    assert store_digest(store) == before


def test_resume_refuses_a_complete_store_and_another_flycuda(tmp_path, preempted, reference):
    from flycuda.errors import ReplayError
    from flycuda.replay import replay
    from flycuda.replay.snapshot import load_latest, snapshot_dir, write_snapshot

    with pytest.raises(ReplayError, match="its run is complete, there is nothing left to run"):
        replay(**dict(KW, resume=str(reference)))
    store = copy_run(preempted, tmp_path)
    snap = load_latest(str(store))
    meta = dict(snap.meta, fingerprint=dict(snap.meta["fingerprint"], flycuda="0.0.1"))
    write_snapshot(snapshot_dir(str(store)), meta, snap.state)  # the newest, rewritten by "another flycuda"
    before = store_digest(store)
    with pytest.raises(ReplayError, match=r"recorded with flycuda='0\.0\.1'"):
        replay(**dict(KW, resume=str(store)))
    assert store_digest(store) == before
    with pytest.raises(ReplayError, match="resume must be the path of a .zarr store"):
        replay(**dict(KW, resume=str(tmp_path)))
    from flycuda.recording import store as zstore
    from flycuda.recording.progress import heartbeat

    group = zstore.open_store(str(store), "r+")  # as a run alive in this process leaves it
    zstore.mark(group, complete=False, status="running")
    info = dict(group.attrs["flycuda"])
    group.attrs["flycuda"] = dict(info, progress=dict(info["progress"], heartbeat=heartbeat()))
    with pytest.raises(ReplayError, match=f"it is still being written \\(pid {os.getpid()} on"):
        replay(**dict(KW, resume=str(store)))


def test_a_corrupt_snapshot_falls_back_to_the_one_before_and_says_so(tmp_path, preempted, reference, capsys):
    from flycuda.replay import replay

    store = copy_run(preempted, tmp_path)
    newest = sorted(f for f in os.listdir(str(store) + ".resume") if f.endswith(".pt"))[-1]
    path = os.path.join(str(store) + ".resume", newest)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: the marker's SHA-256 no longer matches
    open(path, "wb").write(bytes(data))
    res = replay(**dict(KW, resume=str(store)))
    err = capsys.readouterr().err
    assert f"snapshot {newest[:-3]} is corrupt or half-written" in err and "falling back" in err
    assert res.resumed_from < 100
    assert_same_store(store, reference)


def test_the_cli_stops_on_sigterm_with_143_and_resumes_from_its_own_command(tmp_path):
    """A real SIGTERM to `flycuda replay` once it has taken a snapshot: exit 143, one line naming
    the command that goes on; `flycuda replay --resume STORE` then completes it, equal to the
    same command run through without a stop."""
    from flycuda.cli import main

    args = ["--device", "cpu", "--worlds", "2", "--duration", "0.5", "--observe", "qvel@5", "--no-progress"]
    store = tmp_path / "cli.zarr"
    snaps = str(store) + ".resume"
    proc = subprocess.Popen([sys.executable, "-m", "flycuda", "replay", *args, "--record", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if os.path.isdir(snaps) and any(f.endswith(".json") for f in os.listdir(snaps)):
            break  # a snapshot is whole: stop the run now
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("flycuda: preempted: SIGTERM at step ") and last.endswith(
        f"; go on with: flycuda replay --resume {store}"), last
    assert main(["replay", "--resume", str(store), "--no-progress"]) == 0
    ref = tmp_path / "ref.zarr"
    assert main(["replay", *args, "--record", str(ref)]) == 0
    assert_same_store(store, ref)
    assert main(["replay", "--resume", str(store), "--worlds", "3"]) == 2  # its settings are the store's
