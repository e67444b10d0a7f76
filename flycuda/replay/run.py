"""The main job: replay recorded fly motion in N MuJoCo Warp worlds with flycuda's ops.

One simulation step is ``[motion_to_ctrl(advance=1), mjw.step, record_chunk...]``:
* ``motion_to_ctrl`` samples each world's targets from the recording at the
  device-side counter s (frame ``offsets[w] + s * fps * timestep``), writes them
  into ``ctrl`` (a zero-copy view of ``Data.ctrl``) and advances the counter to
  s + 1, all in one launch (``interp="cubic"``: ``spline_to_ctrl``, FlyGym's
  cubic resampling evaluated on the device);
* ``mjw.step`` advances the physics to time ``(s + 1) * timestep``;
* ``record_chunk`` records every observable of that state (the driven joint
  angles and whatever else was asked for, each at its own rate) into its ring
  of device chunks (:mod:`flycuda.recording.recorder`), which stream out to a zarr store
  while the next steps run; the tracking error is accumulated on the device.

On CUDA the step (or K steps) is captured once into a CUDA graph on the stream
torch and Warp share and replayed; on the CPU it runs eagerly on Warp's CPU
device. The first step (Warp's JIT/module load) is timed apart, and a few eager
steps with synchronization measure the split physics / flycuda ops / render.
"""

from __future__ import annotations

import contextlib
import os
import time

import torch

from .. import profile as profiling
from ..recording.observables import parse, resolve
from ..sim import streams
from ..sim.mjwarp import Sim
from ..sim.motion import Motion, tripod_gait
from ..sim.worlds import NAMED_MODELS, build_worlds, own_motion, replay_defaults
from .loop import Renders, Run, capture, progress_bar, timed_loop, warm_up_and_split
from .results import SETTLE_SECONDS, SPLIT_STEPS, ReplayResult, make_result, tracking_rmse
from .settings import ReplayError, ReplaySettings, check_duration, check_motion_worlds, resolve_offsets
from .storage import close_store, open_store, target_of
from .vision_stage import VisionStage, parse_vision

__all__ = ["replay", "ReplaySettings", "ReplayResult", "ReplayError", "tracking_rmse", "SETTLE_SECONDS", "SPLIT_STEPS"]


def replay(settings: ReplaySettings | None = None, *, motion: Motion | None = None, sim: Sim | None = None,
           renderer=None, frame_writer=None, act_ids: torch.Tensor | None = None, retina=None,
           **options) -> ReplayResult:
    """Replays ``motion`` in MuJoCo Warp worlds as ``settings`` say.

    Args:
        settings: a :class:`ReplaySettings` (every option, documented there); ``options``
            replace its fields by name (``replay(worlds=8, duration=0.1)``).
        motion: a :class:`flycuda.sim.Motion`; None for the built-in tripod gait (2 s at 330 Hz).
        sim: an existing :class:`flycuda.sim.Sim` (e.g. wrapping a FlyGym mjw pair) instead
            of building ``settings.model``; it must have ``settings.worlds`` worlds.
        renderer: a TileRenderer or MjwRenderer (``render_mosaic() -> uint8 image``), drawn
            every ``settings.render_every`` steps and at the first and last state.
        frame_writer: a :class:`flycuda.render.FrameWriter` for the mosaics.
        act_ids: actuator per motion DOF (int [D]); default: matched by
            ``motion.dof_names`` (see :meth:`Sim.actuator_ids`).
        retina: the :class:`flycuda.vision.RetinaMap` for ``settings.vision`` (default FlyGym's).

    Returns:
        a :class:`ReplayResult` (its ``report()`` is what the CLI prints; its ``recording``
        reads the store lazily).
    """
    s = ReplaySettings.of(settings, **options)
    model, worlds, duration, snippet, offsets = s.model, s.worlds, s.duration, s.snippet, s.offsets
    mode, device, graph, steps_per_graph, interp = s.mode, s.device, s.graph, s.steps_per_graph, s.interp
    render_every, profile, progress, keep_state, warmup = s.render_every, s.profile, s.progress, s.keep_state, s.warmup
    vision = s.vision
    t_start = time.perf_counter()
    s.check(renderer)  # every setting, before anything is built
    named = isinstance(model, str) and model in NAMED_MODELS  # the CLI's table: one for both
    own = motion is None
    if sim is None and named:  # FlyGym's fly brings its own clip: built first
        ws = build_worlds(model, worlds, device, vision=vision is not None)
        sim, act_ids = ws.sim, act_ids if act_ids is not None or not own else ws.act_ids
        motion = motion if motion is not None else own_motion(ws)
    interp_default, warmup_default = replay_defaults(model if named else None, own)
    interp = interp if interp is not None else interp_default
    warmup = warmup if warmup is not None else warmup_default
    motion = motion if motion is not None else tripod_gait()
    duration = check_duration(motion, duration, snippet)
    offs = resolve_offsets(motion, worlds, snippet, offsets)
    check_motion_worlds(motion, worlds)
    specs = _observe_specs(s.observe)
    if vision is not None:  # a bad spec fails before anything is built
        vision = parse_vision(vision)
    target = target_of(s.record, s.overwrite)
    if sim is None:
        sim = Sim.build(model, worlds, device=device, nconmax=s.nconmax, njmax=s.njmax)
        if target is not None and (model is None or isinstance(model, (str, os.PathLike))):
            name = "hexapod" if model is None else os.fspath(model)
            if not name.lstrip().startswith("<"):  # a path or the built-in model: renderable afterwards
                target.attrs.setdefault("model", name)
    elif sim.nworld != worlds:
        raise ReplayError(f"sim has {sim.nworld} worlds but worlds={worlds}")
    if named and target is not None:
        target.attrs.setdefault("model", model)  # renderable afterwards by name

    run = Run.setup(sim, motion, offs, duration, mode, interp, act_ids)
    observables = resolve(sim, specs, dof_names=motion.dof_names, adrs=run.adrs, default_every=s.record_every)
    if vision is not None:
        run.vision = VisionStage(sim, vision, run.step, retina)
        if graph and run.on_cuda and run.vision.every % steps_per_graph:
            raise ReplayError(f"vision every {run.vision.every} steps ({run.vision.spec}) is not a multiple of "
                              f"steps_per_graph={steps_per_graph}: a graph launch would run across a sample; "
                              f"choose a rate of k x {steps_per_graph} steps or fewer steps per graph")
        observables.append(run.vision.observable())
    run.attach_recorder(observables, target is not None, s.chunk_bytes, steps_per_graph,
                        target.plan_worlds if target is not None else None)
    group, writer = open_store(target, run, mode, interp)
    try:
        loop = _run_loop(run, renderer, frame_writer, render_every, progress, profile, graph, steps_per_graph,
                         keep_state, warmup, t_start)
        run.recorder.finish()
        overflow = sim.overflowed()  # one read of the device: the store's facts and the result
        close_store(group, writer, target, ok=True, rmse=run.recorder.tracker.sq, count=run.recorder.tracker.count,
                    overflow=overflow)
    except BaseException as e:
        run.recorder.abort()
        close_store(group, writer, target, ok=False, why=f"{type(e).__name__}: {e}")
        raise
    return make_result(run, *loop, recording=group, writer=writer, overflow=overflow)


def _run_loop(run, renderer, frame_writer, render_every, progress, profile, graph, steps_per_graph, keep_state,
              warmup, t_start):
    """Initial state, warm-up and split steps, capture, the timed loop; returns what
    make_result needs about them."""
    sim = run.sim
    with streams.shared_stream(run.dev):  # torch's ops and Warp's steps in one stream order
        run.initial_state(keep_state, int(round(warmup / sim.timestep)))
    renders = Renders(run, renderer, frame_writer, render_every)
    renders.first()
    bar = progress_bar(progress, run.steps, sim.nworld)
    prof_ctx = profiling.Profiler(profile, cuda=run.on_cuda) if profile else contextlib.nullcontext(None)
    # launches of K steps: captured graphs on CUDA (unless graph=False), K plain steps on the CPU
    launches = graph or not run.on_cuda
    schedule = run.schedule(renders, steps_per_graph if launches else None)
    with prof_ctx as prof, streams.shared_stream(run.dev):
        jit_seconds, split, split_wall = warm_up_and_split(run, renders, t_start, schedule)
        if bar:
            bar.update(run.done)
        cuda_graph = capture(run, graph and run.on_cuda, steps_per_graph)
        if run.on_cuda and cuda_graph is None:
            schedule = run.schedule(renders, None)
        loop_wall = timed_loop(run, renders, cuda_graph, schedule, prof, bar)
        renders.last()
    if bar:
        bar.close()
    return (renders, cuda_graph, steps_per_graph, split, split_wall + loop_wall, jit_seconds,
            prof.summary() if prof is not None else "")


def _observe_specs(observe) -> list:
    """The parsed observables, "angles" first (added when missing)."""
    if isinstance(observe, str):
        observe = (observe,)
    specs = [parse(o) if isinstance(o, str) else o for o in observe]
    if not any(s.kind == "angles" for s in specs):
        specs.insert(0, parse("angles"))
    return sorted(specs, key=lambda s: s.kind != "angles")
