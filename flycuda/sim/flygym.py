"""The FlyGym bridge: NeuroMechFly and the Spotlight recording, through FlyGym 2.x.

For code that already has a FlyGym ``GPUSimulation``::
    from flycuda import flygym as fg
    sim = fg.wrap(gpu_sim)                      # zero-copy flycuda Sim of its mjw pair
    act_ids = fg.actuator_ids(sim, fly)         # FlyGym's actuated-DOF order
    motion = fg.spotlight(fly)                  # the bundled clip, FlyGym's preprocessing

and to build the model the way FlyGym's GPU tutorial and benchmark do:
:func:`neuromechfly` (the fly, its world and tracking camera) and
:func:`gpu_simulation` (on flycuda's device choice, CPU when there is no GPU).

FlyGym 2.x needs Python >= 3.12; everything here raises :class:`FlyGymError`
(one line) when FlyGym cannot be imported. Install with
``pip install 'flycuda[flygym]'`` (or ``bash run.sh`` on a machine with Python 3.12).
"""

from __future__ import annotations

import math
import sys
import warnings

import mujoco
import numpy as np
import torch

from ..errors import FlyGymError
from ..recording import store as zstore
from ..recording.observables import qpos_labels
from ..recording.reader import Recording, parse_worlds
from .mjwarp import Sim, import_warp, warp_device_for
from .motion import Motion

__all__ = ["FlyGymError", "available", "require", "neuromechfly", "gpu_simulation", "wrap", "dof_names",
           "actuator_ids", "spotlight", "flygym_targets", "tutorial_buffer", "tutorial_offsets",
           "buffer_motion", "Setup", "MODELS", "SPOTLIGHT_FPS", "TIMESTEP",
           "MIN_PYTHON", "to_trajectories", "from_trajectories"]

MIN_PYTHON = (3, 12)
TIMESTEP = 1e-4       # FlyGym's GPU tutorial and benchmark
SPOTLIGHT_FPS = 330.0  # the bundled clip's frame rate (checked against the file)


def require():
    """Imports FlyGym's modules flycuda uses; raises FlyGymError saying why it cannot."""
    if sys.version_info < MIN_PYTHON:
        raise FlyGymError(f"FlyGym 2.x needs Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}; this is Python "
                          f"{sys.version.split()[0]} (run.sh picks a Python >= 3.12 when the machine has one)")
    try:
        import_warp()  # quiets Warp before FlyGym imports it
        import flygym.compose  # noqa: F401, PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
        import flygym.warp  # noqa: F401, PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
        import flygym_demo.spotlight_data  # noqa: F401, PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
    except ImportError as e:
        raise FlyGymError(f"FlyGym is not installed ({e}); pip install 'flycuda[flygym]' "
                          "(flygym[warp]==2.1.*)") from None
    import flygym  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return flygym


def available() -> bool:
    """True when :func:`require` would succeed."""
    try:
        require()
    except FlyGymError:
        return False
    return True


def neuromechfly(*, simplify_geom: bool = False, position_gain: float = 50.0,
                 spawn_position=(0.0, 0.0, 0.8), vision: bool = False):
    """NeuroMechFly as in FlyGym's GPU tutorial: legs-only joints, 42 position
    actuators (``kp = position_gain``) at the neutral pose, leg adhesion, colours,
    a tracking camera, on flat ground.

    Args:
        simplify_geom: FlyGym's capsule-simplified variant (every mesh fitted by
            capsules) instead of the meshes bundled with FlyGym.
        position_gain: actuator gain kp.
        spawn_position: xyz in mm.
        vision: add FlyGym's two eye cameras (``fly.add_vision()``), for flycuda.vision.

    Returns:
        ``(fly, world, camera)``: FlyGym's NeuroMechFly, FlatGroundWorld and the
        camera spec (its name, e.g. ``nmf/trackcam``, is ``camera.name``).
    """
    require()
    from flygym.anatomy import ActuatedDOFPreset, AxisOrder, JointPreset, Skeleton  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
    from flygym.compose import ActuatorType, FlatGroundWorld, GeomFittingOption, KinematicPosePreset, NeuroMechFly  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
    from flygym.utils.math import Rotation3D  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    fitting = GeomFittingOption.ALL_TO_CAPSULES if simplify_geom else GeomFittingOption.UNMODIFIED
    fly = NeuroMechFly(geom_fitting_option=fitting)
    neutral = KinematicPosePreset.NEUTRAL
    fly.add_joints(Skeleton(axis_order=AxisOrder.YAW_PITCH_ROLL, joint_preset=JointPreset.LEGS_ONLY),
                   neutral_pose=neutral)
    dofs = fly.skeleton.get_actuated_dofs_from_preset(ActuatedDOFPreset.LEGS_ACTIVE_ONLY)
    fly.add_actuators(dofs, actuator_type=ActuatorType.POSITION, kp=position_gain, neutral_input=neutral)
    fly.add_leg_adhesion()
    fly.colorize()
    if vision:
        fly.add_vision()
    cam = fly.add_tracking_camera()
    world = FlatGroundWorld()
    world.add_fly(fly, tuple(spawn_position), Rotation3D("quat", (1, 0, 0, 0)))
    return fly, world, cam


def gpu_simulation(world, n_worlds: int, *, device=None, timestep: float = TIMESTEP, **kwargs):
    """FlyGym's ``GPUSimulation(world, n_worlds, timestep=...)`` built on Warp's device
    for ``device`` ("cuda", "cpu", None: CUDA when flycuda can run there, else CPU).

    FlyGym's notice that MuJoCo Warp has no noslip solver (it sets
    noslip_iterations to 0) is silenced; everything else is FlyGym's.
    """
    require()
    from flygym.warp import GPUSimulation  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    if isinstance(n_worlds, bool) or not isinstance(n_worlds, int) or n_worlds <= 0:
        raise FlyGymError(f"n_worlds must be a positive integer, got {n_worlds!r}")
    wp, _ = import_warp()
    with wp.ScopedDevice(warp_device_for(device)), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="MJWarp does not support noslip")
        return GPUSimulation(world, n_worlds, timestep=timestep, **kwargs)


def wrap(gpu_sim) -> Sim:
    """A flycuda :class:`Sim` sharing memory with ``gpu_sim.mjw_model``/``mjw_data``.

    Wrap again after ``gpu_sim.reset()`` only if FlyGym reallocated ``mjw_data``
    (views are of the arrays at wrap time)."""
    for attr in ("mjw_model", "mjw_data", "mj_model"):
        if not hasattr(gpu_sim, attr):
            raise FlyGymError(f"wrap needs a flygym.warp.GPUSimulation (no attribute {attr!r} on "
                              f"{type(gpu_sim).__name__})")
    return Sim.wrap(gpu_sim.mjw_model, gpu_sim.mjw_data, gpu_sim.mj_model)


def _position_dofs(fly) -> list:
    from flygym.compose import ActuatorType  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return list(fly.get_actuated_jointdofs_order(ActuatorType.POSITION))


def dof_names(fly) -> tuple[str, ...]:
    """FlyGym's actuated-DOF order (position actuators), e.g. ``c_thorax-lf_coxa-yaw``."""
    return tuple(d.name for d in _position_dofs(fly))


def actuator_ids(sim: Sim, fly) -> torch.Tensor:
    """int32 [D] ids of the fly's position actuators in FlyGym's actuated-DOF order,
    i.e. the columns ``GPUSimulation.set_actuator_inputs(fly.name, POSITION, x)``
    writes ``x[:, d]`` to."""
    names = [f"{fly.name}/{n}-position" for n in dof_names(fly)]
    return sim.actuator_ids(names)


def _spotlight_snippet():
    require()
    from flygym_demo.spotlight_data import MotionSnippet  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return MotionSnippet()


def _reorder(snippet, dofs, angles: np.ndarray) -> np.ndarray:
    """[T, 6, 7] -> [T, D] in FlyGym's order (as ``MotionSnippet.get_joint_angles``)."""
    pairs = []
    for dof in dofs:
        try:
            pairs.append((snippet.legs.index(dof.child.pos),
                          snippet.dofs_per_leg.index((dof.parent.link, dof.child.link, dof.axis.value))))
        except (ValueError, AttributeError):
            raise FlyGymError(f"DOF {getattr(dof, 'name', dof)!r} is not in the Spotlight clip "
                              f"(it has legs {snippet.legs} x {len(snippet.dofs_per_leg)} DOFs)") from None
    idx = np.array(pairs, dtype=np.int64)
    return angles[:, idx[:, 0], idx[:, 1]]


def spotlight(fly, *, sgfilter_window_sec: float = 0.03, sgfilter_polyorder: int = 3) -> Motion:
    """FlyGym's bundled Spotlight clip at its own rate (330 Hz), as a :class:`Motion`
    in the fly's actuated-DOF order.

    The preprocessing is FlyGym's (``MotionSnippet``): right-leg roll and yaw
    flipped to the anatomical convention, then Savitzky-Golay smoothing (same
    window and order as ``get_joint_angles``). FlyGym then resamples to the
    simulation rate with a cubic spline; flycuda does that on the device
    (``replay(interp="cubic")`` / :func:`flycuda.spline_to_ctrl`) from
    ``motion.angles64``, the float64 frames kept for it.
    """
    from scipy.signal import savgol_filter  # noqa: PLC0415  (lazy: scipy comes with FlyGym)

    snip = _spotlight_snippet()
    fps = float(snip.data_fps)
    if abs(fps - SPOTLIGHT_FPS) > 1e-9:  # pragma: no cover - guards a changed clip
        raise FlyGymError(f"the Spotlight clip is at {fps} Hz, flycuda expected {SPOTLIGHT_FPS}")
    window = int(sgfilter_window_sec * fps)
    window += 1 - (window % 2)
    filtered = savgol_filter(snip.joint_angles, window_length=window, polyorder=sgfilter_polyorder, axis=0)
    dofs = _position_dofs(fly)
    angles = _reorder(snip, dofs, filtered)
    return Motion(torch.from_numpy(angles.astype(np.float32)), fps, tuple(d.name for d in dofs),
                  angles64=torch.from_numpy(np.ascontiguousarray(angles, dtype=np.float64)))


def flygym_targets(fly, timestep: float = TIMESTEP) -> np.ndarray:
    """FlyGym's own targets: ``MotionSnippet().get_joint_angles(timestep, order)``, the
    clip resampled to every simulation step (float64 [steps, D]); what its tutorial
    expands into the [W, steps, D] float32 buffer. For tests and benchmarks."""
    return _spotlight_snippet().get_joint_angles(timestep, _position_dofs(fly))


def tutorial_buffer(fly, n_worlds: int, sim_steps: int, timestep: float = TIMESTEP) -> np.ndarray:
    """FlyGym's pre-expanded targets: float32 [n_worlds, sim_steps, D], world w replaying
    the resampled clip from step ``(w % partitions) * sim_steps`` (its tutorial's and
    benchmark's ``make_target_angles_all_worlds``). What flycuda's cubic mode avoids
    storing; for comparisons."""
    angles = flygym_targets(fly, timestep)
    parts = angles.shape[0] // sim_steps
    if parts < 1:
        raise FlyGymError(f"the clip resampled at {timestep} s has {angles.shape[0]} steps, fewer than "
                          f"sim_steps = {sim_steps}")
    buf = np.zeros((n_worlds, sim_steps, angles.shape[1]), dtype=np.float32)
    for w in range(n_worlds):
        start = (w % parts) * sim_steps
        buf[w] = angles[start:start + sim_steps]
    return buf


def tutorial_offsets(n_worlds: int, sim_steps: int, timestep: float = TIMESTEP) -> torch.Tensor:
    """Start frames (float64 [n_worlds], at the clip's 330 Hz) of the same per-world snippets
    as :func:`tutorial_buffer`, for ``spline_to_ctrl``/``replay(offsets=...)``."""
    n_frames = _spotlight_snippet().joint_angles.shape[0]
    n_total = len(np.arange(0, n_frames / SPOTLIGHT_FPS, timestep))  # FlyGym's output time grid
    parts = n_total // sim_steps
    if parts < 1:
        raise FlyGymError(f"the clip resampled at {timestep} s has {n_total} steps, fewer than "
                          f"sim_steps = {sim_steps}")
    starts = (np.arange(n_worlds) % parts) * sim_steps
    return torch.from_numpy(starts * timestep * SPOTLIGHT_FPS)


def buffer_motion(buffer, fly, sim: Sim, timestep: float = TIMESTEP) -> Motion:
    """A pre-expanded FlyGym buffer [W, steps, D] (one target per simulation step at
    ``timestep``) as a flycuda Motion for ``sim`` (motion_to_ctrl then copies frame s
    at step s exactly). Raises FlyGymError if the simulation steps another timestep."""
    if sim.timestep != timestep:
        raise FlyGymError(f"the buffer holds one target per {timestep:g} s step but the simulation steps "
                          f"{sim.timestep:g} s: resample at the simulation's timestep")
    a = torch.as_tensor(np.asarray(buffer), dtype=torch.float32)
    names = dof_names(fly)
    if a.dim() != 3 or a.shape[-1] != len(names):
        raise FlyGymError(f"a FlyGym buffer must be [W, steps, {len(names)}], got {tuple(a.shape)}")
    return Motion(a, one_frame_per_step(timestep), names)


def one_frame_per_step(timestep: float) -> float:
    """A frame rate ``fps`` with ``fps * timestep == 1.0`` exactly in float64 (1 / timestep
    is off by an ulp for some timesteps, e.g. 1e-5), so that step s reads frame s exactly."""
    fps = 1.0 / timestep
    for cand in (fps, math.nextafter(fps, math.inf), math.nextafter(fps, 0.0)):
        if cand * timestep == 1.0:
            return cand
    raise FlyGymError(f"no float64 frame rate gives exactly one frame per {timestep!r} s step")


MODELS = {"neuromechfly": False, "neuromechfly-capsules": True}  # name -> simplify_geom


class Setup:
    """NeuroMechFly in ``worlds`` worlds as FlyGym's tutorial sets it up (adhesion on
    for all six legs), wrapped for flycuda: ``sim`` (flycuda Sim), ``gpu_sim``
    (FlyGym's GPUSimulation), ``fly``, ``world`` (FlyGym's), ``camera`` (name), ``act_ids`` [42]; ``vision``:
    the fly with FlyGym's eye cameras (``add_vision``), for :mod:`flycuda.vision`; ``decorate``: a
    callable given the world's ``mujoco.MjSpec`` before it is compiled (to add objects)."""

    def __init__(self, name: str, worlds: int, device=None, timestep: float = TIMESTEP, vision: bool = False,
                 decorate=None):
        if name not in MODELS:
            raise FlyGymError(f"unknown FlyGym model {name!r}; choose from {', '.join(MODELS)}")
        self.fly, self.world, cam = neuromechfly(simplify_geom=MODELS[name], vision=vision)
        world = self.world
        if decorate is not None:  # e.g. flycuda.env's approach task adds its pillar to the world's MjSpec
            decorate(world.mjcf_root)
        self.gpu_sim = gpu_simulation(world, worlds, device=device, timestep=timestep)
        self.sim = wrap(self.gpu_sim)
        self.camera = str(cam.name)
        self.act_ids = actuator_ids(self.sim, self.fly)
        wp, _ = import_warp()
        with wp.ScopedDevice(self.sim.wp_device):
            self.gpu_sim.set_leg_adhesion_states(self.fly.name, np.ones((worlds, 6), dtype=np.float32))


class FlyGymEyes:
    """FlyGym's own vision of given states: its CPU ``Simulation.get_ommatidia_readouts``
    (MuJoCo's OpenGL renderer at 512 x 450, then its Retina), the reference
    :mod:`flycuda.vision` is measured against. ``world``/``fly``: as
    :func:`neuromechfly` (vision=True) returns them. Needs an OpenGL: on a machine
    without a display, ``MUJOCO_GL=osmesa`` (Debian's libosmesa6) set before mujoco
    is imported."""

    def __init__(self, world, fly):
        flygym = require()
        self.sim, self.fly = flygym.Simulation(world), fly

    def readouts(self, qpos) -> np.ndarray:
        """float32 [2, 721, 2] of the fly posed at ``qpos`` (one world's, any array)."""
        data = self.sim.mj_data
        data.qpos[:] = np.asarray(torch.as_tensor(qpos).cpu(), dtype=np.float64)
        mujoco.mj_forward(self.sim.mj_model, data)
        return np.asarray(self.sim.get_ommatidia_readouts(self.fly.name), dtype=np.float32)


# --- recordings: FlyGym's RecordedTrajectory <-> flycuda's store ------------------------

def to_trajectories(recording, worlds=None, *, playback_speed: float = 1.0):
    """FlyGym ``RecordedTrajectory`` s (one per world) from a flycuda recording's qpos,
    so FlyGym's ``render_trajectories`` / ``render_trajectories_gpu`` render it.

    ``worlds``: indices (default all); ``playback_speed``: FlyGym's (the video shows
    ``playback_speed`` simulated seconds per second at one frame per sample)."""
    require()
    from flygym.recording import RecordedTrajectory  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))


    rec = recording if isinstance(recording, Recording) else Recording.open(recording)
    if "qpos" not in rec.names:
        raise FlyGymError("the recording has no qpos (record it with --observe qpos@30hz)")
    qpos = rec["qpos"]
    ids = parse_worlds(slice(None) if worlds is None else worlds, qpos.shape[0])
    interval = rec.every("qpos") * float(rec.info["timestep"])
    fps = playback_speed / interval
    if abs(fps - round(fps)) > 1e-6 * fps:
        raise FlyGymError(f"FlyGym's output_fps is an integer: qpos sampled every {interval:g} s at playback speed "
                          f"{playback_speed:g} gives {fps:g} frames per second")
    times = rec.times("qpos")
    return [RecordedTrajectory(time=times, qpos=np.asarray(qpos[w]), output_fps=int(round(fps)),
                               playback_speed=float(playback_speed), world_id=int(w)) for w in ids]


def from_trajectories(trajectories, store, mj_model, *, timestep: float, model: str = "neuromechfly",
                      camera: str | None = None, overwrite: bool = False):
    """A flycuda recording (a store with one qpos array, world = trajectory) from FlyGym
    ``RecordedTrajectory`` s of one model, so ``flycuda render`` draws FlyGym's
    recordings. Their frames must be ``timestep`` multiples apart (FlyGym's frame
    clock: ``playback_speed / output_fps`` seconds) and equally many."""

    trajs = list(trajectories)
    if not trajs:
        raise FlyGymError("no trajectories given")
    frames = {t.qpos.shape[0] for t in trajs}
    intervals = {t.playback_speed / t.output_fps for t in trajs}
    if len(frames) != 1 or len(intervals) != 1:
        raise FlyGymError(f"trajectories must share their frame count and rate, got {sorted(frames)} frames and "
                          f"{sorted(intervals)} s per frame")
    every = round(intervals.pop() / timestep)
    if every < 1 or any(t.qpos.shape[1] != mj_model.nq for t in trajs):
        raise FlyGymError(f"trajectories do not fit the model (nq={mj_model.nq}) and timestep {timestep:g}")
    n = frames.pop()
    labels = qpos_labels(mj_model, velocity=False)
    spec = zstore.ArraySpec("qpos", len(trajs), n, labels, every, 1, n, f"qpos@{every}")
    group = zstore.create(store, [spec], dict(timestep=timestep, worlds=len(trajs), steps=(n - 1) * every,
                                              model=model, camera=camera, source="flygym.RecordedTrajectory"),
                          overwrite=overwrite)
    for w, t in enumerate(trajs):
        group["qpos"][w:w + 1] = np.asarray(t.qpos, dtype=np.float32)[None]
    zstore.mark(group, complete=True, status="complete", rows_written={"qpos": n})
    return Recording(group)
