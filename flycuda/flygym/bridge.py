"""The FlyGym bridge: NeuroMechFly built as FlyGym's GPU tutorial builds it, its
``GPUSimulation`` on flycuda's device choice and wrapped zero-copy as a flycuda :class:`Sim`,
FlyGym's actuated-DOF order."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import torch

from ..errors import FlyGymError
from ..sim.mjwarp import Sim, import_warp, warp_device_for
from . import frozen

__all__ = ["require", "available", "can_build", "neuromechfly", "gpu_simulation", "wrap", "dof_names", "actuator_ids",
           "position_dofs", "Setup", "MODELS", "TIMESTEP", "MIN_PYTHON"]

MIN_PYTHON = (3, 12)
"""The oldest Python FlyGym 2.x runs on."""
TIMESTEP = 1e-4
"""Seconds per physics step in FlyGym's GPU tutorial and benchmark."""


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


def can_build(name: str = "neuromechfly", vision: bool = False, terrain: str = "flat",
              locomotion: bool = False) -> bool:
    """Whether :class:`Setup` can build this NeuroMechFly here: FlyGym is installed, or the
    variant is frozen in ``$FLYCUDA_NEUROMECHFLY`` (:mod:`flycuda.flygym.frozen`)."""
    return available() or frozen.frozen(name, vision, terrain, locomotion) is not None


def neuromechfly(*, simplify_geom: bool = False, position_gain: float = 50.0,
                 spawn_position=None, vision: bool = False, terrain: str = "flat", locomotion: bool = False):
    """NeuroMechFly as in FlyGym's GPU tutorial: legs-only joints, 42 position
    actuators (``kp = position_gain``) at the neutral pose, leg adhesion, colours,
    a tracking camera, on flat ground (or FlyGym's ``terrain``).

    Args:
        simplify_geom: FlyGym's capsule-simplified variant (every mesh fitted by
            capsules) instead of the meshes bundled with FlyGym.
        position_gain: actuator gain kp (the tutorial's fly).
        spawn_position: xyz in mm (None: 0.8 mm above the terrain at the origin:
            :func:`flycuda.flygym.terrain.spawn_height`).
        vision: add FlyGym's two eye cameras (``fly.add_vision()``), for flycuda.vision.
        terrain: FlyGym's world (:data:`flycuda.flygym.terrain.TERRAINS`), its contact
            pairs fitted for MuJoCo Warp (:func:`flycuda.flygym.terrain.fit_for_warp`).
        locomotion: FlyGym's locomotion fly instead (``make_locomotion_fly``, the one its
            walking controllers drive: the same skeleton and actuators, its own joint
            stiffness and damping, kp 45, force range, adhesion gain), coloured.

    Returns:
        ``(fly, world, camera)``: FlyGym's NeuroMechFly, its world and the
        camera spec (its name, e.g. ``nmf/trackcam``, is ``camera.name``).
    """
    require()
    from flygym.utils.math import Rotation3D  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    from .terrain import fit_for_warp, spawn_height, terrain_world  # noqa: PLC0415  (imports FlyGym's worlds)

    if spawn_position is None:
        spawn_position = (0.0, 0.0, spawn_height(terrain))
    world = terrain_world(terrain)
    fly = _locomotion_fly(simplify_geom) if locomotion else _tutorial_fly(simplify_geom, position_gain)
    if vision:
        fly.add_vision()
    cam = fly.add_tracking_camera()
    world.add_fly(fly, tuple(spawn_position), Rotation3D("quat", (1, 0, 0, 0)))
    fit_for_warp(world.mjcf_root)
    return fly, world, cam


def _locomotion_fly(simplify_geom: bool):
    """FlyGym's ``make_locomotion_fly`` (coloured)."""
    from flygym_demo.complex_terrain import make_locomotion_fly  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    if simplify_geom:
        raise FlyGymError("FlyGym's locomotion fly has no capsule-fitted variant (make_locomotion_fly takes no "
                          "geom fitting): use model='neuromechfly'")
    return make_locomotion_fly(colorize=True)


def _tutorial_fly(simplify_geom: bool, position_gain: float):
    """The GPU tutorial's fly: legs-only joints and position actuators at the neutral pose,
    leg adhesion, colours."""
    from flygym.anatomy import ActuatedDOFPreset, AxisOrder, JointPreset, Skeleton  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
    from flygym.compose import ActuatorType, GeomFittingOption, KinematicPosePreset, NeuroMechFly  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    fitting = GeomFittingOption.ALL_TO_CAPSULES if simplify_geom else GeomFittingOption.UNMODIFIED
    fly = NeuroMechFly(geom_fitting_option=fitting)
    neutral = KinematicPosePreset.NEUTRAL
    fly.add_joints(Skeleton(axis_order=AxisOrder.YAW_PITCH_ROLL, joint_preset=JointPreset.LEGS_ONLY),
                   neutral_pose=neutral)
    dofs = fly.skeleton.get_actuated_dofs_from_preset(ActuatedDOFPreset.LEGS_ACTIVE_ONLY)
    fly.add_actuators(dofs, actuator_type=ActuatorType.POSITION, kp=position_gain, neutral_input=neutral)
    fly.add_leg_adhesion()
    fly.colorize()
    return fly


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


def position_dofs(fly) -> list:
    """FlyGym's actuated joint DOFs of the fly's position actuators, in its order."""
    from flygym.compose import ActuatorType  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return list(fly.get_actuated_jointdofs_order(ActuatorType.POSITION))


def dof_names(fly) -> tuple[str, ...]:
    """FlyGym's actuated-DOF order (position actuators), e.g. ``c_thorax-lf_coxa-yaw``."""
    return tuple(d.name for d in position_dofs(fly))


def actuator_ids(sim: Sim, fly) -> torch.Tensor:
    """int32 [D] ids of the fly's position actuators in FlyGym's actuated-DOF order,
    i.e. the columns ``GPUSimulation.set_actuator_inputs(fly.name, POSITION, x)``
    writes ``x[:, d]`` to."""
    names = [f"{fly.name}/{n}-position" for n in dof_names(fly)]
    return sim.actuator_ids(names)


MODELS = {"neuromechfly": False, "neuromechfly-capsules": True}
"""FlyGym's models by name -> ``simplify_geom`` (capsules fitted to every mesh)."""


class Setup:
    """NeuroMechFly in ``worlds`` worlds as FlyGym's tutorial sets it up (adhesion on
    for all six legs), wrapped for flycuda: ``sim`` (flycuda Sim), ``gpu_sim``
    (FlyGym's GPUSimulation), ``fly``, ``world`` (FlyGym's), ``camera`` (name), ``act_ids`` [42]; ``vision``:
    the fly with FlyGym's eye cameras (``add_vision``), for :mod:`flycuda.vision`; ``decorate``: a
    callable given the world's ``mujoco.MjSpec`` before it is compiled (to add objects);
    ``terrain`` and ``locomotion``: FlyGym's world and fly (:func:`neuromechfly`).

    Where FlyGym cannot be imported, the variant frozen in ``$FLYCUDA_NEUROMECHFLY``
    (:mod:`flycuda.flygym.frozen`) is built instead: ``fly`` is then a
    :class:`~flycuda.flygym.frozen.FrozenFly`, ``gpu_sim`` a
    :class:`~flycuda.flygym.frozen.FrozenSimulation` and ``world`` None."""

    def __init__(self, name: str, worlds: int, device=None, timestep: float = TIMESTEP, vision: bool = False,
                 decorate=None, terrain: str = "flat", locomotion: bool = False):
        if name not in MODELS:
            raise FlyGymError(f"unknown FlyGym model {name!r}; choose from {', '.join(MODELS)}")
        if not available():  # no FlyGym here: its worlds as written where it is (flycuda.flygym.frozen)
            frozen.thaw(self, frozen.require(name, vision, terrain, locomotion), worlds, device, timestep, decorate)
            return
        self.fly, self.world, cam = neuromechfly(simplify_geom=MODELS[name], vision=vision, terrain=terrain,
                                                 locomotion=locomotion)
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
