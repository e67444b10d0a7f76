"""The record ops: per-world columns recorded at the device step counter into a
history (:func:`record_qpos`) or a ring of chunks (:func:`record_chunk`)."""

from __future__ import annotations

import torch

from ._values import check_index
from .checks import check_counter, check_option, check_same_device

__all__ = ["record_qpos", "record_chunk"]


def record_qpos(qpos: torch.Tensor, adrs: torch.Tensor, history: torch.Tensor,
                step: torch.Tensor, *, every: int = 1) -> None:
    """Records joint positions at the current step into ``history``.

    With ``s = step[0]``: if ``s >= 0``, ``s % every == 0`` and ``s // every < R``,
    ``history[w, s // every, d] = qpos[w, adrs[d]]`` for all w, d; otherwise
    nothing is written.

    Args:
        qpos: float32 [W, nq], any strides (e.g. ``wp.to_torch(d.qpos)``).
        adrs: int32/int64 [D], each in [0, nq) (repeats allowed).
        history: float32 [W, R, D], written in place; no overlapping memory.
        step: int64 [1] or [2] step counter on the same device (``step[0]`` is read).
        every: record one sample every ``every`` steps (>= 1).

    adrs values are checked once per tensor, as act_ids in :func:`motion_to_ctrl`.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, or adrs out of range;
            ``history`` is left untouched.
        ValueError: ``every < 1``.
    """
    check_option("record_qpos", "every", every >= 1, ">= 1", every)
    if qpos.dim() == 2:
        check_index("record_qpos", "adrs", adrs, qpos.shape[1], "nq = qpos.size(1)", ref=history)
    torch.ops.flycuda.record_qpos.default(qpos, adrs, history, step, int(every))


@torch.library.register_fake("flycuda::record_qpos")
def _record_qpos_fake(qpos, adrs, history, step, every):
    torch._check(history.dim() == 3 and history.dtype == torch.float32,
                 lambda: f"flycuda.record_qpos: argument 'history' must be float32 [W, R, D], got {history.dtype} {tuple(history.shape)}")
    torch._check(qpos.dim() == 2 and qpos.shape[0] == history.shape[0],
                 lambda: f"flycuda.record_qpos: argument 'qpos' must have shape [W, nq] with W = {history.shape[0]}, got {tuple(qpos.shape)}")
    check_same_device("record_qpos", "history", history, qpos=qpos, step=step, adrs=adrs)
    check_counter("record_qpos", step)
    return None


def record_chunk(source: torch.Tensor, columns: torch.Tensor, chunks: torch.Tensor,
                 step: torch.Tensor, *, every: int = 1) -> None:
    """Records columns of any per-world array at the current step into a ring of chunks.

    With ``s = step[0]``: if ``s >= 0`` and ``s % every == 0``, then with ``k = s // every``::
        chunks[(k // C) % B, w, k % C, d] = source[w, columns[d]]    for all w, d

    otherwise nothing is written. Sample k is row ``k % C`` of chunk ``k // C``, and
    chunk c lives in ring slot ``c % B``: with B = 2 one chunk fills while the other
    is copied out (:mod:`flycuda.recording` streams a whole run through this fixed
    memory). The source is a zero-copy view of any [W, N] float32 array of MuJoCo
    Warp's Data (qpos, qvel, ctrl, actuator_force, sensordata, xpos as [W, nbody*3],
    ...). :func:`record_qpos` is the case B = 1, C = R without wrapping.

    Args:
        source: float32 [W, N], any strides.
        columns: int32/int64 [D], each in [0, N) (repeats allowed), contiguous.
        chunks: float32 [B, W, C, D] (B >= 1, C >= 1), written in place; any strides,
            no overlapping memory, not sharing memory with the inputs.
        step: int64 [1] or [2] step counter on the same device (``step[0]`` is read).
        every: record one sample every ``every`` steps (>= 1).

    columns values are checked once per tensor, as act_ids in :func:`motion_to_ctrl`.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, or columns out of range;
            ``chunks`` is left untouched.
        ValueError: ``every < 1``.
    """
    check_option("record_chunk", "every", every >= 1, ">= 1", every)
    if source.dim() == 2:
        check_index("record_chunk", "columns", columns, source.shape[1], "N = source.size(1)", ref=chunks)
    torch.ops.flycuda.record_chunk.default(source, columns, chunks, step, int(every))


@torch.library.register_fake("flycuda::record_chunk")
def _record_chunk_fake(source, columns, chunks, step, every):
    torch._check(chunks.dim() == 4 and chunks.dtype == torch.float32,
                 lambda: f"flycuda.record_chunk: argument 'chunks' must be float32 [B, W, C, D], got {chunks.dtype} {tuple(chunks.shape)}")
    torch._check(source.dim() == 2 and source.shape[0] == chunks.shape[1],
                 lambda: f"flycuda.record_chunk: argument 'source' must have shape [W, N] with W = {chunks.shape[1]}, got {tuple(source.shape)}")
    torch._check(columns.dim() == 1 and columns.shape[0] == chunks.shape[3],
                 lambda: f"flycuda.record_chunk: argument 'columns' must have shape [{chunks.shape[3]}], got {tuple(columns.shape)}")
    check_same_device("record_chunk", "chunks", chunks, source=source, step=step, columns=columns)
    check_counter("record_chunk", step)
    return None
