"""Connectome vision: one step of flyvis's connectome-constrained network for a batch of eyes
(:func:`connectome_step`, csrc/kernels/connectome_step.cuh; the network's tables and state:
:class:`flycuda.vision.network.ConnectomeNetwork`).

:func:`flycuda.reference.connectome.connectome_step` is its torch reference: flyvis 1.2.0's own
formulas (``PPNeuronIGRSynapses``: a gather of every edge's source, ``scatter_add_`` by target).
"""

from __future__ import annotations

import math
import struct

import torch

from ._values import check_index, check_offsets
from .checks import check_option, check_same_device

__all__ = ["connectome_step"]


def connectome_step(v: torch.Tensor, stimulus: torch.Tensor, rowptr: torch.Tensor, src: torch.Tensor,
                    weight: torch.Tensor, bias: torch.Tensor, tau: torch.Tensor, out: torch.Tensor, *, dt: float,
                    input_nodes: int) -> None:
    """One Euler step of flyvis's network for B eyes, into ``out``::

        s[b, n]   = sum over e in rowptr[n]..rowptr[n+1]-1, in order, of weight[e] * relu(v[b, src[e]])
        a         = ((-v[b, n] + bias[n]) + s[b, n]) + x[b, n]
        out[b, n] = v[b, n] + ((1 / max(tau[n], dt)) * a) * dt

    with ``x[b, n] = stimulus[b, n % C]`` for the first ``input_nodes`` nodes (flyvis: R1-R8, each
    column's photoreceptor value to all eight) and 0 for the others; every operation one float32
    rounding, in flyvis 1.2.0's order (``network/dynamics.py``, ``PPNeuronIGRSynapses``, and
    ``Network._next_state``). With the rows in flyvis's edge order (a stable sort of its edges by
    target, as :class:`flycuda.vision.connectome.Connectome` builds them), ``out`` equals flyvis's
    step on the CPU bit for bit (its ``scatter_add_`` adds each node's inputs in edge order).
    The voltages are flyvis's "activity" (it applies the ReLU only to presynaptic voltages).

    Args:
        v: float32 [B, N], any strides: the voltages now. The CUDA kernel runs the batch fastest:
            node-major voltages (``torch.empty(N, B).t()``) make its gathers coalesced.
        stimulus: float32 [B, C], any strides: each eye's photoreceptor input per column.
        rowptr: int32 [N + 1], contiguous: CSR offsets (0, non-decreasing, ending at E).
        src: int32 [E], contiguous, each in [0, N): each edge's source node.
        weight: float32 [E], contiguous: each edge's weight (flyvis: sign * syn_count * syn_strength).
        bias, tau: float32 [N], contiguous: each node's resting potential and time constant (s).
        out: float32 [B, N], written; any strides, no overlapping memory, not sharing memory with
            an input (the step reads every node's old voltage: keep two buffers).
        dt: the step (s), finite and > 0 as a float32 (the step takes it so, as flyvis does).
        input_nodes: a multiple of C, at most N.

    The maps' values are checked once per tensor on CUDA (with host copies; never while a
    graph is captured) and on every call on the CPU; a value that escapes the check is never
    a memory error (a source out of range reads NaN, a row is read within [0, E)).

    Raises:
        RuntimeError: a wrong dtype, rank, shape, device, contiguity, aliasing or map value
            (naming the argument); ``out`` is left untouched.
        ValueError: ``dt`` not finite and > 0 in float32, ``input_nodes`` not a multiple of C in [0, N].
    """
    dt32 = _float32(dt)
    if not (math.isfinite(dt32) and dt32 > 0):
        check_option("connectome_step", "dt", False, "finite and > 0 in float32", dt)
    if _tables_fit(v, rowptr, src, out):
        check_offsets("connectome_step", "rowptr", rowptr, src.shape[0], "E = src.size(0)", ref=out)
        check_index("connectome_step", "src", src, out.shape[1], "N = out.size(1)", ref=out)
    torch.ops.flycuda.connectome_step.default(v, stimulus, rowptr, src, weight, bias, tau, out, float(dt),
                                              int(input_nodes))


def _float32(x: float) -> float:
    """``x`` rounded to float32, as the op takes it (inf past float32's range)."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _tables_fit(v, rowptr, src, out) -> bool:
    """Do the CSR tables' shapes and dtypes fit? Only then are their values checked here; otherwise
    the op's own checks speak first (as on the CPU)."""
    return (out.dim() == 2 and v.dim() == 2 and rowptr.dim() == 1 and src.dim() == 1
            and rowptr.dtype == torch.int32 and src.dtype == torch.int32 and rowptr.shape[0] == out.shape[1] + 1)


@torch.library.register_fake("flycuda::connectome_step")
def _connectome_step_fake(v, stimulus, rowptr, src, weight, bias, tau, out, dt, input_nodes):
    op = "flycuda.connectome_step"
    torch._check(out.dim() == 2 and out.dtype == torch.float32,
                 lambda: f"{op}: argument 'out' must be float32 [B, N], got {out.dtype} {tuple(out.shape)}")
    B, N = out.shape
    torch._check(v.dtype == torch.float32 and tuple(v.shape) == (B, N),
                 lambda: f"{op}: argument 'v' must be float32 [{B}, {N}], got {v.dtype} {tuple(v.shape)}")
    torch._check(stimulus.dtype == torch.float32 and stimulus.dim() == 2 and stimulus.shape[0] == B,
                 lambda: f"{op}: argument 'stimulus' must be float32 [{B}, C], got {stimulus.dtype} {tuple(stimulus.shape)}")
    for name, t, dtype, n in (("rowptr", rowptr, torch.int32, N + 1), ("src", src, torch.int32, None),
                              ("weight", weight, torch.float32, src.shape[0]), ("bias", bias, torch.float32, N),
                              ("tau", tau, torch.float32, N)):
        torch._check(t.dtype == dtype and t.dim() == 1 and (n is None or t.shape[0] == n),
                     lambda: f"{op}: argument '{name}' must be {dtype} [{n if n is not None else 'E'}], got "
                             f"{t.dtype} {tuple(t.shape)}")
    torch._check_value(0 <= input_nodes <= N and (input_nodes == 0 or input_nodes % max(stimulus.shape[1], 1) == 0),
                       lambda: f"{op}: argument 'input_nodes' must be a multiple of C in [0, {N}], got {input_nodes}")
    dt32 = _float32(dt)
    torch._check_value(math.isfinite(dt32) and dt32 > 0,
                       lambda: f"{op}: argument 'dt' must be finite and > 0 in float32, got {dt}")
    check_same_device("connectome_step", "out", out, v=v, stimulus=stimulus, rowptr=rowptr, src=src, weight=weight,
                      bias=bias, tau=tau)
    return None
