"""Grid-emulator references: the CUDA kernels of csrc/kernels/, line by line, in Python.

``launch(kernel, grid, block, *args)`` runs a Python "kernel" over every block
and thread of a 1D or 2D grid, sequentially, like the emulators of the "CUDA
for Python programmers" lecture. A kernel is either one function
``kernel(ctx, *args)`` or a list of such functions: the phases of a kernel
separated by ``__syncthreads()``. Every thread finishes phase k before any
thread of its block starts phase k+1. ``ctx`` carries ``blockIdx``,
``threadIdx``, ``blockDim``, ``gridDim`` (each with .x/.y), ``regs`` (a dict of
the thread's registers, kept across phases), ``shared`` (the block's shared
memory, a dict) and ``globals`` (device globals, a dict kept for the launch).

These run one Python call per thread: use them on tiny inputs only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ..ops import launch_plan

__all__ = ["dim3", "ThreadCtx", "launch", "cdiv", "motion_to_ctrl", "spline_to_ctrl",
           "advance_step", "record_qpos", "record_chunk"]


@dataclass(frozen=True)
class dim3:
    """CUDA's dim3 (z is not used by flycuda's kernels)."""

    x: int = 1
    y: int = 1
    z: int = 1


@dataclass
class ThreadCtx:
    """What a thread sees: its indices, the launch shape, registers and memories."""

    blockIdx: dim3
    threadIdx: dim3
    blockDim: dim3
    gridDim: dim3
    regs: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)
    globals: dict = field(default_factory=dict)


def cdiv(a: int, b: int) -> int:
    """Ceiling division, as ``cdiv`` in csrc/common.h."""
    return (a + b - 1) // b


def _as_dim3(v: int | tuple | dim3) -> dim3:
    if isinstance(v, dim3):
        return v
    if isinstance(v, int):
        return dim3(v)
    return dim3(*v)


def launch(kernel: Callable | Sequence[Callable], grid: int | tuple | dim3,
           block: int | tuple | dim3, *args: Any,
           device_globals: dict | None = None) -> None:
    """Runs ``kernel`` on an emulated ``grid`` of ``block``-sized blocks.

    Args:
        kernel: a function ``f(ctx, *args)`` or a list of them (phases split by
            ``__syncthreads()``).
        grid, block: int, tuple or :class:`dim3` (1D or 2D).
        *args: passed to every thread.
        device_globals: the ``__device__`` globals of the module (a dict that
            outlives the launch, as a module's globals outlive a kernel).
    """
    phases = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel]
    g, b = _as_dim3(grid), _as_dim3(block)
    if min(g.x, g.y, b.x, b.y) <= 0:
        raise ValueError(f"launch: grid and block must be positive, got grid={g} block={b}")
    globs = device_globals if device_globals is not None else {}
    for by in range(g.y):
        for bx in range(g.x):
            shared: dict = {}
            threads = [ThreadCtx(dim3(bx, by), dim3(tx, ty), b, g, {}, shared, globs)
                       for ty in range(b.y) for tx in range(b.x)]
            for phase in phases:
                for ctx in threads:
                    phase(ctx, *args)


# --- motion_to_ctrl, spline_to_ctrl (csrc/kernels/motion_to_ctrl.cuh) -------------


def _sample_frame(offset: float, step: int, fps: float, T: int, loop: bool):
    """csrc/kernels/motion_to_ctrl.cuh ``sample_frame``, scalar by scalar."""
    f = offset + float(step) * fps
    last = float(T - 1)
    if loop:
        f = math.fmod(f, float(T)) if math.isfinite(f) else math.nan
        if f < 0.0:
            f += T
        if f >= T:
            f -= T
    else:
        f = 0.0 if f < 0.0 else (last if f > last else f)
    if not (0.0 <= f <= last + 1.0):
        f = 0.0
    fl = math.floor(f)
    i0 = min(int(fl), T - 1)
    a = f - fl
    i1 = i0 + 1
    if i1 >= T:
        i1 = 0 if loop else T - 1
    return i0, i1, a


def _blend(x0: float, x1: float, a: float) -> float:
    """csrc/kernels/motion_to_ctrl.cuh ``blend``: float64 math, one rounding to float32."""
    if a == 0.0:
        return x0
    return x0 + a * (x1 - x0)


def _cubic(c0: float, c1: float, c2: float, c3: float, a: float) -> float:
    """csrc/kernels/motion_to_ctrl.cuh ``cubic``: Horner in float64, one rounding to float32."""
    if a == 0.0:
        return c0
    return c0 + a * (c1 + a * (c2 + a * c3))


def _linear_frames(motion: torch.Tensor):
    """csrc/kernels/motion_to_ctrl.cuh ``LinearFrames``: (T, D, at)."""
    M, T, D = motion.shape

    def at(w, i0, i1, a, d):
        rec = motion[0 if M == 1 else w]
        return _blend(float(rec[i0, d]), float(rec[i1, d]), a)
    return T, D, at


def _spline_frames(coeffs: torch.Tensor):
    """csrc/kernels/motion_to_ctrl.cuh ``SplineFrames``: (T, D, at)."""
    M, T, _, D = coeffs.shape

    def at(w, i0, i1, a, d):
        c = coeffs[0 if M == 1 else w, i0, :, d].tolist()
        return _cubic(c[0], c[1], c[2], c[3], a)
    return T, D, at


def _motion_to_ctrl_body(ctx, frames, step, ticket, ctrl, act_ids, offsets, W, nu, fps, loop, advance):
    T, D, at = frames
    s = int(step[0])  # read by every thread before any advance
    ctx.regs["s"] = s
    idx = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if idx < W * D:
        w = idx // D
        d = idx - w * D
        offset = float(offsets[w]) if offsets is not None else 0.0
        i0, i1, a = _sample_frame(offset, s, fps, T, loop)
        c = int(act_ids[d])
        if 0 <= c < nu:
            ctrl[w, c] = at(w, i0, i1, a, d)


def _atomic_inc(word: torch.Tensor, val: int) -> int:
    """CUDA's atomicInc on an unsigned 32-bit word (held in an int32 [1] view):
    ``old >= val ? 0 : old + 1``; returns old. (Blocks run one at a time here.)"""
    old = int(word[0]) & 0xFFFFFFFF
    new = 0 if old >= val else old + 1
    word[0] = new - (1 << 32) if new >= (1 << 31) else new
    return old


def _motion_to_ctrl_advance(ctx, frames, step, ticket, ctrl, act_ids, offsets, W, nu, fps, loop, advance):
    if advance != 0 and ctx.threadIdx.x == 0:  # fused: one ticket per block
        last = ctx.gridDim.x - 1
        if _atomic_inc(ticket, last) == last:  # the last block: all reads are done
            step[0] = ctx.regs["s"] + advance


def _launch_frames(frames, step, ctrl, act_ids, offsets, frames_per_step, mode, advance, threads):
    """As csrc/cuda/motion_to_ctrl.cu ``launch``, by the launch plan
    (:func:`flycuda.ops.launch_plan.plan_motion_to_ctrl`): fused with the advance for a
    counter with the hidden ticket, else followed by advance_step."""
    W, nu = ctrl.shape
    plan = launch_plan.plan_motion_to_ctrl(W, frames[1], advance, launch_plan.step_has_ticket(step), threads)
    if plan.run_kernel:
        ticket = launch_plan.ticket_of(step) if plan.fused else None
        launch([_motion_to_ctrl_body, _motion_to_ctrl_advance], plan.blocks, plan.threads, frames, step,
               ticket, ctrl, act_ids, offsets, W, nu, float(frames_per_step), mode == "loop",
               int(advance) if plan.fused else 0)
    if plan.advance_kernel:
        advance_step(step, advance)


def motion_to_ctrl(motion: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0, threads: int = launch_plan.MOTION_TO_CTRL_THREADS) -> None:
    """Grid emulation of ``motion_to_ctrl_kernel<LinearFrames>`` (one thread per (w, d)).

    Same contract as ``flycuda.motion_to_ctrl``; CPU tensors only. ``threads``
    is the block size (the .cuh's by default); small values exercise many blocks.
    With a counter from ``new_step_counter`` the advance is fused (each block takes
    one ticket from the hidden word with atomicInc; the last one advances
    ``step[0]``); with any other counter it is a second launch, as
    csrc/cuda/motion_to_ctrl.cu does.
    """
    _launch_frames(_linear_frames(motion), step, ctrl, act_ids, offsets, frames_per_step, mode,
                   advance, threads)


def spline_to_ctrl(coeffs: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0, threads: int = launch_plan.MOTION_TO_CTRL_THREADS) -> None:
    """Grid emulation of ``motion_to_ctrl_kernel<SplineFrames>``: as :func:`motion_to_ctrl`
    with ``coeffs`` float64 [M, T, 4, D] (``flycuda.spline_coeffs``)."""
    _launch_frames(_spline_frames(coeffs), step, ctrl, act_ids, offsets, frames_per_step, mode,
                   advance, threads)


# --- advance_step (csrc/kernels/advance_step.cuh) ---------------------------------

def _advance_step_kernel(ctx, step, n):
    step[0] += n


def advance_step(step: torch.Tensor, n: int = 1) -> None:
    """Grid emulation of ``advance_step_kernel<<<1, 1>>>``."""
    launch(_advance_step_kernel, 1, 1, step, int(n))


# --- record family (csrc/kernels/record.cuh) ---------------------------------

RECORD_THREADS = launch_plan.RECORD_THREADS  # kRecordThreads


def _record_base(s, every, limit, B, C):
    """record_base: (slot, row) that step s records into, or None."""
    if s < 0 or s % every != 0:
        return None
    k = s // every
    if k >= limit:
        return None
    return (k // C) % B, k % C


def _record_kernel(ctx, src, cols, out, step, every, limit, W, D, N):
    B, C = out.shape[0], out.shape[2]
    base = _record_base(int(step[0]), every, limit, B, C)
    if base is None:
        return
    idx = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if idx >= W * D:
        return
    w = idx // D
    d = idx - w * D
    a = int(cols[d])
    if a < 0 or a >= N:
        return
    out[base[0], w, base[1], d] = src[w, a]


def _launch_record(src, cols, out, step, every, limit, threads):
    """out: [B, W, C, D] (a view of the op's output)."""
    _, W, _, D = out.shape
    if W * D == 0 or limit == 0:
        return
    launch(_record_kernel, cdiv(W * D, threads), threads, src, cols, out, step, int(every), limit, W, D,
           src.shape[1])


def record_qpos(qpos: torch.Tensor, adrs: torch.Tensor, history: torch.Tensor,
                step: torch.Tensor, *, every: int = 1, threads: int = RECORD_THREADS) -> None:
    """Grid emulation of ``record_kernel`` for record_qpos (one thread per (w, d);
    B = 1, C = R, limit = R)."""
    _launch_record(qpos, adrs, history.unsqueeze(0), step, every, history.shape[1], threads)


def record_chunk(source: torch.Tensor, columns: torch.Tensor, chunks: torch.Tensor,
                 step: torch.Tensor, *, every: int = 1, threads: int = RECORD_THREADS) -> None:
    """Grid emulation of ``record_kernel`` for record_chunk (a ring of B chunks of C rows)."""
    _launch_record(source, columns, chunks, step, every, float("inf"), threads)
