"""NeuroMechFly frozen: FlyGym's worlds written where FlyGym is, built again where it cannot be
installed (a GPU lease: no network, Python without FlyGym).

    python -m flycuda.flygym.freeze OUT_DIR          # where FlyGym is: every variant, about 1 MiB each
    FLYCUDA_NEUROMECHFLY=OUT_DIR python bench/bench_replay.py --models neuromechfly   # where it is not

A frozen variant is one tar.xz: the world's MJCF as :func:`flycuda.flygym.neuromechfly` composes
it (fitted for MuJoCo Warp, before a task decorates it), its meshes named by file name (their
files are in ``meshes.tar.xz``, once for every variant), and ``facts.json``: the fly's name, its camera, its actuated DOFs and adhesion actuators. Beside the
variants, ``spotlight.npz`` holds FlyGym's Spotlight clip as FlyGym preprocesses it (the frames,
float64) and its tutorial's targets resampled at :data:`~flycuda.flygym.TIMESTEP` (float32, as its
tutorial's buffer holds them), and ``retina.npz`` FlyGym's retina (the eyes' map, read by
:func:`flycuda.vision.eyes.flygym_retina` when FlyGym is missing). :class:`flycuda.flygym.Setup` builds from it when FlyGym
cannot be imported, the way ``GPUSimulation`` builds (its option overrides, the neutral keyframe,
its contact and constraint capacities, adhesion on): the same MjModel up to the MJCF's six
significant digits (``MjSpec.to_xml``'s; tests/flygym_lane/test_frozen.py).
"""

from __future__ import annotations

import json
import os
import tarfile

import numpy as np
import torch

from ..errors import FlyGymError
from ..sim.motion import Motion

__all__ = ["ENV", "FrozenFly", "FrozenSimulation", "folder", "variant", "frozen", "require", "thaw",
           "clip_frames", "retina", "CLIP", "RETINA", "MESHES",
           "VARIANTS"]

ENV = "FLYCUDA_NEUROMECHFLY"
"""The environment variable naming the folder of frozen variants."""
VARIANTS = [("neuromechfly", False, "flat", False), ("neuromechfly", True, "flat", False),
            ("neuromechfly", False, "flat", True)]
"""What :func:`flycuda.flygym.freeze.freeze` writes by default: (model, vision, terrain, locomotion): the tutorial's fly
(the replay, the renderer), with its eyes (the env's eyes), and the locomotion fly (the
descending env)."""
CLIP = "spotlight.npz"
MESHES = "meshes.tar.xz"
RETINA = "retina.npz"
"""FlyGym's retina as :meth:`flycuda.vision.retina.RetinaMap.save` writes it (the eyes' map)."""
SOLVER_TOLERANCE = 1e-5   # GPUSimulation's solver_tolerance
CAPACITY = 500            # GPUSimulation's max_contacts and max_constraints


def variant(name: str, vision: bool = False, terrain: str = "flat", locomotion: bool = False) -> str:
    """The file name of a frozen variant, e.g. ``neuromechfly-vision-flat.tar.xz``."""
    parts = [name] + (["vision"] if vision else []) + (["locomotion"] if locomotion else []) + [terrain]
    return "-".join(parts) + ".tar.xz"


def folder() -> str | None:
    """The folder ``$FLYCUDA_NEUROMECHFLY`` names, or None."""
    path = os.environ.get(ENV)
    return path if path and os.path.isdir(path) else None


def _in_folder(file_name: str) -> str | None:
    """``$FLYCUDA_NEUROMECHFLY/file_name`` when that file is there, else None."""
    root = folder()
    path = os.path.join(root, file_name) if root else None
    return path if path and os.path.isfile(path) else None


def frozen(name: str, vision: bool = False, terrain: str = "flat", locomotion: bool = False) -> str | None:
    """The frozen variant's path when ``$FLYCUDA_NEUROMECHFLY`` holds it, else None."""
    return _in_folder(variant(name, vision, terrain, locomotion))


def require(name: str, vision: bool = False, terrain: str = "flat", locomotion: bool = False) -> str:
    """The frozen variant's path; raises FlyGymError (one line, what to do) when there is none."""
    path = frozen(name, vision, terrain, locomotion)
    if path is None:
        where = f"${ENV} ({os.environ[ENV]})" if os.environ.get(ENV) else f"${ENV} is not set"
        raise FlyGymError(f"FlyGym is not installed (pip install 'flycuda[flygym]') and no frozen NeuroMechFly "
                          f"{variant(name, vision, terrain, locomotion)} is at hand ({where}); freeze one where "
                          f"FlyGym is: python -m flycuda.flygym.freeze DIR")
    return path


class FrozenFly:
    """What flycuda asks of FlyGym's fly, as frozen: ``name``, ``dof_names`` (its actuated
    DOFs' order), ``motion`` (the Spotlight clip, :func:`flycuda.flygym.spotlight`'s),
    ``targets`` (FlyGym's tutorial targets, :func:`flycuda.flygym.flygym_targets`'s, float32)
    and ``timestep`` (theirs)."""

    def __init__(self, facts: dict, clip: dict):
        self.name, self.dof_names = facts["fly"], tuple(facts["dofs"])
        cols = [list(clip["dofs"]).index(d) for d in self.dof_names]  # the clip in this fly's order
        angles = torch.from_numpy(np.ascontiguousarray(clip["angles64"][:, cols]))
        self.motion = Motion(angles.float(), float(clip["fps"]), self.dof_names, angles64=angles)
        self.targets, self.timestep = clip["targets"][:, cols], float(clip["timestep"])


class FrozenSimulation:
    """The parts of FlyGym's ``GPUSimulation`` flycuda's comparisons call, transcribed:
    ``set_actuator_inputs`` and ``set_leg_adhesion_states`` (its scatter into the controls),
    ``step`` (``mjw.step``), ``mjw_model``, ``mjw_data``, ``mj_model``, ``n_worlds``."""

    def __init__(self, mjw_model, mjw_data, mj_model, act_ids: torch.Tensor, adhesion_ids: torch.Tensor):
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use)

        self.mjw_model, self.mjw_data, self.mj_model = mjw_model, mjw_data, mj_model
        self.n_worlds = int(mjw_data.nworld)
        device = mjw_data.ctrl.device
        self._ids = {k: wp.array(v.cpu().numpy().astype(np.int32), dtype=wp.int32, device=device)
                     for k, v in (("position", act_ids), ("adhesion", adhesion_ids))}

    def _scatter(self, ids, inputs) -> None:
        """FlyGym's scatter into the controls: one Warp launch on Warp's current stream. A Warp array
        or a device tensor is read where it is (a graph may capture it); host values are copied to
        the device first (outside a capture only)."""
        import warp as wp  # noqa: PLC0415

        from ._warp_kernels import scatter_indexed_cols_2d  # noqa: PLC0415  (imports Warp)

        ctrl = self.mjw_data.ctrl
        if isinstance(inputs, torch.Tensor) and inputs.device.type != "cpu":
            inputs = wp.from_torch(inputs.detach().to(torch.float32))
        elif not isinstance(inputs, wp.array):
            inputs = wp.array(np.asarray(inputs.cpu() if isinstance(inputs, torch.Tensor) else inputs, np.float32),
                              dtype=wp.float32, device=ctrl.device)
        if tuple(inputs.shape) != (self.n_worlds, ids.size):
            raise FlyGymError(f"inputs must be [n_worlds, {ids.size}] = [{self.n_worlds}, {ids.size}], got "
                              f"{list(inputs.shape)}")
        wp.launch(scatter_indexed_cols_2d, dim=(self.n_worlds, ids.size), inputs=[inputs, ctrl, ids],
                  device=ctrl.device)

    def set_actuator_inputs(self, fly_name: str, actuator_type, inputs) -> None:
        """Writes ``inputs`` [n_worlds, D] into the position actuators' controls (FlyGym's order)."""
        self._scatter(self._ids["position"], inputs)

    def set_leg_adhesion_states(self, fly_name: str, states) -> None:
        """Writes ``states`` [n_worlds, 6] into the adhesion actuators' controls."""
        self._scatter(self._ids["adhesion"], states)

    def step(self) -> None:
        import mujoco_warp as mjw  # noqa: PLC0415

        mjw.step(self.mjw_model, self.mjw_data)


def _untar(path: str) -> dict:
    with tarfile.open(path, "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _read(path: str) -> tuple[str, dict, dict]:
    """The variant's MJCF, the meshes (all variants'), its facts."""
    files = _untar(path)
    return files["world.xml"].decode(), _untar(os.path.join(os.path.dirname(path), MESHES)), \
        json.loads(files["facts.json"])


def _clip(root: str) -> dict:
    with np.load(os.path.join(root, CLIP)) as z:
        return {k: z[k] for k in z.files}


def thaw(setup, path: str, worlds: int, device, timestep: float, decorate) -> None:
    """Fills ``setup`` (a :class:`flycuda.flygym.Setup`) from the frozen variant at ``path``:
    the world compiled, decorated first, as ``GPUSimulation`` builds it."""
    import mujoco  # noqa: PLC0415
    import mujoco_warp as mjw  # noqa: PLC0415

    from ..sim.mjwarp import Sim, import_warp, warp_device_for  # noqa: PLC0415

    xml, meshes, facts = _read(path)
    spec = mujoco.MjSpec.from_string(xml, assets=meshes)
    if decorate is not None:
        decorate(spec)
    spec.option.noslip_iterations = 0  # GPUSimulation's strip: MuJoCo Warp has no noslip solver
    mjm = spec.compile()
    mjd = mujoco.MjData(mjm)
    mjm.opt.timestep, mjm.opt.tolerance = timestep, SOLVER_TOLERANCE
    mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("neutral").id)
    wp, _ = import_warp()
    with wp.ScopedDevice(warp_device_for(device)):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow &= ~(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
        d = mjw.put_data(mjm, mjd, nworld=worlds, njmax=CAPACITY, nconmax=CAPACITY)
    setup.sim = Sim.wrap(m, d, mjm)
    setup.fly, setup.world, setup.camera = FrozenFly(facts, _clip(os.path.dirname(path))), None, facts["camera"]
    setup.act_ids = setup.sim.actuator_ids([f"{setup.fly.name}/{n}-position" for n in setup.fly.dof_names])
    adhesion = setup.sim.actuator_ids(facts["adhesion"])
    setup.gpu_sim = FrozenSimulation(m, d, mjm, setup.act_ids, adhesion)
    setup.gpu_sim.set_leg_adhesion_states(setup.fly.name, torch.ones(worlds, len(facts["adhesion"])))


def clip_frames() -> int:
    """The Spotlight clip's frames, from the tutorial fly's frozen variant."""
    return int(_clip(os.path.dirname(require("neuromechfly")))["clip_frames"])


def retina() -> str | None:
    """The frozen retina's path (``$FLYCUDA_NEUROMECHFLY/retina.npz``), or None."""
    return _in_folder(RETINA)
