"""Recording at scale: observables streamed in chunks into a zarr store.

The oracle is independent of the recorder: a spy "renderer" that the replay calls
after every step copies the live state (qpos, ctrl, body poses, ...) to the host.
The store must equal those copies bit for bit, whatever the chunking."""

import math
import os

import numpy as np
import pytest
import torch

from flycuda import reference
from flycuda.recording import ObservableError, Recording, RecordingError, StoreError, Target, parse, resolve
from flycuda.recording.recorder import Recorder, rows_per_chunk

pytestmark = pytest.mark.needs_warp
DT = 5e-4  # the built-in hexapod's timestep


class Spy:
    """Called by the replay as a renderer after the initial state and every step:
    keeps a host copy of each Data field it watches."""

    def __init__(self, sim, fields=("qpos", "ctrl", "xpos", "xquat", "qvel"), fail_at=None):
        self.sim, self.fields, self.fail_at = sim, fields, fail_at
        self.seen = {f: [] for f in fields}
        self.worlds = torch.arange(sim.nworld)

    def render_mosaic(self):
        if self.fail_at is not None and len(self.seen["qpos"]) == self.fail_at:
            raise RuntimeError(f"spy: failing at step {self.fail_at}")
        for f in self.fields:
            v = self.sim.view(f)
            self.seen[f].append(v.reshape(v.shape[0], -1).cpu().clone())
        return torch.zeros(1, 1, 3, dtype=torch.uint8)

    def samples(self, field, cols, every):
        """[W, R, D]: the watched field's columns at steps 0, every, 2 every, ..."""
        return torch.stack([s[:, cols] for s in self.seen[field][::every]], dim=1)


def _sim(worlds=3):
    from flycuda.sim import Sim

    return Sim.build(None, worlds, device="cpu")


def _replay(sim, steps, observe, record="memory", **kw):
    from flycuda.replay import replay

    spy = Spy(sim, fail_at=kw.pop("fail_at", None))
    res = replay(worlds=sim.nworld, sim=sim, duration=steps * DT, progress=False, observe=observe, record=record,
                 renderer=spy, render_every=1, **kw)
    return res, spy


OBSERVE = ("angles", "qpos@7", "ctrl@3", "body_pos:Thorax,L*Tarsus", "body_quat:Thorax@2", "qvel@5")


def _check_against_spy(rec: Recording, spy: Spy, sim, steps: int):
    specs = {n: rec[n] for n in rec.names if n != "targets"}
    obs = {o.name: o for o in resolve(sim, [rec[n].attrs["observable"] for n in specs if n != "angles"])}
    for name, arr in specs.items():
        if name == "angles":
            # angles are qpos columns at the driven joints
            from flycuda.sim import tripod_gait

            adrs = sim.qpos_adrs(sim.actuator_ids(tripod_gait().dof_names))
            want = spy.samples("qpos", adrs.long(), rec.every(name))
        else:
            o = obs[name]
            want = spy.samples(o.field, o.columns.long(), o.every)
        got = torch.from_numpy(np.asarray(arr[:]))
        assert got.shape == want.shape == (sim.nworld, steps // rec.every(name) + 1, arr.shape[2]), name
        assert torch.equal(got, want), f"{name}: store differs from the live state"


@pytest.mark.parametrize("chunk_bytes", [1, 3 * 42 * 4 * 7, 2**30], ids=["one-row", "7-rows", "one-chunk"])
def test_store_equals_the_live_state_bit_for_bit(chunk_bytes, tmp_path):
    sim, steps = _sim(3), 40
    res, spy = _replay(sim, steps, OBSERVE, record=str(tmp_path / "r.zarr"), chunk_bytes=chunk_bytes)
    rec = Recording.open(tmp_path / "r.zarr")
    assert rec.complete and rec.info["status"] == "complete"
    assert set(rec.names) == {"angles", "targets", "qpos", "ctrl", "body_pos", "body_quat", "qvel"}
    _check_against_spy(rec, spy, sim, steps)
    assert rec.columns("body_pos") == [f"{b}:{c}" for b in ("Thorax", "LFTarsus", "LMTarsus", "LHTarsus")
                                       for c in "xyz"]
    assert rec["angles"].metadata.dimension_names == ("world", "angles_time", "angles_column")
    for name in rec.names:
        assert rec[name].attrs["rows_written"] == rec[name].shape[1], name


def test_targets_are_what_the_op_applied_and_rmse_matches_the_store():
    """Stored targets equal the reference op at every sample's step; the RMSE accumulated on the
    device equals the one computed from the stored angles and targets."""
    from flycuda.replay import tracking_rmse
    from flycuda.sim import tripod_gait

    sim, steps = _sim(2), 30
    res, _ = _replay(sim, steps, ("angles@2",), snippet=0.05, chunk_bytes=2 * 42 * 4 * 4)
    from flycuda.replay.settings import resolve_offsets

    m = tripod_gait()
    offs = resolve_offsets(m, 2, snippet=0.05)
    tgt = res.targets
    for k in range(tgt.shape[1]):
        want = torch.empty(2, 42)
        reference.motion_to_ctrl(m.as_buffer(), torch.tensor([2 * k]), want, torch.arange(42), offsets=offs,
                                 frames_per_step=m.fps * DT)
        assert torch.equal(tgt[:, k], want), k
    ref = tracking_rmse(res.recorded.double(), tgt.double(), DT, 2).float()
    assert torch.allclose(res.rmse_per_dof, ref, rtol=1e-5, atol=1e-9)
    assert res.rmse_per_dof.max() > 0


def test_warmup_and_steps_per_graph_keep_the_samples():
    """A warm-up is not recorded (sample 0 is the settled state); steps_per_graph sizes the chunks
    (never fewer steps than a launch) and leaves the samples unchanged."""
    sim, steps = _sim(2), 24
    a, spy = _replay(sim, steps, ("angles", "qpos@5"), warmup=10 * DT, steps_per_graph=4, chunk_bytes=1)
    _check_against_spy(a.recording, spy, sim, steps)
    assert a.recording["angles"].chunks[1] == 4  # one-row chunks asked for, K = 4 steps per launch


def test_exception_leaves_complete_chunks_and_the_incomplete_mark(tmp_path):
    sim, steps, fail = _sim(2), 60, 23
    path = str(tmp_path / "r.zarr")
    with pytest.raises(RuntimeError, match="spy: failing at step 23"):
        _replay(sim, steps, ("angles", "qpos@4"), record=path, chunk_bytes=2 * 42 * 4 * 5, fail_at=fail)
    rec = Recording.open(path)
    assert not rec.complete and rec.info["status"].startswith("incomplete: RuntimeError: spy: failing at step 23")
    ang, q = np.asarray(rec["angles"][:]), np.asarray(rec["qpos"][:])
    n = rec["angles"].attrs["rows_written"]
    assert 0 < n <= fail and n % 5 == 0  # whole chunks of 5 samples, none past the failure
    assert not np.isnan(ang[:, :n]).any() and np.isnan(ang[:, n:]).all()
    nq = rec["qpos"].attrs["rows_written"]
    assert not np.isnan(q[:, :nq]).any() and np.isnan(q[:, nq:]).all()
    # what was written is what the live run saw (the same replay, without the failure)
    ok, spy = _replay(_sim(2), steps, ("angles", "qpos@4"), chunk_bytes=2 * 42 * 4 * 5)
    assert np.array_equal(ang[:, :n], ok.recorded[:, :n].numpy())


def test_existing_store_refused_unless_overwrite(tmp_path):
    from flycuda.replay import replay

    path = tmp_path / "r.zarr"
    replay(worlds=1, duration=3 * DT, progress=False, record=str(path), device="cpu")
    first = Recording.open(path).info["created"]
    with pytest.raises(StoreError, match=r"recording .*r\.zarr already exists; pass --overwrite"):
        replay(worlds=1, duration=3 * DT, progress=False, record=str(path), device="cpu")
    assert Recording.open(path).complete  # untouched
    res = replay(worlds=2, duration=3 * DT, progress=False, record=str(path), overwrite=True, device="cpu")
    assert Recording.open(path)["angles"].shape[0] == 2 and res.recording.complete
    other = tmp_path / "not_a_store"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(StoreError, match="exists and is not a zarr store; refusing to overwrite it"):
        replay(worlds=1, duration=3 * DT, progress=False, record=str(other), overwrite=True, device="cpu")
    assert (other / "keep.txt").exists()
    assert first


def test_missing_folder_is_an_error_before_anything_runs(tmp_path):
    from flycuda.replay import replay

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match=r"cannot create recording .*: folder .*file does not exist"):
        replay(worlds=1, duration=3 * DT, progress=False, record=str(blocker / "r.zarr"), device="cpu")


def test_a_failing_writer_marks_the_store_incomplete(tmp_path, monkeypatch):
    """A store that cannot be written (disk full, permissions) fails the run with a clear
    error and is never marked complete."""
    import zarr

    real = zarr.Array.__setitem__
    calls = {"n": 0}

    def flaky(self, key, value):  # the third write of recorded chunks fails (coordinates are written at creation)
        calls["n"] += self.ndim == 3
        if calls["n"] > 2:
            raise OSError(28, "No space left on device")
        return real(self, key, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", flaky)
    path = str(tmp_path / "r.zarr")
    with pytest.raises(StoreError, match="writing the recording failed: OSError: .*No space left on device"):
        _replay(_sim(2), 40, ("angles",), record=path, chunk_bytes=2 * 42 * 4 * 3)
    monkeypatch.setattr(zarr.Array, "__setitem__", real)
    rec = Recording.open(path)
    assert not rec.complete and rec.info["status"].startswith("incomplete")


def test_the_writer_thread_works_on_its_own_gpu(tmp_path, monkeypatch):
    """Under torchrun each rank's writer thread makes the rank's GPU current before it
    waits on a copy's event (else it would create a context on GPU 0); on the CPU it
    touches no CUDA at all."""
    import threading

    from flycuda.recording import store as zstore

    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: calls.append((threading.current_thread().name, d)))
    spec = zstore.ArraySpec("a", 2, 4, ["x"], 1, 2, 4, "a")
    for device, want in ((torch.device("cuda", 1), [("flycuda-store-writer", torch.device("cuda", 1))]),
                         ("cpu", [])):
        calls.clear()
        group = zstore.create(str(tmp_path / f"s{len(want)}.zarr"), [spec], {"timestep": 1.0})
        w = zstore.Writer(group, device=device)
        w.put("a", 0, 0, np.ones((2, 4, 1), np.float32), wait=lambda: calls.append(("wait", None)))
        w.close()
        assert calls == want + [("wait", None)]


def test_device_and_host_memory_do_not_grow_with_duration():
    """The recorder's buffers are sized by the chunk, not the run: 1x, 10x, 100x steps."""
    from flycuda.recording import Observable

    W, N = 64, 73  # chunk_bytes below: 16 samples (MAX_ROWS does not bind)
    src = torch.randn(W, N)

    def sizes(steps):
        obs = [Observable("qpos", "qpos", src, torch.arange(N, dtype=torch.int32), [str(i) for i in range(N)], 1),
               Observable("x", "qpos", src, torch.arange(3, dtype=torch.int32), ["a", "b", "c"], 33)]
        r = Recorder(obs, steps, torch.device("cpu"), store=True, chunk_bytes=W * N * 4 * 16)
        return r.device_bytes(), r.host_bytes(), [st.C for st in r.streams]

    one, ten, hundred = sizes(100_000), sizes(1_000_000), sizes(10_000_000)
    assert one == ten == hundred
    chunk = W * N * 4 * 16
    assert one[2][0] == 16 and one[0] == one[1] <= 2 * 2 * chunk  # two chunks per observable, each <= chunk_bytes
    short = sizes(300)  # a short run takes less (its chunk holds the whole run)
    assert short[0] < one[0] and short[2] == [16, 300 // 33 + 1]
    assert rows_per_chunk(8192, 42, 100_001, 16 * 2**20) == 12  # 8192 worlds x 42 angles: 12 samples a chunk
    assert rows_per_chunk(2, 42, 100_001, 16 * 2**20) == 256    # few worlds: MAX_ROWS samples
    assert rows_per_chunk(2, 42, 100_001, 16 * 2**20, min_rows=300) == 300  # never less than a launch


@pytest.mark.parametrize("K,every", [(1, 1), (3, 1), (3, 2), (7, 3), (16, 5), (4, 4)])
def test_launches_never_reach_a_slot_still_being_copied(K, every):
    """The host loop's rule (flycuda.sim.stepper.Loop.timed_loop): a K-step launch only when it ends by
    safe_until(), else one step; ensure_slots before and flush_ready after each. A launch may
    write into the chunk after the filling one (its slot's previous chunk was queued out, and
    ensure_slots makes the simulation stream wait for that copy), never into the one after
    that (whose slot the filling chunk still holds); ensure_slots itself refuses it. So no
    chunk edge forces an eager step: only the last partial launch runs eagerly."""
    from flycuda.recording import Observable
    from flycuda.recording.recorder import RING

    src = torch.randn(2, 5)
    obs = [Observable("a", "qpos", src, torch.arange(5, dtype=torch.int32), list("abcde"), every),
           Observable("b", "qpos", src, torch.arange(2, dtype=torch.int32), list("ab"), 1)]
    steps = 3000
    rec = Recorder(obs, steps, torch.device("cpu"), chunk_bytes=2 * 5 * 4 * 10, min_rows=K)
    done, eager = 0, 0
    rec.flush_ready(0)
    while done < steps:
        n = K if done + K <= min(steps, rec.safe_until()) else 1
        eager += n == 1 and K > 1
        rec.ensure_slots(done + 1, done + n)
        for st in rec.streams:  # every sample this launch records lands in a slot that is free
            for s in range(done + 1, done + n + 1):
                if s % st.obs.every == 0:
                    assert (s // st.obs.every) // st.C <= st.flushed + RING - 1, (s, st.obs.name, st.flushed)
        done += n
        rec.flush_ready(done)
    assert all(st.flushed == st.chunks for st in rec.streams)
    assert eager == (steps % K if K > 1 else 0), eager
    with pytest.raises(RuntimeError, match="would write chunk .* before chunk .* was queued out"):
        Recorder(obs, steps, torch.device("cpu"), chunk_bytes=2 * 5 * 4 * 10, min_rows=K).ensure_slots(1, steps)


# --- observables ---------------------------------------------------------------------

def test_parse_rates_and_errors():
    assert parse("qpos@30hz").hz == 30 and parse("qpos@7").every == 7 and parse("angles").every is None
    assert parse("body_pos:a,b*@2").names == ("a", "b*")
    for bad, msg in [("speed", r"unknown observable 'speed' in 'speed'; valid: angles, qpos, qvel, ctrl"),
                     ("body_pos", r"needs names"), ("qpos:x", r"takes no names"), ("qpos@0", r"bad rate"),
                     ("qpos@-3hz", r"bad rate"), ("qpos@fast", r"bad rate"), ("", r"non-empty")]:
        with pytest.raises(ObservableError, match=msg):
            parse(bad)


def test_resolve_names_and_unknown_ones():
    sim = _sim(2)
    obs = resolve(sim, ["qpos@30hz", "body_quat:Thorax", "ctrl"])
    assert obs[0].every == round(1 / (30 * DT)) and obs[0].column_names[:7] == [
        "root:x", "root:y", "root:z", "root:qw", "root:qx", "root:qy", "root:qz"]
    assert obs[1].column_names == ["Thorax:w", "Thorax:x", "Thorax:y", "Thorax:z"]
    assert obs[2].width == sim.mjm.nu and obs[2].source.data_ptr() == sim.view("ctrl").data_ptr()  # zero-copy
    with pytest.raises(ObservableError, match=r"body 'Abdomen' \(in body_pos:Abdomen\) matches nothing; the "
                                              r"model has: world, Thorax, LFCoxa"):
        resolve(sim, ["body_pos:Abdomen"])
    with pytest.raises(ObservableError, match=r"sensor 'x' .*the model has: none"):
        resolve(sim, ["sensor:x"])
    with pytest.raises(ObservableError, match=r"observable 'qpos' is given twice"):
        resolve(sim, ["qpos", "qpos@3"])


def test_body_quat_is_mujoco_order():
    """xquat columns are (w, x, y, z) as MuJoCo's: equal to mujoco's own forward pass."""
    import mujoco

    sim = _sim(1)
    q = sim.view("qpos")
    q[0, 3:7] = torch.tensor([0.8, 0.2, -0.4, 0.4]) / math.sqrt(0.8 ** 2 + 0.2 ** 2 + 0.16 * 2)
    sim.forward()
    d = mujoco.MjData(sim.mjm)
    d.qpos[:] = q[0].double().numpy()
    mujoco.mj_forward(sim.mjm, d)
    got = sim.view("xquat")[0, 1].double().numpy()
    assert np.allclose(got, d.xquat[1], atol=1e-6)


# --- reading and rendering afterwards ---------------------------------------------

def test_recording_reader_and_npz_export(tmp_path):
    res, _ = _replay(_sim(2), 10, ("angles", "qpos@5"))
    rec = res.recording
    assert rec.every("qpos") == 5 and np.allclose(rec.times("qpos"), [0, 5 * DT, 10 * DT])
    with pytest.raises(RecordingError, match="the recording has no 'sensor'; it has: angles, qpos, targets"):
        rec["sensor"]
    rec.to_npz(str(tmp_path / "r.npz"))
    z = np.load(tmp_path / "r.npz")
    assert np.array_equal(z["recorded"], res.recorded.numpy()) and z["dof_names"].shape == (42,)


def test_frames_rendered_afterwards_equal_live_frames(tmp_path):
    """Re-posing worlds from the stored qpos draws what the live worlds showed at those steps."""
    from flycuda.render import TileRenderer
    from flycuda.replay import render_recording, replay

    sim, every = _sim(3), 6
    tiles = TileRenderer(sim, "track", 40, 30, mosaic=True)
    live = []

    class Live:  # poses from the current qpos (kinematics), then the tile renderer
        worlds = tiles.worlds

        def render_mosaic(self):
            sim.kinematics()
            live.append(tiles.render_mosaic().clone())
            return live[-1]

    path = str(tmp_path / "r.zarr")  # a replay of a given Sim: the store is told its model
    replay(worlds=3, sim=sim, duration=4 * every * DT, progress=False, observe=("angles", f"qpos@{every}"),
           record=Target(path, attrs={"model": "hexapod", "camera": "track"}), renderer=Live(), render_every=every)
    got = []
    pb = render_recording(path, str(tmp_path / "v.mp4"), worlds="0:3", size=(40, 30), progress=False,
                          frame_callback=lambda f: got.append(f.clone()))
    assert pb.frames == 5 and len(live) == 5 and os.path.getsize(tmp_path / "v.mp4") > 0
    for k, (a, b) in enumerate(zip(live, got)):
        assert torch.equal(a, b), f"frame {k}"
    assert not torch.equal(got[0], got[-1])  # the fly moved
    with pytest.raises(RecordingError, match=r"worlds must select from 0\.\.2 \(the recording has 3\), got \[5\]"):
        render_recording(path, None, worlds="5", progress=False)


def test_render_needs_qpos_and_a_model(tmp_path):
    from flycuda.replay import render_recording

    path = str(tmp_path / "r.zarr")
    _replay(_sim(1), 4, ("angles",), record=path)
    with pytest.raises(RecordingError, match="the recording has no qpos .*--observe qpos@30hz"):
        render_recording(path, None, progress=False)
    path2 = str(tmp_path / "r2.zarr")
    _replay(_sim(1), 4, ("angles", "qpos"), record=path2)
    with pytest.raises(RecordingError, match="the recording does not name its model .*pass sim="):
        render_recording(path2, None, progress=False)
    assert render_recording(path2, None, progress=False, sim=_sim(1), size=(8, 6)).frames == 5


def test_cli_record_zarr_and_render(tmp_path, capsys):
    from flycuda.cli import main

    store, video = tmp_path / "r.zarr", tmp_path / "v.mp4"
    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--duration", "0.02", "--no-progress",
               "--record", str(store), "--observe", "qpos@10", "sensor:*"])
    assert rc == 2 and "sensor '*' (in sensor:*) matches nothing" in capsys.readouterr().err
    assert not store.exists()  # a bad observable fails before any store is made
    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--duration", "0.02", "--no-progress",
               "--record", str(store), "--observe", "qpos@10", "body_pos:Thorax"])
    assert rc == 0 and "MiB streamed to the store" in capsys.readouterr().out
    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--duration", "0.02", "--no-progress",
               "--record", str(store)])
    assert rc == 2 and "already exists; pass --overwrite" in capsys.readouterr().err
    rc = main(["render", str(store), "--worlds", "1", "--out", str(video), "--size", "32x24", "--no-progress"])
    assert rc == 0 and "5 frames x 1 worlds" in capsys.readouterr().out and video.stat().st_size > 0


@pytest.mark.needs_cuda
def test_cuda_graph_store_equals_eager(tmp_path):
    """On a GPU: the captured loop (K = 3 steps per launch) streams the same store as eager steps,
    and the simulation stream is never synchronized by the recorder (its copies run on a side stream)."""
    from flycuda.replay import replay
    from flycuda.sim import Sim

    stores = []
    for graph in (False, True):
        sim = Sim.build(None, 3, device="cuda")
        path = str(tmp_path / f"g{graph}.zarr")
        replay(worlds=3, sim=sim, duration=40 * DT, progress=False, graph=graph, steps_per_graph=3,
               observe=("angles", "qpos@7", "body_pos:Thorax"), record=path, chunk_bytes=3 * 42 * 4 * 5)
        stores.append(Recording.open(path))
    for name in stores[0].names:
        a, b = np.asarray(stores[0][name][:]), np.asarray(stores[1][name][:])
        assert stores[1].complete and not np.isnan(b).any(), name  # every sample arrived
        # MuJoCo Warp's GPU contacts are not bitwise deterministic run to run (atomics): within
        # the replay tests' 0.5 deg over 20 ms; a misplaced or stale chunk differs by far more
        assert np.abs(a - b).max() < np.deg2rad(0.5) or name in ("body_pos", "qpos"), name
        assert np.abs(a - b).max() < 1e-3 * max(1.0, np.abs(a).max()), name


@pytest.mark.parametrize("interp", ["linear", "cubic"])
@pytest.mark.parametrize("mode", ["clamp", "loop"])
@pytest.mark.parametrize("fps_step,every,first", [(330 * DT, 1, 0), (330 * 1e-4, 3, 997), (1 / 3, 7, 12345)])
def test_a_chunks_targets_in_one_launch_are_the_op_at_each_step(interp, mode, fps_step, every, first, monkeypatch):
    """The tracker's targets of a whole chunk come from one launch of the targets op (W x C
    virtual worlds whose frame positions are computed as the op computes them), bit for bit
    the op called row by row at each sample's counter; a per-world motion buffer goes row
    by row."""
    from flycuda import ops
    from flycuda.replay.stages import TargetRows, Targets
    from flycuda.sim import Motion, tripod_gait
    from flycuda.sim.stepper import Loop, LoopOptions

    sim = _sim(3)
    gen = torch.Generator().manual_seed(7)
    offs = torch.tensor([-2.5, 0.0, 1e3], dtype=torch.float64) + torch.rand(3, generator=gen, dtype=torch.float64)
    for motion in (tripod_gait(0.2), Motion(tripod_gait(0.2).angles.expand(3, -1, -1).contiguous(), 330.0,
                                             tripod_gait(0.2).dof_names)):
        run = Targets(motion, offs, mode, interp)
        run.setup(Loop(sim, [run], LoopOptions(steps=100)))
        run.fps_step = fps_step
        C, D = 11, len(motion.dof_names)
        got = torch.full((3, C, D), math.nan)
        calls = {"n": 0}
        op_name = "spline_to_ctrl" if interp == "cubic" else "motion_to_ctrl"
        real = getattr(ops, op_name)
        monkeypatch.setattr(ops, op_name, lambda *a, **k: calls.__setitem__("n", calls["n"] + 1) or real(*a, **k))
        rows = TargetRows(run, C)
        rows(got, first, every)
        monkeypatch.setattr(ops, op_name, real)
        if calls["n"] == 1:  # each virtual world's frame position: offset + step * fps, as sample_frame rounds it
            want_f = torch.tensor([[float(o) + float(first + r * every) * fps_step for r in range(C)] for o in offs],
                                  dtype=torch.float64)
            assert torch.equal(rows.offsets, want_f)
        assert calls["n"] == (1 if motion.angles.dim() == 2 or motion.angles.shape[0] == 1 else C)
        for r in range(C):
            want = torch.full((3, sim.mjm.nu), math.nan)
            run.write_targets(want, 0, torch.tensor([first + r * every]), torch.arange(D, dtype=torch.int32))
            assert torch.equal(got[:, r], want[:, :D]), (r, motion.angles.shape)


def test_an_observable_cannot_overwrite_the_stores_own_attributes():
    """An observable's attrs go onto its stored array after the store's own; these it may not set
    (a connectome observable once named its column set "columns" and hid the column names)."""
    from flycuda.recording.observables import RESERVED_ATTRS, Observable, ObservableError

    args = ("x", "x", torch.zeros(2, 3), torch.arange(3, dtype=torch.int32), ["a", "b", "c"], 1)
    assert Observable(*args, attrs={"units": ["m"] * 3}).attrs["units"] == ["m"] * 3
    for key in sorted(RESERVED_ATTRS):
        with pytest.raises(ObservableError, match=f"observable 'x': its attrs may not set {key}"):
            Observable(*args, attrs={key: 1})
