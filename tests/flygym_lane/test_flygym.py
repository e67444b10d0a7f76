"""flycuda on FlyGym's NeuroMechFly and Spotlight clip (the FlyGym lane: Python >= 3.12,
flygym[warp] 2.1, mujoco-warp 3.16), on Warp's CPU device.

* flycuda's replay loop vs FlyGym's GPU-tutorial loop (its Warp kernels: targets from
  the pre-expanded buffer at a device counter, set_actuator_inputs, step, increment),
  from the same state: joint angles equal bit for bit, with the pre-expanded buffer
  (motion_to_ctrl copies) and with flycuda's cubic mode (spline_to_ctrl from 660
  frames instead of [W, steps, 42]).
* spline_to_ctrl's targets vs FlyGym's resampled angles at every simulation step.
* NeuroMechFly rendered by flycuda vs mjw.render.
* Bad input. The tests without FlyGym (missing FlyGym, old Python) run in every lane.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

wp = pytest.importorskip("warp")  # FlyGym's tutorial kernels below are Warp kernels

import flycuda  # noqa: E402
from flycuda import flygym as fg  # noqa: E402
from flycuda.errors import FlyGymError  # noqa: E402
from flycuda.replay import ReplayError, replay  # noqa: E402
from flycuda.sim import BridgeError, Motion, MotionError  # noqa: E402

needs_flygym = pytest.mark.needs_flygym
W, STEPS, WARMUP = 3, 200, 20  # worlds, compared steps, warm-up steps (FlyGym's sim.warmup)


# --- FlyGym's tutorial loop (flygym_demo/benchmark/time_gpu_simulation.py), eagerly ---------

@wp.kernel
def update_target_angles_kernel(dof_angles_all_worlds_gpu: wp.array3d(dtype=float),
                                step_counter_gpu: wp.array(dtype=int),
                                curr_target_angles_gpu: wp.array2d(dtype=float)):
    world_id, actuator_id = wp.tid()
    step = step_counter_gpu[0]
    curr_target_angles_gpu[world_id, actuator_id] = dof_angles_all_worlds_gpu[world_id, step, actuator_id]

def _buffer_motion(buffer, fly, sim, timestep: float = fg.TIMESTEP):
    """A pre-expanded FlyGym buffer [W, steps, D] (one target per simulation step at
    ``timestep``) as a flycuda Motion for ``sim`` (motion_to_ctrl then copies frame s at step
    s exactly); FlyGymError when the simulation steps another timestep."""
    if sim.timestep != timestep:
        raise FlyGymError(f"the buffer holds one target per {timestep:g} s step but the simulation steps "
                          f"{sim.timestep:g} s: resample at the simulation's timestep")
    a = torch.as_tensor(np.asarray(buffer), dtype=torch.float32)
    names = fg.dof_names(fly)
    if a.dim() != 3 or a.shape[-1] != len(names):
        raise FlyGymError(f"a FlyGym buffer must be [W, steps, {len(names)}], got {tuple(a.shape)}")
    return Motion(a, _one_frame_per_step(timestep), names)


def _one_frame_per_step(timestep: float) -> float:
    """A frame rate ``fps`` with ``fps * timestep == 1.0`` exactly in float64 (1 / timestep is
    off by an ulp for some timesteps, e.g. 1e-5), so that step s reads frame s exactly."""
    fps = 1.0 / timestep
    for cand in (fps, math.nextafter(fps, math.inf), math.nextafter(fps, 0.0)):
        if cand * timestep == 1.0:
            return cand
    raise AssertionError(f"no float64 frame rate gives exactly one frame per {timestep!r} s step")



@wp.kernel
def increment_counter_kernel(step_counter_gpu: wp.array(dtype=int)):
    step_counter_gpu[0] = step_counter_gpu[0] + 1


def _qpos_adrs(gpu_sim, fly) -> np.ndarray:
    """qpos address of each actuated DOF, from MuJoCo's joint names (not flycuda's mapping)."""
    import mujoco

    m = gpu_sim.mj_model
    jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, f"{fly.name}/{n}") for n in fg.dof_names(fly)]
    assert min(jids) >= 0
    return m.jnt_qposadr[jids]


def _flygym_tutorial_loop(setup: fg.Setup, buffer: np.ndarray) -> torch.Tensor:
    """FlyGym's loop over the pre-expanded buffer; joint angles after every step [W, steps, D]."""
    from flygym.compose import ActuatorType

    update, increment = update_target_angles_kernel, increment_counter_kernel
    gs, fly = setup.gpu_sim, setup.fly
    adrs = torch.from_numpy(_qpos_adrs(gs, fly)).long()
    out = []
    with wp.ScopedDevice("cpu"):
        buf = wp.array(buffer)
        targets = wp.zeros((W, buffer.shape[2]), dtype=wp.float32)
        counter = wp.array([0], dtype=wp.int32)
        for _ in range(buffer.shape[1]):
            wp.launch(update, dim=(W, buffer.shape[2]), inputs=[buf, counter], outputs=[targets])
            gs.set_actuator_inputs(fly.name, ActuatorType.POSITION, targets)
            gs.step()
            wp.launch(increment, dim=1, outputs=[counter])
            out.append(wp.to_torch(gs.mjw_data.qpos)[:, adrs].clone())
    return torch.stack(out, dim=1)


def _warmed_up_setup() -> fg.Setup:
    setup = fg.Setup("neuromechfly", W, device="cpu")
    with wp.ScopedDevice("cpu"):
        for _ in range(WARMUP):  # FlyGym's sim.warmup(), shortened
            setup.gpu_sim.step()
    return setup


@pytest.fixture(scope="module")
def flygym_run():
    """FlyGym's own loop on its pre-expanded buffer (per-world snippets of STEPS steps)."""
    setup = _warmed_up_setup()
    buffer = fg.tutorial_buffer(setup.fly, W, STEPS)
    assert len({buffer[w, 0].tobytes() for w in range(W)}) == W, "every world needs its own snippet"
    angles = _flygym_tutorial_loop(setup, buffer)
    assert (angles[:, -1] - angles[:, 0]).abs().max() > 0.05, "the legs must move for the comparison to count"
    return buffer, angles


def _flycuda_run(motion_of, interp: str, **kw):
    setup = _warmed_up_setup()
    motion = motion_of(setup)
    res = replay(motion=motion, worlds=W, duration=STEPS * setup.sim.timestep, sim=setup.sim,
                                act_ids=setup.act_ids, keep_state=True, interp=interp, progress=False, record="memory", **kw)
    assert res.steps == STEPS
    return res


@needs_flygym
def test_replay_equals_flygym_tutorial_loop_pre_expanded(flygym_run):
    """The same buffer through motion_to_ctrl: bit-identical joint angles at every step."""
    buffer, expected = flygym_run
    res = _flycuda_run(lambda s: _buffer_motion(buffer, s.fly, s.sim), "linear")
    assert torch.equal(res.recorded[:, 1:], expected), \
        f"max |diff| {float((res.recorded[:, 1:] - expected).abs().max())} rad"


@needs_flygym
def test_cubic_replay_equals_flygym_tutorial_loop(flygym_run):
    """spline_to_ctrl from the 660-frame clip, at the same per-world snippets: the same
    targets to the bit, so the same joint angles as FlyGym's pre-expanded run."""
    buffer, expected = flygym_run
    res = _flycuda_run(lambda s: fg.spotlight(s.fly), "cubic", offsets=fg.tutorial_offsets(W, STEPS))
    assert torch.equal(res.targets[:, :STEPS], torch.from_numpy(buffer)), "targets differ from FlyGym's buffer"
    diff = (res.recorded[:, 1:] - expected).abs()
    assert torch.equal(res.recorded[:, 1:], expected), f"max |diff| {float(diff.max())} rad"


def _ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Distance in float32 units in the last place (same-sign values)."""
    return (a.view(torch.int32).long() - b.view(torch.int32).long()).abs()


@needs_flygym
def test_cubic_targets_equal_flygym_resampled_angles():
    """At every simulation step of the clip (20,000 at 1e-4 s), spline_to_ctrl's target
    equals FlyGym's resampled angle rounded to float32. Measured with the pinned scipy:
    0 ulp everywhere. Asserted: at most 1 ulp, on at most 0.01% of the values: scipy
    evaluates the same spline another way (B-spline, de Boor), so its float64 values may
    differ in their last bits and round the other way when they fall on a float32 tie."""
    fly = fg.neuromechfly()[0]
    expected = torch.from_numpy(fg.flygym_targets(fly).astype(np.float32))  # [steps, 42]
    motion = fg.spotlight(fly)
    coeffs, D = motion.spline(), len(motion.dof_names)
    n = expected.shape[0]
    # One "world" per step: step s at frame offset s * fps * dt (step counter at 0) ...
    got = torch.empty(n, D)
    offs = torch.arange(n, dtype=torch.float64) * (fg.SPOTLIGHT_FPS * fg.TIMESTEP)
    flycuda.spline_to_ctrl(coeffs, flycuda.new_step_counter(), got, torch.arange(D), offsets=offs,
                           frames_per_step=0.0)
    assert _ulps(got, expected).max() <= 1
    assert (got != expected).float().mean() <= 1e-4
    # ... and through the device counter, as the replay reads it (every 7th step).
    step, row = flycuda.new_step_counter(), torch.empty(1, D)
    for s in range(0, n, 7):
        step[0] = s
        flycuda.spline_to_ctrl(coeffs, step, row, torch.arange(D), frames_per_step=fg.SPOTLIGHT_FPS * fg.TIMESTEP)
        assert _ulps(row[0], expected[s]).max() <= 1, s


@needs_flygym
def test_actuator_ids_follow_flygym_order():
    setup = fg.Setup("neuromechfly", 2, device="cpu")
    from flygym.compose import ActuatorType

    internal = setup.gpu_sim._intern_actuatorids_by_type_by_fly[ActuatorType.POSITION][setup.fly.name]
    assert setup.act_ids.tolist() == list(np.asarray(internal))
    # FlyGym's DOF names, without the fly's "nmf/" prefix, match the same actuators.
    assert setup.sim.actuator_ids(fg.dof_names(setup.fly)).tolist() == setup.act_ids.tolist()
    assert setup.sim.qpos_adrs(setup.act_ids).tolist() == _qpos_adrs(setup.gpu_sim, setup.fly).tolist()
    assert setup.sim.view("qpos").data_ptr() == setup.gpu_sim.mjw_data.qpos.ptr  # zero-copy


@needs_flygym
@pytest.mark.parametrize("model", ["neuromechfly", "neuromechfly-capsules"])
def test_neuromechfly_render_matches_mujoco_warp(model):
    """Per-world segmentation IoU >= 0.98 and median depth error <= 1% vs mjw.render, with
    the worlds in different poses (each replayed a different snippet)."""
    import mujoco_warp as mjw
    from helpers.images import tile_renderer

    setup = fg.Setup(model, 2, device="cpu")
    motion = fg.spotlight(setup.fly)
    replay(motion=motion, worlds=2, duration=0.003, sim=setup.sim, act_ids=setup.act_ids,
                          interp="cubic", offsets=[0.0, 1.0], progress=False, record="memory")
    sim, cam, Wd, H = setup.sim, setup.camera, 64, 48
    tr = tile_renderer(sim, cam, Wd, H)
    with wp.ScopedDevice("cpu"):
        rc = mjw.create_render_context(sim.mjm, nworld=2, cam_res=(Wd, H), render_rgb=True, render_depth=True,
                                       render_seg=True, cam_active=[sim.camera_id(cam)])
        mjw.refit_bvh(sim.model, sim.data, rc)
        mjw.render(sim.model, sim.data, rc)
        seg = wp.zeros((2, H, Wd), dtype=wp.vec2i)
        depth = wp.zeros((2, H, Wd), dtype=wp.float32)
        mjw.get_segmentation(rc, 0, seg)
        mjw.get_depth(rc, 0, 1.0e6, depth)
    m_seg, m_depth = wp.to_torch(seg)[..., 0], wp.to_torch(depth) * 1.0e6
    for w in range(2):
        a, b = tr.seg[w], m_seg[w]
        fg_px = (a >= 0) | (b >= 0)
        assert len(torch.unique(a[a >= 0])) >= 10  # the floor and many parts of the fly are in view
        iou = ((a == b) & fg_px).sum() / fg_px.sum()
        assert iou >= 0.98, (model, w, float(iou))
        both = (a == b) & (a >= 0)
        rel = ((tr.depth[w][both] - m_depth[w][both]).abs() / m_depth[w][both]).median()
        assert rel <= 0.01, (model, w, float(rel))


# --- bad input ---------------------------------------------------------------------------

def test_old_python_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 11, 7, "final", 0))
    with pytest.raises(fg.FlyGymError, match=r"FlyGym 2.x needs Python >= 3.12; this is Python"):
        fg.require()
    assert not fg.available()


def test_missing_flygym_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    monkeypatch.setitem(sys.modules, "flygym", None)  # import flygym -> ImportError
    monkeypatch.setitem(sys.modules, "flygym.compose", None)
    with pytest.raises(fg.FlyGymError, match=r"FlyGym is not installed .*pip install 'flycuda\[flygym\]'"):
        fg.neuromechfly()


def test_cli_without_flygym_exits_2_with_one_line(tmp_path):
    """--model neuromechfly where FlyGym cannot be imported (blocked here in a subprocess)."""
    code = ("import sys; sys.modules['flygym'] = None; sys.modules['flygym.compose'] = None; "
            "from flycuda.cli.main import main; sys.exit(main(['replay', '--model', 'neuromechfly', '--device', 'cpu', "
            "'--no-progress', '--duration', '0.001']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("flycuda:")]
    assert len(lines) == 1 and ("FlyGym is not installed" in lines[0] or "needs Python >= 3.12" in lines[0])


@pytest.mark.parametrize("argv,msg", [
    (["--motion", "spotlight"], "--motion spotlight is NeuroMechFly's recording: use it with --model neuromechfly"),
    (["--model", "neuromechfly", "--motion", "tripod"], "--motion tripod drives the built-in hexapod"),
    (["--model", "spotlight"], "model file not found: spotlight (or name one of: hexapod, neuromechfly"),
    (["--motion", "hexapod"], "motion file not found: hexapod (or name one of: tripod, spotlight)"),
    (["--warmup", "-1"], "argument --warmup: expected a number >= 0, got -1"),
    (["--vision"], "--vision needs a fly with eyes: --model neuromechfly"),
    (["--model", "neuromechfly", "--vision", "fast:0"], "bad vision spec 'fast:0'"),
    (["--model", "neuromechfly", "--vision", "--record", "eyes.npz"], "--vision readouts go into a .zarr store"),
])
def test_cli_named_model_and_motion_errors(argv, msg, capsys):
    from flycuda.cli import main

    try:
        rc = main(["replay", "--device", "cpu", "--no-progress"] + argv)
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err


def test_one_frame_per_step_is_exact():
    for dt in (1e-4, 1e-5, 2e-5, 8e-5, 1.6e-4, 3.2e-4, 2e-3):
        assert _one_frame_per_step(dt) * dt == 1.0, dt


def test_clip_shorter_than_one_frame():
    with pytest.raises(MotionError, match="T >= 1"):
        Motion(torch.zeros(0, 42), 330.0, tuple(f"d{i}" for i in range(42)))


@needs_flygym
def test_wrong_dof_names_and_mismatched_timestep():
    setup = fg.Setup("neuromechfly", 1, device="cpu")
    bad = Motion(torch.zeros(5, 2), 330.0, ("c_thorax-lf_coxa-yaw", "lf_wing-yaw"))
    with pytest.raises(BridgeError, match=r"1 of 2 motion DOFs match no actuator or actuated joint: lf_wing-yaw"):
        setup.sim.actuator_ids(bad.dof_names)
    with pytest.raises(BridgeError, match=r"1 of 2 motion DOFs match no actuator"):
        replay(motion=bad, worlds=1, sim=setup.sim, progress=False, record="memory")
    with pytest.raises(ReplayError, match=r"act_ids must have shape \[2\]"):
        replay(motion=bad, worlds=1, sim=setup.sim, act_ids=setup.act_ids, progress=False, record="memory")
    buf = fg.tutorial_buffer(setup.fly, 1, 10, timestep=2e-4)
    with pytest.raises(fg.FlyGymError, match=r"one target per 0.0002 s step but the simulation steps 0.0001 s"):
        _buffer_motion(buf, setup.fly, setup.sim, timestep=2e-4)
    with pytest.raises(fg.FlyGymError, match="unknown FlyGym model 'nmf'"):
        fg.Setup("nmf", 1)
    with pytest.raises(fg.FlyGymError, match="wrap needs a flygym.warp.GPUSimulation"):
        fg.wrap(object())


# --- recordings: NeuroMechFly's observables, FlyGym's RecordedTrajectory -------------------

@pytest.fixture(scope="module")
def nmf_recording():
    """2 worlds of NeuroMechFly after FlyGym's settling: joint angles, qpos, the thorax
    position and FlyGym's ground-contact sensors, every step, in a zarr store in memory."""
    setup = fg.Setup("neuromechfly", 2, device="cpu")
    res = replay(motion=fg.spotlight(setup.fly), worlds=2, duration=12 * setup.sim.timestep, sim=setup.sim,
                 act_ids=setup.act_ids, interp="cubic", offsets=[0.0, 1.0], warmup=0.05, progress=False,
                 record="memory", observe=("angles", "qpos", "body_pos:c_thorax", "sensor:*ground_contact*"))
    return setup, res


@needs_flygym
def test_neuromechfly_thorax_and_ground_contacts_recorded(nmf_recording):
    setup, res = nmf_recording
    rec = res.recording
    legs = ("lf", "lm", "lh", "rf", "rm", "rh")
    assert rec.columns("sensor") == [f"nmf/ground_contact_{leg}_leg:{c}" for leg in legs for c in range(16)]
    assert rec.columns("body_pos") == ["nmf/c_thorax:x", "nmf/c_thorax:y", "nmf/c_thorax:z"]
    q, thorax = np.asarray(rec["qpos"][:]), np.asarray(rec["body_pos"][:])
    # derived quantities are MuJoCo's of the step's start: the thorax sample k is qpos[k - 1]'s free joint
    assert np.array_equal(thorax[:, 1:], q[:, :-1, 0:3])
    contact = np.asarray(rec["sensor"][:]).reshape(2, -1, 6, 16)
    found, force_z = contact[..., 0], contact[..., 3]
    assert ((found[:, -1] > 0).sum(1) >= 3).all(), "a settled fly stands on several legs"
    assert np.all((force_z[:, -1] != 0) == (found[:, -1] > 0))
    assert torch.isfinite(res.rmse_per_dof).all()


@needs_flygym
def test_recorded_trajectory_round_trip_both_ways(nmf_recording, tmp_path):
    """flycuda -> FlyGym's RecordedTrajectory (save/load) -> flycuda: qpos equal; the store
    made from FlyGym's trajectories renders with flycuda's renderer."""
    from flygym.recording import RecordedTrajectory, check_trajectories_match_model

    from flycuda.replay import render_recording

    setup, res = nmf_recording
    trajs = fg.to_trajectories(res.recording, [1, 0], playback_speed=setup.sim.timestep * 100)
    check_trajectories_match_model(setup.sim.mjm, trajs)
    assert [t.world_id for t in trajs] == [1, 0] and trajs[0].output_fps == 100
    trajs[0].save(tmp_path / "t.npz")
    back = RecordedTrajectory.from_file(tmp_path / "t.npz")
    assert np.array_equal(back.qpos, np.asarray(res.recording["qpos"][1]))
    rec = fg.from_trajectories([back, trajs[1]], str(tmp_path / "f.zarr"), setup.sim.mjm,
                               timestep=setup.sim.timestep, camera=setup.camera)
    assert rec.complete and rec.every("qpos") == 1
    assert np.array_equal(np.asarray(rec["qpos"][:]), np.asarray(res.recording["qpos"][[1, 0]]))
    pb = render_recording(rec, None, worlds="0:2", size=(32, 24), progress=False, max_frames=2)
    assert pb.frames == 2 and pb.worlds == 2
    with pytest.raises(fg.FlyGymError, match="FlyGym's output_fps is an integer"):
        fg.to_trajectories(res.recording, playback_speed=setup.sim.timestep * 0.3)
