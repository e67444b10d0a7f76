"""The episode ops: the device-side bookkeeping of a batched environment's step
(:mod:`flycuda.env`), each world with its own step counter (csrc/kernels/episode.cuh).

* :func:`motion_at`: the recording at each world's own counter, into any [W, D] buffer;
* :func:`scatter_actions`: actions [W, A] -> controls, scaled, offset and clamped;
* :func:`gather_columns`: observation columns from several [W, N] sources into one buffer;
* :func:`episode_step`: per-world counters advanced, terminations and truncations;
* :func:`reset_worlds`: a new initial state (and seeded noise) for the worlds that ended.

Like every flycuda op they work in place, on zero-copy views of MuJoCo Warp's Data,
never read the device on the host while a CUDA graph is captured, and compute the same
bits on the CPU and on CUDA. Shapes: W worlds, A actions, O observation columns, K
initial states, nq/nv/nu MuJoCo's sizes.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ._values import check_columns, check_index
from .checks import check_frame_options, check_option, check_same_device

__all__ = ["motion_at", "scatter_actions", "gather_columns", "episode_step", "reset_worlds", "action_map"]


def motion_at(frames: torch.Tensor, world_steps: torch.Tensor, out: torch.Tensor, *,
              offsets: torch.Tensor | None = None, frames_per_step: float = 1.0, mode: str = "clamp") -> None:
    """Writes each world's recorded pose at its own step counter into ``out``.

    For world w and DOF d, at the frame position ``f = offsets[w] + world_steps[w] *
    frames_per_step`` (float64, mapped into the recording as :func:`motion_to_ctrl` does)::

        out[w, d] = motion_to_ctrl's target at f   (frames float32 [M, T, D]: linear)
                  = spline_to_ctrl's target at f   (frames float64 [M, T, 4, D]: cubic)

    bit for bit the value those ops write into ``ctrl`` at global step ``world_steps[w]``.

    Args:
        frames: float32 [M, T, D] recorded frames, or float64 [M, T, 4, D] cubic pieces
            (:func:`flycuda.spline_coeffs`); contiguous; M == 1 or M == W.
        world_steps: int64 [W], contiguous: each world's step (read on the device).
        out: float32 [W, D], any strides (no overlap), written in full.
        offsets: float32/float64 [W] start frame per world; default 0.
        frames_per_step: recording frames per step; finite.
        mode: ``"clamp"`` or ``"loop"``.

    Raises:
        RuntimeError: a wrong dtype, shape, device or aliasing (``out`` untouched).
        ValueError: a bad ``mode`` or non-finite ``frames_per_step``.
    """
    check_frame_options("motion_at", mode, frames_per_step)
    torch.ops.flycuda.motion_at.default(frames, world_steps, out, offsets, float(frames_per_step), mode)


@torch.library.register_fake("flycuda::motion_at")
def _motion_at_fake(frames, world_steps, out, offsets, frames_per_step, frame_mode):
    torch._check(out.dim() == 2 and out.dtype == torch.float32,
                 lambda: f"flycuda.motion_at: argument 'out' must be float32 [W, D], got {out.dtype} {tuple(out.shape)}")
    torch._check(world_steps.dtype == torch.int64 and world_steps.dim() == 1,
                 lambda: f"flycuda.motion_at: argument 'world_steps' must be int64 [W], got {world_steps.dtype} "
                         f"{tuple(world_steps.shape)}")
    check_same_device("motion_at", "out", out, frames=frames, world_steps=world_steps, offsets=offsets)


def action_map(scale, offset, low, high, device=None) -> torch.Tensor:
    """The ``action_map`` of :func:`scatter_actions`: float32 [4, A] = rows scale, offset,
    low, high (each a length-A sequence or tensor, or a number for every action)."""
    rows = [torch.as_tensor(r, dtype=torch.float32) for r in (scale, offset, low, high)]
    A = max(r.numel() for r in rows)
    return torch.stack([r.expand(A) if r.dim() == 0 else r.reshape(-1) for r in rows]).contiguous().to(device)


def scatter_actions(actions: torch.Tensor, act_ids: torch.Tensor, action_map: torch.Tensor,
                    ctrl: torch.Tensor) -> None:
    """Writes actions into the controls they drive::

        ctrl[w, act_ids[a]] = min(max(actions[w, a] * scale[a] + offset[a], low[a]), high[a])

    in float32, rounded after the product and after the sum (no FMA, the same on the CPU
    and CUDA). A NaN action becomes ``low[a]``, +-inf the bound on its side; the other
    columns of ``ctrl`` are not touched.

    Args:
        actions: float32 [W, A], any strides.
        act_ids: int32/int64 [A], distinct, each in [0, nu) (checked once per tensor, never
            while a CUDA graph is captured; ids that escape the check are skipped).
        action_map: float32 [4, A], contiguous: rows scale, offset, low, high (:func:`action_map`).
        ctrl: float32 [W, nu], any strides (e.g. ``sim.view("ctrl")``).

    Raises:
        RuntimeError: a wrong dtype, shape, device, aliasing or id (``ctrl`` untouched).
    """
    if ctrl.dim() == 2:
        check_index("scatter_actions", "act_ids", act_ids, ctrl.shape[1], "nu = ctrl.size(1)", unique=True, ref=ctrl)
    torch.ops.flycuda.scatter_actions.default(actions, act_ids, action_map, ctrl)


@torch.library.register_fake("flycuda::scatter_actions")
def _scatter_actions_fake(actions, act_ids, action_map, ctrl):
    torch._check(ctrl.dim() == 2 and actions.dim() == 2 and actions.shape[0] == ctrl.shape[0],
                 lambda: f"flycuda.scatter_actions: argument 'actions' must be [W, A] with W = {ctrl.shape[0]}, "
                         f"got {tuple(actions.shape)}")
    check_same_device("scatter_actions", "ctrl", ctrl, actions=actions, act_ids=act_ids, action_map=action_map)


def gather_columns(sources: Sequence[torch.Tensor], columns: torch.Tensor, out: torch.Tensor) -> None:
    """Gathers columns of several per-world sources into one buffer, in one launch::

        out[w, o] = sources[columns[o, 0]][w, columns[o, 1]]

    Args:
        sources: 1 to 8 float32 [W, N_k] tensors, any strides (zero-copy views of
            MuJoCo Warp's qpos, qvel, ctrl, ... or buffers of one's own).
        columns: int32 [O, 2], contiguous: (source, column) of each output column (checked
            on the host outside CUDA-graph capture; entries that escape it are skipped).
        out: float32 [W, O], any strides (no overlap).

    Raises:
        RuntimeError: a wrong dtype, shape, device, aliasing or column (``out`` untouched).
    """
    sources = list(sources)
    check_columns("gather_columns", columns, [s.shape[1] if s.dim() == 2 else 0 for s in sources], ref=out)
    torch.ops.flycuda.gather_columns.default(sources, columns, out)


@torch.library.register_fake("flycuda::gather_columns")
def _gather_columns_fake(sources, columns, out):
    torch._check(out.dim() == 2 and columns.dim() == 2 and columns.shape[0] == out.shape[1],
                 lambda: f"flycuda.gather_columns: argument 'columns' must be [O, 2] with O = out.size(1), got "
                         f"{tuple(columns.shape)}")
    check_same_device("gather_columns", "out", out, columns=columns, **{f"sources[{k}]": s for k, s in
                                                                       enumerate(sources)})


def episode_step(world_steps: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor, terminated: torch.Tensor,
                 truncated: torch.Tensor, *, root_adr: int = -1, min_height: float = float("-inf"),
                 max_height: float = float("inf"), min_up: float = -2.0, max_steps: int = 0) -> None:
    """Advances every world's step counter by one and says whose episode ends::

        world_steps[w] += 1
        terminated[w] = any non-finite qpos[w] or qvel[w]
                        or (root_adr >= 0 and not (min_height <= z <= max_height and up >= min_up))
        truncated[w]  = max_steps > 0 and world_steps[w] >= max_steps

    where ``z = qpos[w, root_adr + 2]`` is the free joint's height and ``up = 1 - 2 (qx^2 +
    qy^2)`` the world z of its body's z axis (1 upright, -1 upside down), from its
    quaternion ``qpos[w, root_adr + 3 : root_adr + 7]`` (float32, no FMA).

    Args:
        world_steps: int64 [W], contiguous.
        qpos, qvel: float32 [W, nq], [W, nv], any strides.
        terminated, truncated: bool [W], contiguous: written in full.
        root_adr: the qpos address of the free joint the pose rules read; -1: none.
        min_height, max_height, min_up: the pose rules (in the model's length unit).
        max_steps: the episode length (0: no time limit).

    Raises:
        RuntimeError: a wrong dtype, shape, device or aliasing (outputs untouched).
        ValueError: a NaN rule, ``max_steps < 0``, or a ``root_adr`` with no free joint's room.
    """
    rules = {"min_height": min_height, "max_height": max_height, "min_up": min_up}
    for name, v in rules.items():
        check_option("episode_step", name, not math.isnan(v), "a number (not NaN)", v)
    check_option("episode_step", "max_steps", max_steps >= 0, ">= 0 (0: no time limit)", max_steps)
    if qpos.dim() == 2:
        top = qpos.shape[1] - 7
        check_option("episode_step", "root_adr", root_adr == -1 or 0 <= root_adr <= top,
                     f"-1 (no pose rules) or the qpos address of a free joint (7 entries) in [0, {top}]", root_adr)
    torch.ops.flycuda.episode_step.default(world_steps, qpos, qvel, terminated, truncated, int(root_adr),
                                           float(min_height), float(max_height), float(min_up), int(max_steps))


@torch.library.register_fake("flycuda::episode_step")
def _episode_step_fake(world_steps, qpos, qvel, terminated, truncated, root_adr, min_height, max_height, min_up,
                       max_steps):
    torch._check(world_steps.dtype == torch.int64 and world_steps.dim() == 1,
                 lambda: "flycuda.episode_step: argument 'world_steps' must be int64 [W]")
    check_same_device("episode_step", "world_steps", world_steps, qpos=qpos, qvel=qvel, terminated=terminated,
                      truncated=truncated)


def reset_worlds(done: torch.Tensor, init_qpos: torch.Tensor, init_qvel: torch.Tensor, init_frames: torch.Tensor,
                 qpos_noise: torch.Tensor, qvel_noise: torch.Tensor, seed: int, qpos: torch.Tensor,
                 qvel: torch.Tensor, world_steps: torch.Tensor, episodes: torch.Tensor, offsets: torch.Tensor) -> None:
    """Starts a new episode in every world marked ``done``; the others are not touched.

    For such a world w, with ``e = episodes[w]`` and ``key = hash(seed, w, e)``
    (csrc/kernels/episode.cuh: splitmix64's mixer), ``k = pick(key, K)`` one of the K
    initial states, and ``u_j = uniform(key, j)`` in [-1, 1) (a grid of 2^-23)::

        qpos[w, j] = init_qpos[k, j] + qpos_noise[j] * u_j        (exactly init where noise is 0)
        qvel[w, j] = init_qvel[k, j] + qvel_noise[j] * u_(nq + j)
        world_steps[w] = 0;  episodes[w] = e + 1;  offsets[w] = init_frames[k]

    The same seed and episode counts give the same states on any device.
    (:func:`flycuda.reference.episode.reset_worlds` computes the same in Python.) Call MuJoCo
    Warp's ``reset_data(m, d, reset=done)`` first for the rest of Data; this op then
    writes the state. Keep quaternion entries' noise at 0 (they would leave unit length).

    Args:
        done: bool [W]. init_qpos: float32 [K, nq]; init_qvel: float32 [K, nv];
        init_frames: float64 [K] (each initial state's frame in the recording, for the
        reference pose); qpos_noise: float32 [nq]; qvel_noise: float32 [nv] (all contiguous).
        seed: any int (taken modulo 2^64).
        qpos, qvel: float32 [W, nq], [W, nv], any strides. world_steps, episodes: int64 [W];
        offsets: float64 [W] (contiguous).

    Raises:
        RuntimeError: a wrong dtype, shape, device or aliasing (outputs untouched).
    """
    torch.ops.flycuda.reset_worlds.default(done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise,
                                           _as_int64(seed),
                                           qpos, qvel, world_steps, episodes, offsets)


def _as_int64(seed: int) -> int:
    """``seed`` modulo 2^64 as the int64 the schema carries (the kernel reads it as uint64)."""
    s = int(seed) % 2 ** 64
    return s - 2 ** 64 if s >= 2 ** 63 else s


@torch.library.register_fake("flycuda::reset_worlds")
def _reset_worlds_fake(done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise, seed, qpos, qvel,
                       world_steps, episodes, offsets):
    torch._check(done.dtype == torch.bool and done.dim() == 1, lambda: "flycuda.reset_worlds: argument 'done' "
                                                                       "must be bool [W]")
    check_same_device("reset_worlds", "done", done, init_qpos=init_qpos, init_qvel=init_qvel,
                      init_frames=init_frames, qpos_noise=qpos_noise, qvel_noise=qvel_noise, qpos=qpos, qvel=qvel,
                      world_steps=world_steps, episodes=episodes, offsets=offsets)
