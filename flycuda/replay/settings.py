"""The replay's settings stage: checks of what the user asked for, and each world's
start frame. Everything here runs before any world is built or any memory is taken."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from .. import ops
from ..errors import RecordingError, ReplayError
from ..recording.observables import CONNECTOME_KINDS, parse
from ..recording.reader import Target
from ..recording.recorder import CHUNK_BYTES
from ..recording.sink import target_of
from ..sim.motion import check_duration, check_motion_worlds, resolve_offsets
from ..vision.spec import VisionSpec, parse_vision

__all__ = ["ReplaySettings", "Checked", "ReplayError", "INTERPS", "check_settings", "observe_specs", "check_duration",
           "check_motion_worlds", "resolve_offsets"]

INTERPS = ("linear", "cubic")


@dataclass
class ReplaySettings:
    """What a replay does: every option of :func:`flycuda.replay.replay` and of ``flycuda
    replay`` (the CLI builds one of these), documented here once.

    Attributes:
        model: a name (``flycuda.worlds.NAMED_MODELS``: "hexapod", "neuromechfly",
            "neuromechfly-capsules", as the CLI's ``--model``), an MJCF path/string, a
            ``mujoco.MjModel``, or None for the built-in hexapod.
        motion: what the worlds replay: a name (``flycuda.worlds.NAMED_MOTIONS``: "tripod",
            "spotlight"), an ``.npz`` recording, a :class:`flycuda.sim.Motion`, or None (the
            model's own: FlyGym's Spotlight clip for NeuroMechFly, the tripod gait otherwise).
        worlds: number of worlds (> 0); None: 100 on CUDA, 4 on the CPU
            (:func:`flycuda.worlds.default_worlds`, as the CLI).
        duration: simulated seconds; default the snippet length, else the recording's.
        snippet: seconds per world; worlds start at evenly spread frames.
        offsets: start per world: seconds (a list of 1 or ``worlds`` floats) or a float64
            tensor of frames.
        mode: "clamp" (hold the last frame) or "loop".
        interp: "linear" (``motion_to_ctrl``) or "cubic" (``spline_to_ctrl``: the
            not-a-knot spline FlyGym resamples recordings with, from ``motion.angles64``
            when set); None: the model's (:func:`flycuda.worlds.resolve`: cubic for
            NeuroMechFly's own clip, else linear).
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
            array ``vision`` (:mod:`flycuda.vision.stage`); None: no vision. With it, observe
            ``connectome[:TYPES]`` or ``connectome_columns[:TYPES]`` records flyvis's network
            behind the eyes, stepped once per eye sample.
        connectome_checkpoint: a flyvis checkpoint for that network (None: the connectome's
            initial parameters).
        render_every: render every N steps with the renderer (0: never).
        profile: path of a torch.profiler Chrome/Perfetto trace to write.
        progress: show a progress bar.
        nconmax, njmax: MuJoCo Warp's contact and constraint capacities (None: its defaults).
        resume: a ``.zarr`` store of an interrupted or preempted run with these same settings:
            the run goes on from its latest snapshot (:mod:`flycuda.replay.snapshot`) into it,
            bit for bit as if it had never stopped (``record`` is then that store, or None).
        snapshots: with a ``.zarr`` path, write a snapshot beside the store with a chunk of joint
            angles (``STORE.resume/``, the latest two; removed when the run completes).
        snapshot_seconds: at most one snapshot per this many seconds of the run (the first
            chunk always takes one, and so does a preemption); 0: one with every chunk.
        preemptible: SIGTERM and SIGINT end the run after the launch in flight: the store
            flushed, a snapshot taken, the store marked ``preempted at step N``, then
            :class:`flycuda.sim.preempt.Preempted` raised (exit status 143 / 130 on the CLI).
    """

    model: object = None
    worlds: int | None = None
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
    connectome_checkpoint: str | None = None
    motion: object = None  # the fields before it keep their positions
    resume: str | None = None
    snapshots: bool = True
    preemptible: bool = True
    snapshot_seconds: float = 60.0

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

    def check(self, renderer=None) -> Checked:
        """Every check of the settings alone, before anything is built: one line naming the
        first bad setting (ReplayError); None means the model's default (resolved by
        :func:`flycuda.worlds.resolve`). Returns what the checks parsed."""
        check_settings(self.worlds, self.steps_per_graph, self.record_every, self.render_every, renderer, self.mode,
                       self.interp or "linear", 0.0 if self.warmup is None else self.warmup, snippet=self.snippet,
                       offsets=self.offsets)
        specs = observe_specs(self.observe)
        network = [x for x in specs if x.kind in CONNECTOME_KINDS]
        if network and self.vision is None:
            raise ReplayError(f"observe {network[0]} is flyvis's network behind the eyes: add vision= (--vision)")
        if len(network) > 1:
            raise ReplayError(f"observe one of {', '.join(CONNECTOME_KINDS)}, got {' and '.join(map(str, network))}")
        if self.connectome_checkpoint is not None and not network:
            raise ReplayError("connectome_checkpoint is the network's: observe connectome[:TYPES] too")
        target = check_resume(self, renderer) if self.resume is not None else target_of(self.record, self.overwrite)
        checked = Checked([x for x in specs if x.kind not in CONNECTOME_KINDS],
                          parse_vision(self.vision) if self.vision is not None else None,
                          target, network[0] if network else None)
        if self.duration is not None:
            check_duration(None, self.duration, None)
        return checked


@dataclass(frozen=True)
class Checked:
    """What :meth:`ReplaySettings.check` parsed: the observables ("angles" first), the vision
    spec (or None), where the recording goes (a checked Target, or None) and the network's
    observable (or None)."""

    specs: list
    vision: VisionSpec | None
    target: Target | None
    connectome: object = None  # the network's observable (a Spec of CONNECTOME_KINDS), recorded with the eyes


def check_resume(s: ReplaySettings, renderer=None) -> Target:
    """The store ``s.resume`` as the run's target, once it is one that can be resumed: a
    flycuda ``.zarr`` store whose run did not complete and is not running; the same as
    ``record``, if that is given; no live video (render afterwards from the store)."""
    from ..recording.runs import resumable  # noqa: PLC0415  (zarr: only stores need it)

    path = s.resume
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).rstrip("/").endswith(".zarr"):
        raise ReplayError(f"resume must be the path of a .zarr store, got {path!r}")
    path = os.fspath(path)
    record = s.record.store if isinstance(s.record, Target) else s.record
    if record is not None and (not isinstance(record, (str, os.PathLike))
                               or os.path.abspath(os.fspath(record)) != os.path.abspath(path)):
        raise ReplayError(f"resume writes into the store it resumes ({path}); record={s.record!r} names another")
    if renderer is not None or s.render_every:
        raise ReplayError("resume cannot continue a live video: render it afterwards from the store (flycuda render)")
    try:
        resumable(path)
    except RecordingError as e:
        raise ReplayError(str(e)) from None
    return Target(store=path, create=False)


def observe_specs(observe) -> list:
    """The parsed observables, "angles" first (added when missing)."""
    if isinstance(observe, str):
        observe = (observe,)
    specs = [parse(o) if isinstance(o, str) else o for o in observe]
    if not any(s.kind == "angles" for s in specs):
        specs.insert(0, parse("angles"))
    return sorted(specs, key=lambda s: s.kind != "angles")


def check_settings(worlds, steps_per_graph, record_every, render_every, renderer, mode, interp, warmup, *,
                   snippet=None, offsets=None) -> None:
    """One line naming the first bad setting (ReplayError) of those checked alone (the
    duration, observables, vision and store are checked by :meth:`ReplaySettings.check`)."""
    if worlds is not None and (isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0):
        raise ReplayError(f"worlds must be a positive integer, got {worlds!r}")
    if snippet is not None and offsets is not None:
        raise ReplayError("give snippet or offsets, not both")
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
