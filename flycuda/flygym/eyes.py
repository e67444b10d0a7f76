"""FlyGym's own vision of given states (its CPU renderer and Retina): the reference
:mod:`flycuda.vision` is measured against."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from .bridge import require

__all__ = ["FlyGymEyes"]


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
