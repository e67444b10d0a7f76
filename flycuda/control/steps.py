"""FlyGym's preprogrammed leg steps: each leg's seven joint angles as a periodic cubic spline
of its stepping phase, the neutral pose (the splines at phase pi) and the swing ends.

The splines are FlyGym's own (``flygym_demo.complex_terrain.PreprogrammedSteps``: scipy's
periodic ``CubicSpline`` of ``single_steps_untethered.pkl``), exported once with
:func:`flycuda.control.export.export_steps` into ``single_steps.npz`` beside this file
(FlyGym is Apache-2.0; tests/control holds the file equal to FlyGym's splines), and
evaluated by :func:`flycuda.ops.hybrid_step` as scipy evaluates them.

Legs are FlyGym's order, ``LEGS`` (left front, middle, hind, then right). Within a leg
the seven angles are in FlyGym's working order ``LEG_DOFS`` (coxa pitch, roll, yaw, femur
pitch, roll, tibia, tarsus1); the 42 outputs are in FlyGym's default locomotion order
(per leg: coxa yaw, pitch, roll, ...): ``out[:, 7 * leg + m] = angles[:, leg, DOF_ORDER[m]]``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..ops.walking import DOF_ORDER, LEGS  # the op's (kernels/hybrid_step.cuh) leg and output order

__all__ = ["LEGS", "LEG_DOFS", "DOF_ORDER", "STEP_DURATION", "StepsTable", "load_steps", "locomotion_dof_names"]

LEG_DOFS = ("coxa-pitch", "coxa-roll", "coxa-yaw", "trochanterfemur-pitch", "trochanterfemur-roll", "tibia-pitch",
            "tarsus1-pitch")
"""The seven angles of a leg in the order of FlyGym's step data and correction vectors."""

STEP_DURATION = 45 * 0.003
"""Seconds of one preprogrammed step: FlyGym's ``PreprogrammedSteps.duration``, its 45 samples
times their 3 ms, computed as FlyGym computes it (0.135)."""

STEPS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "single_steps.npz")


@dataclass(frozen=True)
class StepsTable:
    """FlyGym's preprogrammed steps as tensors (float64): ``knots`` [45] (0 .. 2 pi),
    ``coeffs`` [6, 4, 44, 7] (leg, power (cubic first), interval, angle: scipy's PPoly
    ``c``), ``neutral`` [6, 7] (the splines at phase pi), ``swing_end`` [6] (the phase
    each leg's swing ends at; it starts at 0)."""

    knots: torch.Tensor
    coeffs: torch.Tensor
    neutral: torch.Tensor
    swing_end: torch.Tensor

    def to(self, device) -> "StepsTable":
        return StepsTable(*(t.to(device) for t in (self.knots, self.coeffs, self.neutral, self.swing_end)))


@functools.lru_cache(maxsize=None)
def _load(device: str) -> StepsTable:
    with np.load(STEPS_FILE) as f:
        table = StepsTable(*(torch.from_numpy(np.array(f[k], dtype=np.float64))
                             for k in ("knots", "coeffs", "neutral", "swing_end")))
    return table.to(device)


def load_steps(device: torch.device | str = "cpu") -> StepsTable:
    """FlyGym's preprogrammed steps on ``device`` (read once per device)."""
    return _load(str(torch.device(device)))


def locomotion_dof_names() -> list[str]:
    """The 42 joints of FlyGym's default locomotion DOF order, as FlyGym names them
    (``c_thorax-lf_coxa-yaw``, ..., ``rh_tibia-rh_tarsus1-pitch``)."""
    names = []
    for leg in LEGS:
        parents = {"coxa": "c_thorax", "trochanterfemur": f"{leg}_coxa", "tibia": f"{leg}_trochanterfemur",
                   "tarsus1": f"{leg}_tibia"}
        for m in DOF_ORDER:
            child, axis = LEG_DOFS[m].split("-")
            names.append(f"{parents[child]}-{leg}_{child}-{axis}")
    return names
