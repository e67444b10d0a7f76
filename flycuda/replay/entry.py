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
import time

import torch

from .. import profile as profiling
from ..recording.observables import resolve as resolve_observables
from ..recording.sink import open_sink
from ..sim import streams
from ..sim.mjwarp import Sim
from ..sim.motion import motion_window
from ..vision.stage import VisionStage
from ..worlds import resolve
from .device_loop import Renders, ReplayLoop, capture, progress_bar, timed_loop, warm_up_and_split
from .results import SPLIT_STEPS, TRACKING_SKIP_SECONDS, ReplayResult, make_result, rmse_from_sums, tracking_rmse
from .settings import ReplayError, ReplaySettings

__all__ = ["replay", "ReplaySettings", "ReplayResult", "ReplayError", "tracking_rmse", "TRACKING_SKIP_SECONDS",
           "SPLIT_STEPS"]


def replay(settings: ReplaySettings | None = None, *, sim: Sim | None = None, renderer=None, frame_writer=None,
           act_ids: torch.Tensor | None = None, retina=None, **options) -> ReplayResult:
    """Replays ``settings.motion`` in MuJoCo Warp worlds of ``settings.model`` as ``settings`` say.

    Args:
        settings: a :class:`ReplaySettings` (every option, documented there); ``options``
            replace its fields by name (``replay(worlds=8, duration=0.1, motion=my_motion)``).
        sim: an existing :class:`flycuda.sim.Sim` (e.g. wrapping a FlyGym mjw pair) instead
            of building ``settings.model`` (which then only names its defaults); it must have
            ``settings.worlds`` worlds, if given.
        renderer: a TileRenderer or MjwRenderer (``render_mosaic() -> uint8 image``), drawn
            every ``settings.render_every`` steps and at the first and last state.
        frame_writer: a :class:`flycuda.render.FrameWriter` for the mosaics.
        act_ids: actuator per motion DOF (int [D]); default: FlyGym's order for NeuroMechFly's
            own clip, else matched by ``motion.dof_names`` (see :meth:`Sim.actuator_ids`).
        retina: the :class:`flycuda.vision.RetinaMap` for ``settings.vision`` (default FlyGym's).

    Returns:
        a :class:`ReplayResult` (its ``report()`` is what the CLI prints; its ``recording``
        reads the store lazily).
    """
    s = ReplaySettings.of(settings, **options)
    t_start = time.perf_counter()
    checked = s.check(renderer)  # every setting, before anything is built
    window = []  # (seconds, start frames): checked before the build wherever the motion is known

    def check_window(m, n):
        window.append(motion_window(m, n, s.duration, s.snippet, s.offsets))

    ws = resolve(s.model, s.worlds, device=s.device, motion=s.motion, sim=sim, act_ids=act_ids,
                 vision=checked.vision is not None, interp=s.interp, warmup=s.warmup, nconmax=s.nconmax, njmax=s.njmax,
                 check=check_window)
    sim, motion, target = ws.sim, ws.motion, checked.target
    (duration, offs), = window
    run = ReplayLoop.setup(sim, motion, offs, duration, s.mode, ws.interp, ws.act_ids)
    observables = resolve_observables(sim, checked.specs, dof_names=motion.dof_names, adrs=run.adrs,
                                      default_every=s.record_every)
    if checked.vision is not None:
        run.vision = VisionStage(sim, checked.vision, run.step, retina)
        if s.graph and run.on_cuda and run.vision.every % s.steps_per_graph:
            raise ReplayError(f"vision every {run.vision.every} steps ({run.vision.spec}) is not a multiple of "
                              f"steps_per_graph={s.steps_per_graph}: a graph launch would run across a sample; "
                              f"choose a rate of k x {s.steps_per_graph} steps or fewer steps per graph")
        observables.append(run.vision.observable())
    run.attach_recorder(observables, target is not None, s.chunk_bytes, s.steps_per_graph,
                        target.plan_worlds if target is not None else None)
    sink = None
    if target is not None:
        facts = dict(timestep=sim.timestep, worlds=target.worlds_total or sim.nworld, steps=run.steps, mode=s.mode,
                     interp=ws.interp, fps=motion.fps, settle_seconds=TRACKING_SKIP_SECONDS, length_unit=ws.unit,
                     **({"model": ws.model} if ws.model is not None else {}))
        sink = open_sink(target, run.recorder, facts, sim.nworld, run.dev)
    try:
        loop = _run_loop(run, renderer, frame_writer, s.render_every, s.progress, s.profile, s.graph,
                         s.steps_per_graph, s.keep_state, ws.warmup, t_start)
        run.recorder.finish()
        overflow = sim.overflowed()  # one read of the device: the store's facts and the result
        if sink is not None:
            tracker = run.recorder.tracker
            sink.close(ok=True, rmse_per_dof=rmse_from_sums(tracker.sq.cpu(), tracker.count).tolist(),
                       mjw_overflow={str((target.world_offset or 0) + w): why for w, why in overflow.items()})
    except BaseException as e:
        run.recorder.abort()
        if sink is not None:
            sink.close(ok=False, why=f"{type(e).__name__}: {e}")
        raise
    return make_result(run, *loop, sink=sink, overflow=overflow)


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
