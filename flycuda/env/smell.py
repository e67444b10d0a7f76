"""Smell in :mod:`flycuda.env` (issue 41): the fly's four odor sensors and the odor sources of a
task, read every control step into the ``odor`` observation group by
:func:`flycuda.ops.odor_intensity`, on the device and inside the step's graph.

* The sensors are FlyGym 1.x's four (:data:`flycuda.flygym.olfaction.SENSOR_NAMES`' order: the maxillary
  palps, then the antennae), added to the model before it compiles (:func:`add_sensors`): on
  NeuroMechFly where 1.x put them (:data:`flycuda.flygym.olfaction.ODOR_SENSORS`, sites on the
  rostrum and the funiculi, which compile into the thorax); on a model without those bodies (the
  hexapod) on its root body, at NeuroMechFly's places relative to its thorax scaled by the body
  length (:data:`ROOT_OFFSETS`).
* The sources are a task's bodies, each on two slide joints (x, y) at a fixed height, so that a
  reset places them with the worlds' initial states (:class:`flycuda.env.odor_tasks.OdorTaxis`).
* :class:`Smell` reads them: the sources' places from qpos, the sensors' from MuJoCo Warp's
  ``site_xpos`` after the kinematics of the observed state, and writes ``[W, k, 4]`` into the
  environment's own observation columns.
"""

from __future__ import annotations

import mujoco
import torch

from ..errors import EnvError
from ..flygym.olfaction import ODOR_SENSORS
from ..flygym.olfaction import SENSOR_NAMES as SENSORS
from ..ops import odor_intensity

__all__ = ["Smell", "add_sensors", "sensor_sites", "ROOT_OFFSETS"]

ROOT_OFFSETS = ((0.3087, 0.15, -0.4233), (0.3087, -0.15, -0.4233), (0.5091, 0.1584, -0.0502),
                (0.5091, -0.1584, -0.0502))
"""The sensors' places in NeuroMechFly's thorax frame (mm; measured from FlyGym 2.x's fly with
:func:`flycuda.flygym.olfaction.add_odor_sensors`), in :data:`SENSORS`' order: where a model
without NeuroMechFly's head gets them on its root body, scaled by its body length / 2.5 mm."""
NMF_LENGTH = 2.5  # mm: NeuroMechFly's body length (flycuda.env.tasks.body_length)


def _root_body(spec) -> "mujoco.MjsBody":
    for b in spec.bodies:
        if any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in b.joints):
            return b
    raise EnvError("the model has no body on a free joint (the fly) to carry the odor sensors")


def add_sensors(spec, length: float) -> None:
    """Adds the four odor sensor sites (named ``<sensor>_sensor``, under the fly's prefix) to a
    ``mujoco.MjSpec`` before it compiles, unless it has them: on NeuroMechFly's rostrum and
    funiculi (FlyGym 1.x's places), else on the root body (:data:`ROOT_OFFSETS` x ``length`` /
    2.5 mm)."""
    names = [b.name for b in spec.bodies]
    if any(s.name.endswith(f"{SENSORS[0]}_sensor") for s in spec.sites):
        return
    heads = {}
    for sensor, parent, pos in ODOR_SENSORS:
        hit = [n for n in names if n == parent or n.endswith(f"/{parent}")]
        heads[sensor] = (hit[0], pos) if len(hit) == 1 else None
    if all(heads.values()):
        for sensor, (body, pos) in heads.items():
            prefix = body[: len(body) - len(body.rsplit("/", 1)[-1])]  # "nmf/" (FlyGym's), or ""
            spec.body(body).add_site(name=f"{prefix}{sensor}_sensor", pos=list(pos))
        return
    root, scale = _root_body(spec), length / NMF_LENGTH
    for sensor, off in zip(SENSORS, ROOT_OFFSETS):
        root.add_site(name=f"{sensor}_sensor", pos=[scale * c for c in off])


def sensor_sites(mjm: mujoco.MjModel) -> list[int]:
    """The compiled model's four odor sensor sites, in :data:`SENSORS`' order.

    Raises:
        EnvError: one is missing or found twice (the model was built without :func:`add_sensors`).
    """
    names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SITE, i) or "" for i in range(mjm.nsite)]
    out = []
    for sensor in SENSORS:
        hit = [i for i, n in enumerate(names) if n == f"{sensor}_sensor" or n.endswith(f"/{sensor}_sensor")]
        if len(hit) != 1:
            raise EnvError(f"the model has {len(hit)} odor sensor sites named {sensor}_sensor (expected 1): build "
                           "the worlds with flycuda.env.make, whose odor tasks add them (flycuda.env.smell.add_sensors)")
        out.append(hit[0])
    return out


class Smell:
    """Every world's odor at its four sensors, each control step (capturable: views, buffers
    allocated here, :func:`flycuda.ops.odor_intensity`).

    Args:
        sim: the worlds (:class:`flycuda.sim.Sim`).
        source_adrs: [n] (x, y) qpos addresses of each source's slide joints.
        heights: [n] each source's fixed height (its body's z).
        peaks: [n, k] each source's peak intensity per odor dimension, or a float32 [W, n, k]
            tensor on the worlds' device, read each step as it is then (a task's per-world
            draws: :class:`flycuda.env.odor_draws.OdorDraws`).
        out: float32 [W, k, 4] to write (a view of the environment's own columns).
        field, exponent: :func:`flycuda.ops.odor_intensity`'s ("power": FlyGym 1.x's default).
        wind: "advection_diffusion": float32 [W, 2] (any strides), each world's wind, read each
            step as it is then; None: still air.
        diffusivity, decay: "advection_diffusion": the op's.
    """

    def __init__(self, sim, source_adrs, heights, peaks, out: torch.Tensor, *, field: str = "power",
                 exponent: float = 2.0, wind: torch.Tensor | None = None, diffusivity: float = 20000.0,
                 decay: float = 500.0):
        W, dev = sim.nworld, sim.device
        n = len(source_adrs)
        peaks = peaks if isinstance(peaks, torch.Tensor) else torch.as_tensor(peaks, dtype=torch.float32)
        k = peaks.shape[-1] if peaks.dim() else 0
        shaped = peaks.dim() == 2 or (peaks.dim() == 3 and peaks.shape[0] == W)
        if not shaped or peaks.shape[-2] != n or len(heights) != n or n < 1:
            raise EnvError(f"odor sources: {n} sources need {n} heights and peaks [n, k] or [W, n, k] (W = {W}), "
                           f"got {len(heights)} and {tuple(peaks.shape)}")
        if tuple(out.shape) != (W, k, len(SENSORS)):
            raise EnvError(f"odor: out must be [W, k, 4] = {[W, k, len(SENSORS)]}, got {list(out.shape)}")
        self.sim, self.out, self.field, self.exponent = sim, out, field, float(exponent)
        self.wind, self.diffusivity, self.decay = wind, float(diffusivity), float(decay)
        self.peaks = peaks.to(device=dev, dtype=torch.float32)
        self._adrs = torch.tensor([a for xy in source_adrs for a in xy], dtype=torch.int64, device=dev)
        self._xy = torch.empty(W, 2 * n, device=dev)
        self.sources = torch.empty(W, n, 3, device=dev)
        self.sources[:, :, 2] = torch.as_tensor(heights, dtype=torch.float32, device=dev)
        self._sites = torch.tensor(sensor_sites(sim.mjm), dtype=torch.int64, device=dev)
        self.sensors = torch.empty(W, len(SENSORS), 3, device=dev)

    def observe(self, kinematics: bool = True) -> None:
        """The sources' places (qpos), the sensors' (the kinematics of the current state: unless
        ``kinematics`` is False because the caller has run them) and the odor there."""
        if kinematics:
            self.sim.kinematics()
        torch.index_select(self.sim.view("qpos"), 1, self._adrs, out=self._xy)
        self.sources[:, :, :2].copy_(self._xy.view(-1, self._adrs.numel() // 2, 2))
        torch.index_select(self.sim.view("site_xpos"), 1, self._sites, out=self.sensors)
        if self.field == "power":
            odor_intensity(self.sources, self.peaks, self.sensors, self.out, exponent=self.exponent)
        else:
            odor_intensity(self.sources, self.peaks, self.sensors, self.out, field=self.field, wind=self.wind,
                           diffusivity=self.diffusivity, decay=self.decay)
