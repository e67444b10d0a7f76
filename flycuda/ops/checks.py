"""Checks shared by the fake kernels of several ops (torch._check: traceable)."""

from __future__ import annotations

import math

import torch

from ..errors import FlycudaError

__all__ = ["MODES", "check_same_device", "check_counter", "check_option", "check_frame_options"]

MODES = ("clamp", "loop")  # how a frame position outside the recording maps back into it
"""The frame modes (``mode=``): "clamp" holds [0, T-1], "loop" wraps modulo T."""


def check_same_device(op: str, ref_name: str, ref: torch.Tensor, **others) -> None:
    """Every tensor in ``others`` is on ``ref``'s device."""
    for name, t in others.items():
        if t is not None:
            torch._check(t.device == ref.device,
                         lambda: f"flycuda.{op}: argument '{name}' must be on {ref.device} "
                                 f"(the device of '{ref_name}'), got {t.device}")


def check_counter(op: str, step: torch.Tensor) -> None:
    """``step`` is an int64 [1] or [2] step counter."""
    torch._check(step.dtype == torch.int64 and step.dim() == 1 and step.shape[0] in (1, 2),
                 lambda: f"flycuda.{op}: argument 'step' must be an int64 step counter of shape [1] or "
                         f"[2], got {step.dtype} {tuple(step.shape)}")


def check_option(op: str, name: str, ok: bool, expected: str, got) -> None:
    """A scalar option, checked here so that a bad one is a ValueError (FlycudaError) on
    every torch: the op checks it too, but the type of an error thrown through PyTorch's
    stable ABI depends on the torch version (2.15 makes every one a RuntimeError)."""
    if not ok:
        raise FlycudaError(f"flycuda.{op}: argument '{name}' must be {expected}, got {got}")


def check_frame_options(op: str, mode: str, frames_per_step: float, advance: int = 0) -> None:
    """The scalar options of the ops that read a recording at a step (motion_to_ctrl,
    spline_to_ctrl, motion_at): ``mode`` one of MODES, a finite ``frames_per_step``,
    ``advance >= 0``."""
    check_option(op, "mode", mode in MODES, "'clamp' or 'loop'", repr(mode))
    check_option(op, "frames_per_step", math.isfinite(frames_per_step), "finite", frames_per_step)
    check_option(op, "advance", advance >= 0, ">= 0", advance)
