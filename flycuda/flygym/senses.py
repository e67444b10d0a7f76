"""The hybrid controllers' sensory inputs of a FlyGym fly, read on the device every step:
FlyGym's ``HybridControllerObservation.from_sim`` (thorax and tarsus5 heights, the heading,
``get_bodysegment_contact_forces(ground_only=True)`` on each leg's tibia, tarsus1 and tarsus2)
for every world of a MuJoCo Warp simulation, through :func:`flycuda.ops.hybrid_senses`.

    senses = HybridSenses.of(gpu_sim, "nmf")   # FlyGym's ids, once
    sim = fg.wrap(gpu_sim)
    senses.read(sim)                           # after each step: senses.thorax_z, .tarsus5_z, ...
    ctrl.step(drive, *senses.inputs())         # flycuda.control.HybridTurningController
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import torch

from ..errors import FlyGymError
from ..ops import geom_segments, hybrid_senses
from ..sim.mjwarp import Sim

__all__ = ["HybridSenses", "LEGS", "LINKS"]

LEGS = ("lf", "lm", "lh", "rf", "rm", "rh")
LINKS = ("tibia", "tarsus1", "tarsus2")  # FlyGym's _DETECTED_STUMBLING_LINKS


@dataclass
class HybridSenses:
    """The ids :func:`flycuda.ops.hybrid_senses` reads for one fly, and its outputs.

    ``body_ids`` int32 [7] (the thorax, then each leg's tarsus5), ``geom_segment`` int32
    [ngeom] (each leg's tibia, tarsus1 and tarsus2 geom; the world's ground geoms), ``cone``
    (the model's ``opt.cone``); after :meth:`read`: ``thorax_z`` float64 [W], ``tarsus5_z``
    [W, 6], ``stumbling_forces`` [W, 6, 3, 3], ``heading`` [W, 3] on the simulation's device."""

    body_ids: torch.Tensor
    geom_segment: torch.Tensor
    cone: int
    thorax_z: torch.Tensor | None = None
    tarsus5_z: torch.Tensor | None = None
    stumbling_forces: torch.Tensor | None = None
    heading: torch.Tensor | None = None

    @classmethod
    def of(cls, flygym_sim, fly_name: str) -> "HybridSenses":
        """The ids of ``fly_name`` in a FlyGym ``Simulation`` or ``GPUSimulation`` (its model's
        ids, as ``HybridControllerObservation.from_sim`` finds them)."""
        try:
            fly = flygym_sim.world.fly_lookup[fly_name]
            body_order = fly.get_bodysegs_order()
            seg_cls = type(fly).BODY_SEGMENT_CLASS
            body_of = dict(zip(body_order, flygym_sim._internal_bodyids_by_fly[fly_name]))
            geom_of = flygym_sim._internal_geomid_by_bodyseg_by_fly[fly_name]
            bodies = [body_of[seg_cls("c_thorax")]] + [body_of[seg_cls(f"{leg}_tarsus5")] for leg in LEGS]
            segments = [geom_of[seg_cls(f"{leg}_{link}")] for leg in LEGS for link in LINKS]
            ground = [int(g) for g in flygym_sim._internal_ground_geom_ids]
        except (KeyError, AttributeError) as e:
            raise FlyGymError(f"cannot find fly {fly_name!r}'s thorax, tarsi or leg segments in this FlyGym "
                              f"simulation ({type(e).__name__}: {e})") from None
        mjm = flygym_sim.mj_model
        return cls(torch.tensor(bodies, dtype=torch.int32), geom_segments(mjm.ngeom, segments, ground),
                   int(mjm.opt.cone))

    @classmethod
    def of_model(cls, mjm: mujoco.MjModel, fly_name: str = "nmf") -> "HybridSenses":
        """The ids of ``fly_name`` in a compiled FlyGym model, by FlyGym's names: the bodies
        ``<fly>/c_thorax`` and ``<fly>/<leg>_tarsus5``, the last geom of each body
        ``<fly>/<leg>_<link>`` (FlyGym's segment geom), and as ground every geom of the world
        body in a contact pair (FlyGym's ground geoms: only they have explicit pairs)."""
        def body(name: str) -> int:
            b = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, f"{fly_name}/{name}")
            if b < 0:
                raise FlyGymError(f"the model has no body {fly_name}/{name}: hybrid senses need FlyGym's "
                                  f"NeuroMechFly named {fly_name!r}")
            return b

        bodies = [body("c_thorax")] + [body(f"{leg}_tarsus5") for leg in LEGS]
        segments = []
        for leg in LEGS:
            for link in LINKS:
                b = body(f"{leg}_{link}")
                if mjm.body_geomnum[b] == 0:
                    raise FlyGymError(f"body {fly_name}/{leg}_{link} has no geom to touch the ground with")
                segments.append(int(mjm.body_geomadr[b] + mjm.body_geomnum[b] - 1))
        paired = set(mjm.pair_geom1.tolist()) | set(mjm.pair_geom2.tolist())
        ground = sorted(g for g in paired if mjm.geom_bodyid[g] == 0)
        if not ground:
            raise FlyGymError("the model has no ground geoms in contact pairs (FlyGym's ground contacts)")
        return cls(torch.tensor(bodies, dtype=torch.int32), geom_segments(mjm.ngeom, segments, ground),
                   int(mjm.opt.cone))

    def read(self, sim: Sim) -> None:
        """Fills the outputs from ``sim``'s Data as it is now (one launch pair, no host sync:
        capturable). The outputs are allocated on the first call, on ``sim``'s device."""
        W, dev = sim.nworld, sim.device
        if self.thorax_z is None or self.thorax_z.shape[0] != W or self.thorax_z.device != dev:
            self.body_ids, self.geom_segment = self.body_ids.to(dev), self.geom_segment.to(dev)
            f64 = dict(dtype=torch.float64, device=dev)
            self.thorax_z, self.tarsus5_z = torch.zeros(W, **f64), torch.zeros(W, 6, **f64)
            self.stumbling_forces, self.heading = torch.zeros(W, 6, 3, 3, **f64), torch.zeros(W, 3, **f64)
        hybrid_senses(sim.view("xpos"), sim.view("xmat"), self.body_ids, sim.contact_views(), self.geom_segment,
                      self.cone, self.thorax_z, self.tarsus5_z, self.stumbling_forces, self.heading)

    def inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(thorax_z, tarsus5_z, stumbling_forces, heading): the sensory arguments of
        :meth:`flycuda.control.HybridTurningController.step`, in its order."""
        return self.thorax_z, self.tarsus5_z, self.stumbling_forces, self.heading

