"""Pure-PyTorch references of the episode ops (:mod:`flycuda.ops.episode`), same names
and arguments, written from their contracts (not from the kernels): vectorized torch
where the math allows, plain Python integers for the reset's hash. For checking."""

from __future__ import annotations

from typing import Sequence

import torch

from . import motion_to_ctrl, spline_to_ctrl

__all__ = ["motion_at", "scatter_actions", "gather_columns", "episode_step", "reset_worlds", "reset_key",
           "reset_uniform", "reset_pick"]

_M64 = 2 ** 64 - 1


def motion_at(frames: torch.Tensor, world_steps: torch.Tensor, out: torch.Tensor, *,
              offsets: torch.Tensor | None = None, frames_per_step: float = 1.0, mode: str = "clamp") -> None:
    """Reference for ``flycuda.ops.motion_at``: world w's row is what the reference
    motion_to_ctrl (float32 frames) or spline_to_ctrl (float64 pieces) writes at the
    global step ``world_steps[w]``, one world at a time."""
    W, D = out.shape
    op = spline_to_ctrl if frames.dtype == torch.float64 else motion_to_ctrl
    for w in range(W):
        m = frames[w:w + 1] if frames.shape[0] == W and W > 1 else frames[:1]
        row = torch.empty(1, D, dtype=torch.float32)
        step = torch.tensor([int(world_steps[w])], dtype=torch.int64)
        off = None if offsets is None else offsets[w:w + 1].cpu()
        op(m.cpu(), step, row, torch.arange(D), offsets=off, frames_per_step=frames_per_step, mode=mode)
        out[w] = row[0].to(out.device)


def scatter_actions(actions: torch.Tensor, act_ids: torch.Tensor, action_map: torch.Tensor,
                    ctrl: torch.Tensor) -> None:
    """Reference for ``flycuda.ops.scatter_actions``: float32 product, then sum, then
    clamp(low, high) where a NaN takes ``low``."""
    scale, offset, low, high = action_map
    v = actions * scale + offset  # two float32 roundings (torch does not fuse these)
    v = torch.where(torch.isnan(v), low.expand_as(v), v)
    ctrl[:, act_ids.long()] = torch.minimum(torch.maximum(v, low), high)


def gather_columns(sources: Sequence[torch.Tensor], columns: torch.Tensor, out: torch.Tensor) -> None:
    """Reference for ``flycuda.ops.gather_columns``: column by column."""
    for o, (k, c) in enumerate(columns.tolist()):
        out[:, o] = sources[k][:, c]


def episode_step(world_steps: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor, terminated: torch.Tensor,
                 truncated: torch.Tensor, *, root_adr: int = -1, min_height: float = float("-inf"),
                 max_height: float = float("inf"), min_up: float = -2.0, max_steps: int = 0) -> None:
    """Reference for ``flycuda.ops.episode_step``."""
    world_steps += 1
    bad = ~torch.isfinite(qpos).all(dim=1) | ~torch.isfinite(qvel).all(dim=1)
    if root_adr >= 0:
        z = qpos[:, root_adr + 2]
        qx, qy = qpos[:, root_adr + 4], qpos[:, root_adr + 5]
        up = 1.0 - 2.0 * (qx * qx + qy * qy)  # float32, each operation rounded
        f32 = torch.float32
        ok = (z >= torch.tensor(min_height, dtype=f32)) & (z <= torch.tensor(max_height, dtype=f32)) & \
             (up >= torch.tensor(min_up, dtype=f32))
        bad |= ~ok
    terminated.copy_(bad)
    truncated.copy_((world_steps >= max_steps) if max_steps > 0 else torch.zeros_like(truncated))


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def reset_key(seed: int, w: int, episode: int) -> int:
    """The reset's hash of (seed, world, episode), an unsigned 64-bit int."""
    a = _mix64((seed + 0x9E3779B97F4A7C15 * (w + 1)) & _M64)
    return _mix64(a ^ ((0xD1B54A32D192ED03 * (episode + 1)) & _M64))


def reset_uniform(key: int, j: int) -> float:
    """Draw j of a reset: uniform in [-1, 1) on a grid of 2^-23."""
    h = _mix64((key + 0x9E3779B97F4A7C15 * (j + 1)) & _M64)
    return ((h >> 40) - 2 ** 23) / 2 ** 23


def reset_pick(key: int, K: int) -> int:
    """Which of K initial states a reset takes."""
    return ((key >> 32) * K) >> 32


def reset_worlds(done: torch.Tensor, init_qpos: torch.Tensor, init_qvel: torch.Tensor, init_frames: torch.Tensor,
                 qpos_noise: torch.Tensor, qvel_noise: torch.Tensor, seed: int, qpos: torch.Tensor,
                 qvel: torch.Tensor, world_steps: torch.Tensor, episodes: torch.Tensor, offsets: torch.Tensor) -> None:
    """Reference for ``flycuda.ops.reset_worlds``, world by world."""
    seed = int(seed) % 2 ** 64
    nq, nv = qpos.shape[1], qvel.shape[1]
    for w in torch.nonzero(done).flatten().tolist():
        e = int(episodes[w])
        key = reset_key(seed, w, e)
        k = reset_pick(key, init_qpos.shape[0])
        u = torch.tensor([reset_uniform(key, j) for j in range(nq + nv)], dtype=torch.float32)
        for dst, init, noise, draws in ((qpos, init_qpos[k], qpos_noise, u[:nq]), (qvel, init_qvel[k], qvel_noise,
                                                                                 u[nq:])):
            jittered = init + noise * draws  # float32: product, then sum
            dst[w] = torch.where(noise == 0, init, jittered)
        world_steps[w] = 0
        episodes[w] = e + 1
        offsets[w] = init_frames[k]
