"""The targets ops: each world's target angles from a recording at the device step
counter, into the controls (:func:`motion_to_ctrl` linear, :func:`spline_to_ctrl` cubic)."""

from __future__ import annotations

import torch

from ._values import check_index
from .checks import MODES, check_counter, check_frame_options, check_same_device

__all__ = ["MODES", "motion_to_ctrl", "spline_to_ctrl"]


def motion_to_ctrl(motion: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """Writes each world's target angles at the current step into ``ctrl``.

    For every world w and DOF d, with the frame position
    ``f = offsets[w] + step[0] * frames_per_step`` (float64)::
        ctrl[w, act_ids[d]] = lerp(motion[m, floor(f), d], motion[m, next, d], f - floor(f))

    where ``m = 0`` if M == 1 else ``w``. In mode ``"clamp"`` f is clamped to
    [0, T-1]; in ``"loop"`` it wraps modulo T (frame T-1 blends into frame 0).
    With ``frames_per_step == 1`` and integer offsets this is an exact copy.
    Non-finite positions (NaN offsets) read frame 0. The blend is computed in
    float64 and rounded once, identically on CPU and CUDA.

    Args:
        motion: float32 [M, T, D], contiguous; M == 1 (shared) or M == W.
        step: int64 step counter on the same device (never read on the host):
            [2] from :func:`new_step_counter` (``step[0]`` is the step), or a plain [1].
        ctrl: float32 [W, nu], written in place at columns ``act_ids`` only. Any
            strides (e.g. a row-strided view of MuJoCo Warp's ``Data.ctrl``), but
            no overlapping memory.
        act_ids: int32/int64 [D], distinct, each in [0, nu).
        offsets: float32/float64 [W] start frame per world (fractional, negative
            or past the end allowed); default 0.
        frames_per_step: recording frames per simulation step (= recording fps x
            timestep); finite.
        mode: ``"clamp"`` or ``"loop"``.
        advance: if > 0, ``step[0] += advance`` after every world has read the
            counter. With a counter from :func:`new_step_counter` this happens in
            the same launch (one kernel per step, one atomic per block: the last
            block to take a ticket from the counter's hidden word advances); with
            any other counter a second, one-thread kernel follows on the same
            stream. Either way nothing is shared between counters, so calls on
            different counters may overlap on any streams.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, or act_ids
            out of range/duplicated; ``ctrl`` and ``step`` are left untouched.
        ValueError: bad ``mode``, non-finite ``frames_per_step``, ``advance < 0``.

    act_ids values are checked on the CPU on every call (a scan, no copy), on
    CUDA by this wrapper once per tensor (and again after any in-place change to
    it) with one small host copy, never while a CUDA graph is being captured. Ids
    that escape the check (e.g. written through a Warp alias, or a direct
    ``torch.ops.flycuda`` call on CUDA) are skipped by the kernel, never written
    out of bounds.
    """
    check_frame_options("motion_to_ctrl", mode, frames_per_step, advance)
    if ctrl.dim() == 2:
        check_index("motion_to_ctrl", "act_ids", act_ids, ctrl.shape[1], "nu = ctrl.size(1)", unique=True, ref=ctrl)
    torch.ops.flycuda.motion_to_ctrl.default(motion, step, ctrl, act_ids, offsets,
                                             float(frames_per_step), mode, int(advance))


@torch.library.register_fake("flycuda::motion_to_ctrl")
def _motion_to_ctrl_fake(motion, step, ctrl, act_ids, offsets, frames_per_step, mode, advance):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.motion_to_ctrl: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} {tuple(ctrl.shape)}")
    torch._check(motion.dim() == 3 and motion.dtype == torch.float32,
                 lambda: f"flycuda.motion_to_ctrl: argument 'motion' must be float32 [M, T, D], got {motion.dtype} {tuple(motion.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == motion.shape[2],
                 lambda: f"flycuda.motion_to_ctrl: argument 'act_ids' must have shape [D] = [{motion.shape[2]}], got {tuple(act_ids.shape)}")
    check_same_device("motion_to_ctrl", "ctrl", ctrl, motion=motion, step=step,
                       act_ids=act_ids, offsets=offsets)
    check_counter("motion_to_ctrl", step)
    return None


def spline_to_ctrl(coeffs: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """:func:`motion_to_ctrl` with cubic instead of linear interpolation between frames:
    FlyGym's resampling (scipy ``interp1d(kind="cubic")``, a not-a-knot spline) done on
    the device at the simulation rate, from O(T x D) memory.

    For every world w and DOF d, with ``f = offsets[w] + step[0] * frames_per_step``
    mapped into [0, T) exactly as in :func:`motion_to_ctrl` (clamp or loop; NaN reads
    frame 0), ``i = floor(f)`` and ``a = f - i``::
        ctrl[w, act_ids[d]] = c0 + a * (c1 + a * (c2 + a * c3)),  (c0..c3) = coeffs[m, i, :, d]

    in float64, rounded once to float32; ``a == 0`` gives ``c0`` (the recorded frame)
    exactly. ``m = 0`` if M == 1 else ``w``. Piece T-1 is the loop's wrap piece (frame
    T-1 back to frame 0); in clamp mode it is read only at ``a == 0``.

    Args:
        coeffs: float64 [M, T, 4, D], contiguous: :func:`flycuda.spline_coeffs` of the
            recording(s) (``Motion.spline()``); M == 1 (shared) or M == W.
        step, ctrl, act_ids, offsets, frames_per_step, mode, advance: as in
            :func:`motion_to_ctrl` (same checks, same fused advance).

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, or act_ids out of
            range/duplicated; ``ctrl`` and ``step`` are left untouched.
        ValueError: bad ``mode``, non-finite ``frames_per_step``, ``advance < 0``.
    """
    check_frame_options("spline_to_ctrl", mode, frames_per_step, advance)
    if ctrl.dim() == 2:
        check_index("spline_to_ctrl", "act_ids", act_ids, ctrl.shape[1], "nu = ctrl.size(1)", unique=True, ref=ctrl)
    torch.ops.flycuda.spline_to_ctrl.default(coeffs, step, ctrl, act_ids, offsets,
                                             float(frames_per_step), mode, int(advance))


@torch.library.register_fake("flycuda::spline_to_ctrl")
def _spline_to_ctrl_fake(coeffs, step, ctrl, act_ids, offsets, frames_per_step, mode, advance):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.spline_to_ctrl: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} {tuple(ctrl.shape)}")
    torch._check(coeffs.dim() == 4 and coeffs.dtype == torch.float64 and coeffs.shape[2] == 4,
                 lambda: f"flycuda.spline_to_ctrl: argument 'coeffs' must be float64 [M, T, 4, D], got {coeffs.dtype} {tuple(coeffs.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == coeffs.shape[3],
                 lambda: f"flycuda.spline_to_ctrl: argument 'act_ids' must have shape [D] = [{coeffs.shape[3]}], got {tuple(act_ids.shape)}")
    check_same_device("spline_to_ctrl", "ctrl", ctrl, coeffs=coeffs, step=step, act_ids=act_ids, offsets=offsets)
    check_counter("spline_to_ctrl", step)
    return None
