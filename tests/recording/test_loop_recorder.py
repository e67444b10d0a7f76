"""flycuda.recording.LoopRecorder: a loop of one's own (here a CPG with feedback on the joint
angles) recorded as a replay records: every sample equals the worlds' state at its step, bit
for bit, streamed through chunk edges into a store that `flycuda render` and xarray read."""

from __future__ import annotations

import math

import pytest
import torch

from flycuda.recording import LoopRecorder, Recording, RecordingError

pytestmark = pytest.mark.needs_warp

STEPS = 45


def _cpg_step(sim, act_ids, adrs, phase, k):
    """A tripod CPG whose amplitude backs off where a joint lags its target (feedback)."""
    t = k * sim.timestep
    target = 0.3 * torch.sin(2 * math.pi * 8.0 * t + phase)
    lag = (sim.view("ctrl")[:, act_ids] - sim.view("qpos")[:, adrs]).abs()
    sim.view("ctrl")[:, act_ids] = target / (1.0 + lag)
    sim.step()


def _loop(tmp_path, store, chunk_bytes=2 * 60 * 4 * 4, spy=None):
    from flycuda.sim import Sim, tripod_gait

    sim = Sim.build(None, 2, device="cpu")
    act_ids = sim.actuator_ids(tripod_gait().dof_names).long()
    adrs = sim.qpos_adrs(act_ids).long()
    phase = torch.linspace(0, math.pi, len(act_ids))
    with LoopRecorder(sim, ["qpos@3", "ctrl", "body_pos:Thorax"], store, steps=STEPS, model="hexapod",
                      chunk_bytes=chunk_bytes) as rec:
        if spy is not None:
            spy.append(sim.view("qpos").clone())
        for k in range(STEPS):
            _cpg_step(sim, act_ids, adrs, phase, k)
            rec.step()
            if spy is not None:
                spy.append(sim.view("qpos").clone())
    return rec, sim


def test_every_sample_is_the_state_at_its_step(tmp_path):
    states = []
    rec, _ = _loop(tmp_path, str(tmp_path / "cpg.zarr"), spy=states)
    out = Recording.open(str(tmp_path / "cpg.zarr"))
    assert out.complete and out.info["source"] == "flycuda.recording.LoopRecorder"
    q = out.read("qpos")  # [W, rows, nq]: a sample every 3 steps, through chunks of 4 rows
    assert q.shape[1] == STEPS // 3 + 1 and rec.recorder.stream("qpos").C < q.shape[1]
    for r in range(q.shape[1]):
        assert torch.equal(q[:, r], states[3 * r]), r
    assert torch.isfinite(out.read("ctrl")).all() and out.read("body_pos").shape == (2, STEPS + 1, 3)


def test_a_loop_recording_renders_and_opens_in_xarray(tmp_path):
    from flycuda.cli import main

    _loop(tmp_path, str(tmp_path / "cpg.zarr"))
    assert main(["render", str(tmp_path / "cpg.zarr"), "--out", str(tmp_path / "v.mp4"), "--size", "32x24",
                 "--no-progress"]) == 0
    xr = pytest.importorskip("xarray")
    ds = xr.open_zarr(str(tmp_path / "cpg.zarr"))
    assert ds["body_pos"].sel(body_pos_column="Thorax:z").shape == (2, STEPS + 1)


def test_in_memory_and_without_a_store():
    rec, _ = _loop(None, "memory")
    assert rec.close().read("ctrl").shape[1] == STEPS + 1  # close() twice: the same recording
    rec, _ = _loop(None, None)
    assert rec.close() is None


def test_a_loop_that_stops_early_keeps_what_it_ran(tmp_path):
    from flycuda.sim import Sim

    sim = Sim.build(None, 1, device="cpu")
    rec = LoopRecorder(sim, ["qpos"], str(tmp_path / "s.zarr"), steps=100, chunk_bytes=60 * 4 * 8)
    for _ in range(21):
        sim.step()
        rec.step()
    out = rec.close()
    assert out.complete and out.info["steps_run"] == 21 and out["qpos"].attrs["rows_written"] == 22
    assert torch.isfinite(out.read("qpos")[:, :22]).all() and torch.isnan(out.read("qpos")[:, 22:]).all()


def test_bad_use_is_refused(tmp_path):
    from flycuda.recording import ObservableError
    from flycuda.sim import Sim

    sim = Sim.build(None, 1, device="cpu")
    with pytest.raises(ObservableError, match="unknown"):
        LoopRecorder(sim, ["nonsense"], None, steps=5)
    with pytest.raises(RecordingError, match="steps must be a positive integer"):
        LoopRecorder(sim, ["qpos"], None, steps=0)
    (tmp_path / "x.zarr").mkdir()
    with pytest.raises(Exception, match="already exists"):
        LoopRecorder(sim, ["qpos"], str(tmp_path / "x.zarr"), steps=5)
    rec = LoopRecorder(sim, ["qpos"], None, steps=2)
    rec.step(), rec.step()
    with pytest.raises(RecordingError, match="recorded for steps=2"):
        rec.step()
    rec.close()
    with pytest.raises(RecordingError, match="closed"):
        rec.step()


def test_an_error_in_the_loop_marks_the_store_incomplete(tmp_path):
    from flycuda.sim import Sim

    sim = Sim.build(None, 1, device="cpu")
    with pytest.raises(ZeroDivisionError):
        with LoopRecorder(sim, ["qpos"], str(tmp_path / "e.zarr"), steps=10) as rec:
            rec.step()
            1 / 0
    out = Recording.open(str(tmp_path / "e.zarr"))
    assert not out.complete and "ZeroDivisionError" in out.info["status"]


def test_inside_a_capture_a_step_is_device_work_only(monkeypatch):
    """What a CUDA graph would capture: the counter advanced and the sample recorded, no
    host work (the slot waits and copies out come with before_launch/after_launch)."""
    from flycuda.sim import Sim

    sim = Sim.build(None, 1, device="cpu")
    rec = LoopRecorder(sim, ["qpos"], None, steps=8)
    monkeypatch.setattr(rec.recorder, "capturing", lambda: True)
    monkeypatch.setattr(rec.recorder, "flush_ready", lambda done: pytest.fail("host work inside a capture"))
    rec.step()
    assert int(rec.counter[0]) == 1 and rec.done == 0
    monkeypatch.undo()
    rec.after_launch(1)
    rec.before_launch(4)
    assert rec.done == 1
