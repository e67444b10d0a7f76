"""The main job on Warp's CPU device: API, CLI, determinism, wrapping, bad input."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.needs_warp

STEPS = 50
DT = 0.0005  # the built-in model's timestep
# Tracking bound after the first 10 ms. The joints start at their targets; the
# position servos (kp = 4 N m/rad) then carry the body's weight (static error
# ~0.5 deg) and lag the gait (up to ~15 rad/s at 8 Hz): measured RMSE per DOF
# <= 3.3 deg, max error 4.5 deg. If ctrl were not driven, the targets would move
# away by up to ~20 deg over these 25 ms, far outside the bound.
RMSE_BOUND_DEG = 5.0
MAX_ERR_BOUND_DEG = 8.0


@pytest.fixture(scope="module")
def result():
    from flycuda.replay import replay

    return replay(worlds=2, duration=STEPS * DT, snippet=None, progress=False, record="memory", device="cpu")


def test_api_replay_tracks_targets(result):
    assert result.steps == STEPS and result.recorded.shape == (2, STEPS + 1, 42)
    assert not torch.isnan(result.recorded).any(), "every row must have been recorded"
    rmse_deg = torch.rad2deg(result.rmse_per_dof)
    assert rmse_deg.max() < RMSE_BOUND_DEG, rmse_deg
    settle = int(math.ceil(0.01 / DT))
    err = torch.rad2deg((result.recorded[:, settle:] - result.targets[:, settle:]).abs())
    assert err.max() < MAX_ERR_BOUND_DEG
    # the targets really move over the run (so the bound is not trivially met)
    assert torch.rad2deg((result.targets[:, -1] - result.targets[:, 0]).abs()).max() > 3 * RMSE_BOUND_DEG
    rep = result.report()
    for word in ("x real time", "world-steps/s", "physics", "flycuda ops", "JIT", "tracking RMSE", "peak memory"):
        assert word in rep


def test_two_runs_are_identical(result):
    from flycuda.replay import replay

    again = replay(worlds=2, duration=STEPS * DT, progress=False, record="memory", device="cpu")
    assert torch.equal(again.recorded, result.recorded)  # MuJoCo Warp on the CPU is deterministic


# MuJoCo Warp on a GPU is not bitwise reproducible (atomics in contact allocation and
# solver reductions reorder float32 sums), so GPU runs are compared with tolerances:
# per-step differences start at float32 rounding (~1e-7 rad) and contacts amplify
# them; over 25 ms the replayed angles stay within 0.5 deg of each other and of the
# CPU run, far inside the 5 deg tracking bound, while a broken glue step (stale or
# shuffled targets) moves them by tens of degrees.
GPU_MATCH_DEG = 0.5


@pytest.mark.needs_cuda
def test_gpu_runs_agree_within_tolerance(result):
    from flycuda.replay import replay

    a = replay(worlds=2, duration=STEPS * DT, progress=False, record="memory", device="cuda")
    b = replay(worlds=2, duration=STEPS * DT, progress=False, record="memory", device="cuda")
    assert a.device.startswith("cuda") and a.graph
    for run in (b.recorded, result.recorded):
        assert torch.rad2deg((a.recorded - run).abs()).max() < GPU_MATCH_DEG
    assert torch.rad2deg(a.rmse_per_dof).max() < RMSE_BOUND_DEG


def test_snippets_give_each_world_its_own_start():
    from flycuda.replay import replay
    from flycuda.sim.motion import snippet_offsets, tripod_gait

    motion = tripod_gait(2.0)
    offs = snippet_offsets(motion, 3, 0.1)
    assert offs[0] == 0 and offs[-1] == round(660 - 0.1 * 330) and torch.all(offs.diff() > 0)
    res = replay(motion=motion, worlds=3, snippet=0.1, duration=20 * DT, progress=False, record="memory", device="cpu")
    assert not torch.equal(res.targets[0], res.targets[1])
    assert not torch.equal(res.recorded[0], res.recorded[2])


def test_pre_expanded_buffer_equals_recording():
    """A [W, steps, D] buffer at the simulation rate drives the same replay bit for bit."""
    from flycuda.replay import replay
    from flycuda.sim import Motion, tripod_gait

    rec = tripod_gait(0.2, fps=1.0 / DT)  # one frame per step, so no blending
    offsets = torch.tensor([0.0, 37.0], dtype=torch.float64)
    n = 30
    idx = offsets.long()[:, None] + torch.arange(n + 1)[None, :]
    expanded = Motion(rec.angles[idx], rec.fps, rec.dof_names)  # [2, n+1, 42]
    a = replay(motion=rec, worlds=2, offsets=offsets, duration=n * DT, progress=False, record="memory", device="cpu")
    b = replay(motion=expanded, worlds=2, duration=n * DT, progress=False, record="memory", device="cpu")
    assert torch.equal(a.recorded, b.recorded)


def test_wrapped_external_mjw_data_and_zero_copy_views():
    import mujoco_warp as mjw
    import warp as wp

    from flycuda.replay import replay
    from flycuda.sim import fly_model
    from flycuda.sim.mjwarp import VIEW_FIELDS, Sim

    mjm = fly_model()
    with wp.ScopedDevice("cpu"):
        m, d = mjw.put_model(mjm), mjw.make_data(mjm, nworld=2)
    sim = Sim.wrap(m, d, mjm)
    for f in VIEW_FIELDS:
        t = sim.view(f)
        assert t.data_ptr() == getattr(d, f).ptr or t.numel() == 0, f  # zero-copy (sensordata: none here)
        assert t.shape[0] == 2
    assert sim.view("geom_xmat").shape[-2:] == (3, 3)
    res = replay(sim=sim, worlds=2, duration=10 * DT, progress=False, record="memory")
    assert torch.equal(wp.to_torch(d.qpos)[:, sim.qpos_adrs(sim.actuator_ids(res.dof_names)).long()],
                       res.recorded[:, -1])
    assert float(wp.to_torch(d.time)[0]) == pytest.approx(10 * DT)


def test_motion_npz_round_trip_and_leg_layout(tmp_path):
    from flycuda.sim import load_motion, save_motion, tripod_gait

    m = tripod_gait(0.1)
    p = tmp_path / "m.npz"
    save_motion(str(p), m)
    back = load_motion(str(p))
    assert torch.equal(back.angles, m.angles) and back.fps == m.fps and back.dof_names == m.dof_names
    legs = tmp_path / "legs.npz"
    np.savez(legs, angles=m.angles.numpy().reshape(-1, 6, 7), fps=330.0,
             dof_names=np.array(m.dof_names).reshape(6, 7))
    assert torch.equal(load_motion(str(legs)).angles, m.angles)


def test_cli_replay_end_to_end(tmp_path, capsys):
    from flycuda.cli import main

    out = tmp_path / "rec.npz"
    frames = tmp_path / "mosaic.png"
    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--duration", str(STEPS * DT), "--no-progress",
               "--record", str(out), "--frames", str(frames), "--render-every", "25",
               "--render-size", "32x24"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "flycuda replay: 2 worlds x 50 steps" in text and "tracking RMSE" in text
    data = np.load(out)
    assert data["recorded"].shape == (2, STEPS + 1, 42) and data["targets"].shape == (2, STEPS + 1, 42)
    assert data["rmse_per_dof"].shape == (42,) and str(data["offsets"]) == "zero"
    import imageio.v3 as iio

    img = iio.imread(frames)
    assert img.shape == (24, 64, 3) and img.std() > 5  # two 32x24 tiles side by side, not blank
    assert not [f for f in os.listdir(tmp_path) if ".part" in f]  # nothing half-written


def _bad_motion(tmp_path, name, **overrides):
    from flycuda.sim import tripod_gait

    m = tripod_gait(0.1)
    fields = dict(angles=m.angles.numpy(), fps=330.0, dof_names=np.array(m.dof_names))
    fields.update(overrides)
    p = tmp_path / f"{name}.npz"
    np.savez(p, **fields)
    return str(p)


@pytest.mark.parametrize("case", ["missing_motion", "missing_model", "unmatched", "worlds0",
                                  "duration0", "fps0", "offsets_count"])
def test_cli_bad_input_one_line(case, tmp_path, capsys):
    from flycuda.cli import main

    args = ["replay", "--no-progress", "--worlds", "2", "--duration", "0.005"]
    expect = {
        "missing_motion": (["--motion", str(tmp_path / "nope.npz")], "motion file not found"),
        "missing_model": (["--model", str(tmp_path / "nope.xml")], "model file not found"),
        "unmatched": (["--motion", _bad_motion(tmp_path, "unmatched", dof_names=np.array(
            ["joint_LFCoxa"] + [f"wing_{i}" for i in range(41)]))],
            "41 of 42 motion DOFs match no actuator or actuated joint: wing_0"),
        "worlds0": (["--worlds", "0"], "argument --worlds: expected a positive integer, got 0"),
        "duration0": (["--duration", "-1"], "argument --duration: expected a positive number, got -1"),
        "fps0": (["--motion", _bad_motion(tmp_path, "fps0", fps=0.0)], "motion fps must be a positive number"),
        "offsets_count": (["--offsets", "0.1,0.2,0.3"], "--offsets needs 1 or 2"),
    }[case]
    with pytest.raises(SystemExit) if case in ("worlds0", "duration0") else _nullcontext() as exc:
        rc = main(args + expect[0])
    rc = exc.value.code if case in ("worlds0", "duration0") else rc
    err = capsys.readouterr().err.strip().splitlines()
    err = [e for e in err if "Warp CUDA warning" not in e]
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("flycuda") and expect[1] in err[0], err[0]


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_cli_subprocess_error_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "flycuda", "replay", "--motion", str(tmp_path / "x.npz")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "flycuda: error: motion file not found" in proc.stderr


@pytest.mark.parametrize("kw,msg", [
    (dict(worlds=0), "worlds must be a positive integer, got 0"),
    (dict(duration=0.0), "duration must be > 0 seconds, got 0.0"),
    (dict(steps_per_graph=0), "steps_per_graph must be an integer >= 1, got 0"),
    (dict(mode="bounce"), "mode must be 'clamp' or 'loop'"),
])
def test_api_bad_input(kw, msg):
    from flycuda.replay import ReplayError, replay

    with pytest.raises(ReplayError, match=msg):
        replay(**{"progress": False, **kw})


def test_cubic_replay_targets_are_the_spline():
    """interp="cubic" drives the worlds with spline_to_ctrl: the targets the replay reports
    are the spline of the recording (not the linear blend), at every recorded step."""
    from flycuda.ops import spline_coeffs
    from flycuda.replay import replay
    from flycuda.sim import tripod_gait

    motion = tripod_gait(0.3)
    lin = replay(motion=motion, worlds=2, snippet=0.1, duration=40 * DT, progress=False, record="memory", device="cpu")
    cub = replay(motion=motion, worlds=2, snippet=0.1, duration=40 * DT, progress=False, record="memory", device="cpu",
                 interp="cubic")
    assert not torch.equal(lin.targets, cub.targets) and cub.interp == "cubic"
    coeffs = spline_coeffs(motion.angles)[0].numpy()  # [T, 4, D]
    for r in (0, 7, 40):  # world 0 starts at frame 0
        pos = 0.0 + r * (motion.fps * DT)  # as the kernel: offset + step * frames_per_step
        i, a = int(pos), pos - int(pos)
        c = coeffs[i]
        want = torch.from_numpy(c[0] + a * (c[1] + a * (c[2] + a * c[3]))).float()
        assert torch.equal(cub.targets[0, r], want), r
    assert (cub.recorded - cub.targets)[:, -1].abs().max() < 0.3  # it tracks


def test_warmup_and_keep_state():
    """warmup settles with the first targets (the step counter does not move); keep_state
    starts from the worlds' state as it is."""
    from flycuda.replay import ReplayError, replay
    from flycuda.sim import Sim, tripod_gait

    motion = tripod_gait(0.3)
    sim = Sim.build(None, 2, device="cpu")
    res = replay(motion=motion, worlds=2, sim=sim, duration=5 * DT, warmup=10 * DT, progress=False, record="memory")
    assert res.steps == 5
    assert float(sim.view("time")[0]) == pytest.approx(15 * DT)  # 10 warm-up steps + 5
    q = sim.view("qpos").clone()
    res2 = replay(motion=motion, worlds=2, sim=sim, duration=3 * DT, keep_state=True, progress=False, record="memory")
    adrs = sim.qpos_adrs(sim.actuator_ids(motion.dof_names)).long()
    assert torch.equal(res2.recorded[:, 0], q[:, adrs])  # row 0 is the state it was given
    for bad in (-1.0, float("nan"), True):
        with pytest.raises(ReplayError, match="warmup must be >= 0 seconds"):
            replay(motion=motion, worlds=2, sim=sim, warmup=bad, progress=False, record="memory")
    with pytest.raises(ReplayError, match="interp must be 'linear' or 'cubic', got 'spline'"):
        replay(motion=motion, worlds=2, sim=sim, interp="spline", progress=False, record="memory")
    with pytest.raises(ReplayError, match=r"act_ids must have shape \[42\]"):
        replay(motion=motion, worlds=2, sim=sim, act_ids=[0, 1], progress=False, record="memory")


def test_cli_interp_and_warmup(tmp_path, capsys):
    from flycuda.cli import main

    out = tmp_path / "m.json"
    rc = main(["replay", "--device", "cpu", "--worlds", "2", "--duration", "0.002", "--interp", "cubic",
               "--warmup", "0.001", "--no-progress", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "model          hexapod; motion tripod; cubic targets" in text
    assert out.exists()


def test_cli_model_file_named_like_a_flygym_model(tmp_path, capsys):
    """An MJCF file whose name starts with "neuromechfly" is a file, not the FlyGym model."""
    from flycuda.cli import main
    from flycuda.sim.hexapod import fly_model_xml

    path = tmp_path / "neuromechfly_v2.xml"
    path.write_text(fly_model_xml())
    rc = main(["replay", "--device", "cpu", "--worlds", "1", "--duration", "0.001", "--no-progress",
               "--model", str(path)])
    assert rc == 0, capsys.readouterr().err
    assert "linear targets" in capsys.readouterr().out
