"""The replay's settings stage: checks of what the user asked for, and each world's
start frame. Everything here runs before any world is built or any memory is taken."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .. import ops
from ..errors import ReplayError
from ..recording.recorder import CHUNK_BYTES
from ..sim.motion import Motion, MotionError, offsets_from_seconds, snippet_offsets

__all__ = ["ReplaySettings", "ReplayError", "INTERPS", "check_settings", "check_duration", "check_motion_worlds",
           "resolve_offsets"]

INTERPS = ("linear", "cubic")


@dataclass
class ReplaySettings:
    """What a replay does: every option of :func:`flycuda.replay.replay` and of ``flycuda
    replay`` (the CLI builds one of these), documented here once.

    Attributes:
        model: a name (``flycuda.sim.NAMED_MODELS``: "hexapod", "neuromechfly",
            "neuromechfly-capsules", as the CLI's ``--model``), an MJCF path/string, a
            ``mujoco.MjModel``, or None for the built-in hexapod.
        worlds: number of worlds (> 0).
        duration: simulated seconds; default the snippet length, else the recording's.
        snippet: seconds per world; worlds start at evenly spread frames.
        offsets: start per world: seconds (a list of 1 or ``worlds`` floats) or a float64
            tensor of frames.
        mode: "clamp" (hold the last frame) or "loop".
        interp: "linear" (``motion_to_ctrl``) or "cubic" (``spline_to_ctrl``: the
            not-a-knot spline FlyGym resamples recordings with, from ``motion.angles64``
            when set); None: the model's (:func:`flycuda.sim.worlds.replay_defaults`:
            cubic for NeuroMechFly's own clip, else linear).
        device: "cuda", "cpu" or None (CUDA when available).
        graph: capture the step in a CUDA graph (CUDA only; ignored on the CPU).
        steps_per_graph: K steps per graph launch.
        keep_state: start from the worlds' current state (e.g. after FlyGym's warm-up)
            instead of putting the driven joints at their first targets.
        warmup: seconds simulated before the replay with the controls held at the first
            targets (as FlyGym's ``sim.warmup()``); not timed, not recorded; None: the
            model's (0.05 s for NeuroMechFly, as FlyGym settles it; else none).
        observe: what to record (:mod:`flycuda.recording.observables`), e.g. ``("angles",
            "qpos@30hz", "body_pos:c_thorax")``; "angles" (the driven joints, which the
            tracking error needs) is always recorded.
        record_every: default sampling interval (steps) of the observables.
        record: where the recording goes: None (nowhere: only the tracking error is kept),
            a path (``out.zarr``), a zarr store, "memory" (small runs), or a
            :class:`flycuda.recording.Target`. Its device memory does not grow with the
            duration (:mod:`flycuda.recording.recorder`).
        overwrite: replace an existing store at ``record``.
        chunk_bytes: about this many bytes per recorded chunk (device and host).
        vision: record every world's ommatidia readouts (a fly with eye cameras):
            ``"exact"``, ``"fast:K"``, with ``@STEPS`` or ``@HZhz`` (default 500 Hz), as the
            array ``vision`` (:mod:`flycuda.replay.vision_stage`); None: no vision.
        render_every: render every N steps with the renderer (0: never).
        profile: path of a torch.profiler Chrome/Perfetto trace to write.
        progress: show a progress bar.
        nconmax, njmax: MuJoCo Warp's contact and constraint capacities (None: its defaults).
    """

    model: object = None
    worlds: int = 2
    duration: float | None = None
    snippet: float | None = None
    offsets: object = None
    mode: str = "clamp"
    interp: str | None = None
    device: str | None = None
    graph: bool = True
    steps_per_graph: int = 1
    keep_state: bool = False
    warmup: float | None = None
    observe: object = ("angles",)
    record_every: int = 1
    record: object = None
    overwrite: bool = False
    chunk_bytes: int = CHUNK_BYTES
    vision: object = None
    render_every: int = 0
    profile: str | None = None
    progress: bool = True
    nconmax: int | None = None
    njmax: int | None = None

    @classmethod
    def of(cls, settings: "ReplaySettings | None" = None, **options) -> "ReplaySettings":
        """``settings`` (default: the defaults) with ``options`` replaced; an unknown
        option is one line naming the valid ones."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ReplayError(f"unknown replay option(s) {', '.join(unknown)}; the options are: {', '.join(names)}")
        if settings is not None and not isinstance(settings, cls):
            raise ReplayError(f"settings must be a ReplaySettings, got {type(settings).__name__}")
        return dataclasses.replace(settings or cls(), **options)

    def check(self, renderer=None) -> None:
        """One line naming the first bad setting (ReplayError); None means the model's
        default (resolved by :func:`flycuda.replay.replay`)."""
        check_settings(self.worlds, self.steps_per_graph, self.record_every, self.render_every, renderer, self.mode,
                       self.interp or "linear", 0.0 if self.warmup is None else self.warmup)


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
