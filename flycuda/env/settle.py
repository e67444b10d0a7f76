"""Settled starts: the environments' initial states at rest on the ground.

A named model's initial state is its qpos0 with the legs at the recording's pose: the fly
hangs above the floor (NeuroMechFly's thorax 0.8 mm up) and would fall into every episode.
FlyGym lets its flies settle for 0.05 s before a recording starts (its spawn and warm-up);
:func:`settle` does the same for each of a task's K initial states, once: MuJoCo (C, on the
host) steps each state for ``seconds`` with the driven joints held at their pose, and the
state reached (qpos and qvel) is the start. MuJoCo Warp runs the same physics, so it holds
that state still. The results are cached per model and states in this process (NeuroMechFly:
64 states x 500 steps take about 1.3 s on one core).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import mujoco
import numpy as np
import torch

from ..worlds import WARMUP_SECONDS

__all__ = ["settle", "SETTLE_SECONDS"]

SETTLE_SECONDS = WARMUP_SECONDS  # FlyGym's warm-up before a recording starts (flycuda.worlds)
_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 16


def _key(mjm, *arrays, seconds: float) -> str:
    """The cache key: the whole compiled model (its binary form), the states and the time."""
    model = np.empty(mujoco.mj_sizeModel(mjm), np.uint8)
    mujoco.mj_saveModel(mjm, None, model)
    h = hashlib.sha1(model.tobytes())
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(repr(float(seconds)).encode())
    return h.hexdigest()


def settle(mjm, qpos: torch.Tensor, qvel: torch.Tensor, ctrl: torch.Tensor, seconds: float = SETTLE_SECONDS
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The states ``qpos`` [K, nq], ``qvel`` [K, nv] after ``seconds`` of MuJoCo physics with
    the controls ``ctrl`` [K, nu] held (float32, like the inputs). ``seconds`` 0 returns them
    as they are."""
    steps = int(round(seconds / mjm.opt.timestep))
    if steps <= 0:
        return qpos, qvel
    q, v, c = (x.detach().cpu().double().numpy() for x in (qpos, qvel, ctrl))
    key = _key(mjm, q, v, c, seconds=seconds)
    if key not in _CACHE:
        d = mujoco.MjData(mjm)
        out_q, out_v = np.empty_like(q), np.empty_like(v)
        for k in range(q.shape[0]):
            mujoco.mj_resetData(mjm, d)
            d.qpos[:], d.qvel[:], d.ctrl[:] = q[k], v[k], c[k]
            for _ in range(steps):
                mujoco.mj_step(mjm, d)
            out_q[k], out_v[k] = d.qpos, d.qvel
        _CACHE[key] = (torch.from_numpy(out_q).float(), torch.from_numpy(out_v).float())
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    out_q, out_v = _CACHE[key]
    return out_q.clone(), out_v.clone()
