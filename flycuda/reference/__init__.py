"""Pure-PyTorch reference kernels, one per flycuda op, same name and arguments.

Two kinds, both used by the tests to check the C++ CPU op and the CUDA op:
* this module: vectorized torch, float64 math where it matters, for realistic
  sizes (thousands of worlds);
* :mod:`flycuda.reference.grid`: grid-emulator versions that mirror the CUDA
  kernels in csrc/cuda/ line by line (loops over blockIdx and threadIdx), for
  tiny inputs and for reading next to the .cu files.

The references read the step counter on the host (``step[0]``): they are for
checking, not for speed.
"""

from __future__ import annotations

import torch

from . import grid

__all__ = ["motion_to_ctrl", "spline_to_ctrl", "advance_step", "record_qpos", "record_chunk", "pool_ommatidia",
           "sample_frames", "grid"]


def sample_frames(offsets: torch.Tensor, step: int, frames_per_step: float, T: int,
                  mode: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Frame sampling of :func:`motion_to_ctrl` (csrc/kernels/motion_to_ctrl.cuh ``sample_frame``).

    Args:
        offsets: float64 [W] start frame per world.
        step: the step counter's value.
        frames_per_step: recording frames advanced per simulation step.
        T: number of recorded frames.
        mode: ``"clamp"`` or ``"loop"``.

    Returns:
        ``(i0, i1, a)``: int64 [W] first frame, int64 [W] next frame, float64 [W]
        blend weight in [0, 1). Non-finite positions read frame 0.
    """
    f = offsets.to(torch.float64) + float(step) * float(frames_per_step)
    if mode == "loop":
        f = torch.fmod(f, float(T))
        f = torch.where(f < 0, f + T, f)
        f = torch.where(f >= T, f - T, f)
    else:
        f = f.clamp(0.0, float(T - 1))
    f = torch.where((f >= 0) & (f <= T), f, torch.zeros_like(f))  # NaN / inf -> 0
    fl = torch.floor(f)
    i0 = fl.to(torch.int64).clamp(max=T - 1)
    a = f - fl
    i1 = i0 + 1
    i1 = torch.where(i1 >= T, torch.zeros_like(i1) if mode == "loop" else torch.full_like(i1, T - 1), i1)
    return i0, i1, a


def motion_to_ctrl(motion: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """Reference for ``flycuda.motion_to_ctrl`` (same contract, in place).

    ``ctrl[w, act_ids[d]] = motion[m, i0, d] + a * (motion[m, i1, d] - motion[m, i0, d])``
    in float64, rounded once to float32 (exact copy where a == 0), with
    ``m = 0 if M == 1 else w`` and ``(i0, i1, a)`` from :func:`sample_frames`; then
    ``step[0] += advance``.
    """
    W = ctrl.shape[0]
    M, T, D = motion.shape
    if offsets is None:
        offsets = torch.zeros(W, dtype=torch.float64, device=ctrl.device)
    i0, i1, a = sample_frames(offsets, int(step[0]), frames_per_step, T, mode)
    m = torch.arange(W, device=ctrl.device) if M == W and M > 1 else torch.zeros(W, dtype=torch.long, device=ctrl.device)
    d = torch.arange(D, device=ctrl.device)
    x0 = motion[m[:, None], i0[:, None], d[None, :]]
    x1 = motion[m[:, None], i1[:, None], d[None, :]]
    x0d = x0.to(torch.float64)
    v = (x0d + a[:, None] * (x1.to(torch.float64) - x0d)).to(torch.float32)
    v = torch.where(a[:, None] == 0, x0, v)
    ctrl[:, act_ids.long()] = v
    step[0] += advance


def spline_to_ctrl(coeffs: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """Reference for ``flycuda.spline_to_ctrl`` (same contract, in place).

    ``ctrl[w, act_ids[d]] = c0 + a * (c1 + a * (c2 + a * c3))`` with
    ``(c0, c1, c2, c3) = coeffs[m, i0, :, d]``, in float64, rounded once to float32
    (``c0`` rounded where a == 0), with ``m`` and ``(i0, a)`` as in
    :func:`motion_to_ctrl`; then ``step[0] += advance``.
    """
    W = ctrl.shape[0]
    M, T, _, D = coeffs.shape
    if offsets is None:
        offsets = torch.zeros(W, dtype=torch.float64, device=ctrl.device)
    i0, _, a = sample_frames(offsets, int(step[0]), frames_per_step, T, mode)
    m = torch.arange(W, device=ctrl.device) if M == W and M > 1 else torch.zeros(W, dtype=torch.long, device=ctrl.device)
    c = coeffs[m, i0]  # [W, 4, D] float64
    a = a[:, None]
    v = c[:, 0] + a * (c[:, 1] + a * (c[:, 2] + a * c[:, 3]))
    v = torch.where(a == 0, c[:, 0], v)
    ctrl[:, act_ids.long()] = v.to(torch.float32)
    step[0] += advance


def advance_step(step: torch.Tensor, n: int = 1) -> None:
    """Reference for ``flycuda.advance_step``: ``step[0] += n`` in place."""
    step[0] += n


def record_qpos(qpos: torch.Tensor, adrs: torch.Tensor, history: torch.Tensor,
                step: torch.Tensor, *, every: int = 1) -> None:
    """Reference for ``flycuda.record_qpos`` (same contract, in place).

    If ``s = step >= 0``, ``s % every == 0`` and ``s // every < R``:
    ``history[:, s // every, :] = qpos[:, adrs]``; otherwise nothing is written.
    """
    s = int(step[0])
    R = history.shape[1]
    if s < 0 or s % every != 0 or s // every >= R:
        return
    history[:, s // every, :] = qpos[:, adrs.long()]


def record_chunk(source: torch.Tensor, columns: torch.Tensor, chunks: torch.Tensor,
                 step: torch.Tensor, *, every: int = 1) -> None:
    """Reference for ``flycuda.record_chunk`` (same contract, in place).

    If ``s = step >= 0`` and ``s % every == 0``, with ``k = s // every`` and
    chunks [B, W, C, D]: ``chunks[(k // C) % B, :, k % C, :] = source[:, columns]``;
    otherwise nothing is written.
    """
    s = int(step[0])
    if s < 0 or s % every != 0:
        return
    k = s // every
    B, _, C, _ = chunks.shape
    chunks[(k // C) % B, :, k % C, :] = source[:, columns.long()]


def pool_ommatidia(pixels: torch.Tensor, omm_ptr: torch.Tensor, omm_pixels: torch.Tensor,
                   omm_channel: torch.Tensor, omm_column: torch.Tensor, omm_count: torch.Tensor,
                   readouts: torch.Tensor) -> None:
    """Reference for ``flycuda.pool_ommatidia`` (same contract, in place).

    FlyGym's float64 accumulation in the map's order, vectorized over images and
    ommatidia: step i adds every ommatidium's i-th entry
    ``float64(pixels[s, e, omm_pixels[ptr[o] + i], channel[o]]) / count[o]`` to its
    sum, so each sum sees FlyGym's operations in FlyGym's order (bit for bit). Then
    ``readouts[..., o, column[o]] = float32(sum / 255)`` and the other column 0.
    Divisions are tensor by tensor (never by a Python scalar, which torch may turn
    into a multiplication by the reciprocal).
    """
    S, E, O, _ = readouts.shape
    img = pixels.reshape(S * E, pixels.shape[2], 3)
    ptr, pix = omm_ptr.long(), omm_pixels.long()
    start, length = ptr[:-1], ptr[1:] - ptr[:-1]
    chan = omm_channel.long()
    n = omm_count.to(torch.float64).expand(S * E, O)
    acc = torch.zeros(S * E, O, dtype=torch.float64, device=readouts.device)
    for i in range(int(length.max()) if O > 0 else 0):
        live = length > i
        q = pix[(start + i).clamp(max=max(pix.shape[0] - 1, 0))]
        term = img[:, q, chan].to(torch.float64) / n
        acc = torch.where(live, acc + term, acc)
    value = (acc / torch.full_like(acc, 255.0)).to(torch.float32)
    out = torch.zeros(S * E, O, 2, dtype=torch.float32, device=readouts.device)
    out.scatter_(2, omm_column.long().view(1, O, 1).expand(S * E, O, 1), value.unsqueeze(2))
    readouts.copy_(out.view(S, E, O, 2))
