"""The replay's settings stage: checks of what the user asked for, and each world's
start frame. Everything here runs before any world is built or any memory is taken."""

from __future__ import annotations

import math

import torch

from . import ops
from .motion import Motion, MotionError, offsets_from_seconds, snippet_offsets

__all__ = ["ReplayError", "INTERPS", "check_settings", "check_duration", "check_motion_worlds",
           "resolve_offsets"]

INTERPS = ("linear", "cubic")


class ReplayError(ValueError):
    """Bad replay settings (worlds, duration, offsets, ...)."""


def check_settings(worlds, steps_per_graph, record_every, render_every, renderer, mode, interp, warmup) -> None:
    """One line naming the first bad setting (ReplayError)."""
    if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0:
        raise ReplayError(f"worlds must be a positive integer, got {worlds!r}")
    for name, v in (("steps_per_graph", steps_per_graph), ("record_every", record_every)):
        if not isinstance(v, int) or v < 1:
            raise ReplayError(f"{name} must be an integer >= 1, got {v!r}")
    if not isinstance(render_every, int) or render_every < 0:
        raise ReplayError(f"render_every must be an integer >= 0, got {render_every!r}")
    if render_every and renderer is None:
        raise ReplayError("render_every > 0 needs a renderer")
    if mode not in ops.MODES:
        raise ReplayError(f"mode must be 'clamp' or 'loop', got {mode!r}")
    if interp not in INTERPS:
        raise ReplayError(f"interp must be 'linear' or 'cubic', got {interp!r}")
    if isinstance(warmup, bool) or not (isinstance(warmup, (int, float)) and math.isfinite(warmup) and warmup >= 0):
        raise ReplayError(f"warmup must be >= 0 seconds, got {warmup!r}")


def check_duration(motion: Motion, duration, snippet) -> float:
    """The simulated seconds: ``duration``, else the snippet length, else the recording's."""
    if duration is None:
        duration = snippet if snippet is not None else motion.duration
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise ReplayError(f"duration must be > 0 seconds, got {duration!r}")
    return duration


def check_motion_worlds(motion: Motion, worlds: int) -> None:
    """A per-world motion buffer must have one recording per world."""
    if motion.angles.dim() == 3 and motion.angles.shape[0] not in (1, worlds):
        raise MotionError(f"a per-world motion buffer must have {worlds} (= worlds) recordings, "
                          f"got {motion.angles.shape[0]}")


def resolve_offsets(motion: Motion, worlds: int, snippet=None, offsets=None) -> torch.Tensor:
    """float64 [worlds] start frame of each world: from ``offsets`` (seconds: one or one per
    world; or a float64 tensor of frames), from evenly spread ``snippet`` starts, or 0."""
    if offsets is not None and snippet is not None:
        raise ReplayError("give snippet or offsets, not both")
    if offsets is not None:
        if isinstance(offsets, torch.Tensor):
            if offsets.shape != (worlds,):
                raise ReplayError(f"offsets must have shape [{worlds}] (frames), got {tuple(offsets.shape)}")
            return offsets.to(torch.float64)
        return offsets_from_seconds(motion, list(offsets), worlds)
    if snippet is not None:
        return snippet_offsets(motion, worlds, snippet)
    return torch.zeros(worlds, dtype=torch.float64)
