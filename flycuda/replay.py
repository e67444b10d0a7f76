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
  of device chunks (:mod:`flycuda.recorder`), which stream out to a zarr store
  while the next steps run; the tracking error is accumulated on the device.

On CUDA the step (or K steps) is captured once into a CUDA graph on the stream
torch and Warp share and replayed; on the CPU it runs eagerly on Warp's CPU
device. The first step (Warp's JIT/module load) is timed apart, and a few eager
steps with synchronization measure the split physics / flycuda ops / render.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field

import torch

from . import ops, streams
from . import profile as profiling
from . import store as zstore
from .bridge import Sim
from .motion import Motion, tripod_gait
from .observables import Observable, parse, resolve
from .recorder import CHUNK_BYTES, Recorder
from .recording import Target
from .results import SETTLE_SECONDS, SPLIT_STEPS, ReplayResult, make_result, rmse_from_sums, tracking_rmse
from .settings import (ReplayError, check_duration, check_motion_worlds, check_settings, resolve_offsets)

__all__ = ["replay", "ReplayResult", "ReplayError", "tracking_rmse", "SETTLE_SECONDS", "SPLIT_STEPS"]


def _sync(sim: Sim) -> None:
    if sim.device.type == "cuda":
        import warp as wp

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize(sim.device)


def replay(model=None, motion: Motion | None = None, *, worlds: int = 2, duration: float | None = None,
           snippet: float | None = None, offsets=None, mode: str = "clamp", device=None,
           graph: bool = True, steps_per_graph: int = 1, record_every: int = 1,
           render_every: int = 0, renderer=None, frame_writer=None, profile: str | None = None,
           progress: bool = True, sim: Sim | None = None, nconmax: int | None = None,
           njmax: int | None = None, interp: str = "linear", act_ids: torch.Tensor | None = None,
           keep_state: bool = False, warmup: float = 0.0, observe=("angles",), record=None,
           overwrite: bool = False, chunk_bytes: int = CHUNK_BYTES, vision=None, retina=None) -> ReplayResult:
    """Replays ``motion`` in ``worlds`` MuJoCo Warp worlds of ``model``.

    Args:
        model: MJCF path/string, ``mujoco.MjModel`` or None for the built-in hexapod.
        motion: a :class:`Motion`; None for the built-in tripod gait (2 s at 330 Hz).
        worlds: number of worlds (> 0).
        duration: simulated seconds; default the snippet length, else the recording.
        snippet: seconds per world; worlds start at evenly spread frames.
        offsets: start per world: seconds (list of 1 or ``worlds`` floats) or a
            float64 tensor of frames.
        mode: "clamp" (hold the last frame) or "loop".
        device: "cuda", "cpu" or None (CUDA when available).
        graph: capture the step in a CUDA graph (CUDA only; ignored on CPU).
        steps_per_graph: K steps per graph launch.
        record_every: default sampling interval (steps) of the observables.
        render_every: render every N steps with ``renderer`` (0: never).
        renderer: a TileRenderer or MjwRenderer (``render_mosaic() -> uint8 image``).
        frame_writer: a :class:`flycuda.render.FrameWriter` for the mosaics.
        profile: path of a torch.profiler Chrome/Perfetto trace to write.
        progress: show a tqdm progress bar.
        sim: an existing :class:`Sim` (e.g. wrapping a FlyGym mjw pair) instead of model.
        interp: "linear" (motion_to_ctrl) or "cubic" (spline_to_ctrl: the not-a-knot
            spline FlyGym resamples recordings with, from ``motion.angles64`` if set).
        act_ids: actuator per motion DOF (int [D]); default: matched by
            ``motion.dof_names`` (see :meth:`Sim.actuator_ids`).
        keep_state: start from the worlds' current state (e.g. after FlyGym's
            warm-up) instead of putting the driven joints at their first targets.
        warmup: seconds simulated before the replay with the controls held at the
            first targets (as FlyGym's ``sim.warmup()``, which lets the fly settle on
            the ground); not timed, not recorded.
        observe: what to record (:mod:`flycuda.observables`), e.g. ``("angles",
            "qpos@30hz", "body_pos:c_thorax")``; "angles" (the driven joints, which the
            tracking error needs) is always recorded.
        record: where the recording goes: None (nowhere: only the tracking error is
            kept), a path (``out.zarr``), a zarr store, "memory" (small runs), or a
            :class:`flycuda.recording.Target`. The device memory it takes does not
            grow with the duration (:mod:`flycuda.recorder`).
        overwrite: replace an existing store at ``record``.
        chunk_bytes: about this many bytes per recorded chunk (device and host).
        vision: record every world's ommatidia readouts (a fly with eye cameras):
            ``"exact"``, ``"fast:K"``, with ``@STEPS`` or ``@HZhz`` (default 500 Hz), as
            the array ``vision`` (:mod:`flycuda.vision_stage`); None: no vision.
        retina: the :class:`flycuda.retina.RetinaMap` for ``vision`` (default FlyGym's).

    Returns:
        a :class:`ReplayResult` (its ``report()`` is what the CLI prints; its
        ``recording`` reads the store lazily).
    """
    t_start = time.perf_counter()
    check_settings(worlds, steps_per_graph, record_every, render_every, renderer, mode, interp, warmup)
    motion = motion if motion is not None else tripod_gait()
    duration = check_duration(motion, duration, snippet)
    offs = resolve_offsets(motion, worlds, snippet, offsets)
    check_motion_worlds(motion, worlds)
    specs = _observe_specs(observe)
    if vision is not None:  # a bad spec fails before anything is built
        from .vision_stage import parse_vision

        vision = parse_vision(vision)
    target = _target(record, overwrite)
    if sim is None:
        sim = Sim.build(model, worlds, device=device, nconmax=nconmax, njmax=njmax)
        if target is not None and (model is None or isinstance(model, (str, os.PathLike))):
            name = "hexapod" if model is None else os.fspath(model)
            if not name.lstrip().startswith("<"):  # a path or the built-in model: renderable afterwards
                target.attrs.setdefault("model", name)
    elif sim.nworld != worlds:
        raise ReplayError(f"sim has {sim.nworld} worlds but worlds={worlds}")

    run = _Run.setup(sim, motion, offs, duration, mode, interp, act_ids)
    observables = resolve(sim, specs, dof_names=motion.dof_names, adrs=run.adrs, default_every=record_every)
    if vision is not None:
        from .vision_stage import VisionStage

        run.vision = VisionStage(sim, vision, run.step, retina)
        if graph and run.on_cuda and run.vision.every % steps_per_graph:
            raise ReplayError(f"vision every {run.vision.every} steps ({run.vision.spec}) is not a multiple of "
                              f"steps_per_graph={steps_per_graph}: a graph launch would run across a sample; "
                              f"choose a rate of k x {steps_per_graph} steps or fewer steps per graph")
        observables.append(run.vision.observable())
    run.attach_recorder(observables, target is not None, chunk_bytes, steps_per_graph,
                        target.plan_worlds if target is not None else None)
    group, writer = _open_store(target, run, mode, interp)
    try:
        loop = _run_loop(run, renderer, frame_writer, render_every, progress, profile, graph, steps_per_graph,
                         keep_state, warmup, t_start)
        run.recorder.finish()
        _close_store(group, writer, target, ok=True, rmse=run.recorder.tracker.sq, count=run.recorder.tracker.count)
    except BaseException as e:
        run.recorder.abort()
        _close_store(group, writer, target, ok=False, why=f"{type(e).__name__}: {e}")
        raise
    return make_result(run, *loop, recording=group, writer=writer)


def _run_loop(run, renderer, frame_writer, render_every, progress, profile, graph, steps_per_graph, keep_state,
              warmup, t_start):
    """Initial state, warm-up and split steps, capture, the timed loop; returns what
    make_result needs about them."""
    sim = run.sim
    with streams.shared_stream(run.dev):  # torch's ops and Warp's steps in one stream order
        run.initial_state(keep_state, int(round(warmup / sim.timestep)))
    renders = _Renders(run, renderer, frame_writer, render_every)
    renders.first()
    bar = _progress_bar(progress, run.steps, sim.nworld)
    prof_ctx = profiling.Profiler(profile, cuda=run.on_cuda) if profile else contextlib.nullcontext(None)
    with prof_ctx as prof, streams.shared_stream(run.dev):
        jit_seconds, split, split_wall = _warm_up_and_split(run, renders, t_start)
        if bar:
            bar.update(run.done)
        cuda_graph = _capture(run, graph and run.on_cuda, steps_per_graph)
        loop_wall = _timed_loop(run, renders, cuda_graph, steps_per_graph, prof, bar)
        renders.last()
    if bar:
        bar.close()
    return (renders, cuda_graph, steps_per_graph, split, split_wall + loop_wall, jit_seconds,
            prof.summary() if prof is not None else "")


# --- set-up ------------------------------------------------------------------------

def _observe_specs(observe) -> list:
    """The parsed observables, "angles" first (added when missing)."""
    if isinstance(observe, str):
        observe = (observe,)
    specs = [parse(o) if isinstance(o, str) else o for o in observe]
    if not any(s.kind == "angles" for s in specs):
        specs.insert(0, parse("angles"))
    return sorted(specs, key=lambda s: s.kind != "angles")


def _target(record, overwrite: bool) -> Target | None:
    """Where the recording goes (None: nowhere); a path is checked now, before any build."""
    if record is None or isinstance(record, Target):
        target = record
    else:
        target = Target(store=record, overwrite=overwrite)
    if target is not None and target.group is None and target.create \
            and isinstance(target.store, (str, os.PathLike)) and target.store != "memory":
        zstore.check_path(os.fspath(target.store), target.overwrite)
    return target


def _open_store(target: Target | None, run: "_Run", mode: str, interp: str):
    """The store's group (created here unless the target brings one) and its writer."""
    if target is None:
        return None, None
    rec, sim = run.recorder, run.sim
    group = target.group
    if group is None and target.create:
        W = target.worlds_total or sim.nworld
        wc = target.world_chunk or W
        arrays = [zstore.ArraySpec(st.obs.name, W, st.rows, st.obs.column_names, st.obs.every, wc, st.C,
                                   st.obs.spec, st.obs.attrs) for st in rec.streams]
        ang = rec.stream("angles")
        arrays.insert(1, zstore.ArraySpec("targets", W, ang.rows, ang.obs.column_names, ang.obs.every, wc, ang.C))
        facts = dict(timestep=sim.timestep, worlds=W, steps=run.steps, mode=mode, interp=interp,
                     fps=run.motion.fps, settle_seconds=SETTLE_SECONDS, **target.attrs)
        group = zstore.create(target.zarr_store(), arrays, facts, overwrite=target.overwrite)
    if target.sync is not None:
        target.sync()  # torchrun: the store exists for every rank past this point
    if group is None:
        group = zstore.open_store(target.zarr_store(), "r+")
    writer = zstore.Writer(group)
    rec.attach(writer, target.world_offset)
    return group, writer


def _close_store(group, writer, target, ok: bool, why: str = "", rmse=None, count: int = 0) -> None:
    """Drains the writer and marks the store: complete (with the tracking RMSE per DOF),
    or incomplete with the reason."""
    if writer is None:
        return
    if ok:
        writer.close()
        if target.finalize:
            zstore.mark(group, complete=True, status="complete", rows_written=writer.rows,
                        rmse_per_dof=rmse_from_sums(rmse.cpu(), count).tolist())
        return
    writer.close(raise_error=False)
    zstore.mark(group, complete=False, status=f"incomplete: {why}"[:500], rows_written=writer.rows)


@dataclass
class _Run:
    """The worlds, their zero-copy views and the device buffers of one replay."""

    sim: Sim
    motion: Motion
    offs: torch.Tensor         # float64 [W] start frames (host)
    mode: str
    steps: int
    interp: str                # "linear" or "cubic"
    act_ids: torch.Tensor      # [D] actuator per DOF
    adrs: torch.Tensor         # [D] qpos address per DOF
    buf: torch.Tensor          # the recording on the device: [M, T, D] or cubic pieces [M, T, 4, D]
    offs_dev: torch.Tensor
    fps_step: float            # recording frames per simulation step
    step: torch.Tensor         # the device step counter
    recorder: Recorder | None = None
    vision: object = None      # a flycuda.vision_stage.VisionStage, or None
    done: int = 0              # steps run so far
    split: dict = field(default_factory=lambda: {"physics": 0.0, "flycuda ops": 0.0})

    @classmethod
    def setup(cls, sim: Sim, motion: Motion, offs, duration: float, mode: str, interp: str = "linear",
              act_ids: torch.Tensor | None = None) -> "_Run":
        dev = sim.device
        if act_ids is None:
            act_ids = sim.actuator_ids(motion.dof_names)
        act_ids = torch.as_tensor(act_ids)
        if tuple(act_ids.shape) != (len(motion.dof_names),):
            raise ReplayError(f"act_ids must have shape [{len(motion.dof_names)}] (one per motion DOF), "
                              f"got {tuple(act_ids.shape)}")
        act_ids = act_ids.to(device=dev, dtype=torch.int32)
        steps = max(1, int(round(duration / sim.timestep)))
        buf = motion.spline() if interp == "cubic" else motion.as_buffer()
        return cls(sim=sim, motion=motion, offs=offs, mode=mode, steps=steps, interp=interp, act_ids=act_ids,
                   adrs=sim.qpos_adrs(act_ids), buf=buf.to(dev), offs_dev=offs.to(dev),
                   fps_step=motion.fps * sim.timestep, step=ops.new_step_counter(dev))

    @property
    def dev(self) -> torch.device:
        return self.sim.device

    @property
    def on_cuda(self) -> bool:
        return self.dev.type == "cuda"

    def attach_recorder(self, observables: list[Observable], store: bool, chunk_bytes: int, min_rows: int,
                        plan_worlds: int | None = None) -> None:
        """The recording stage: every observable's device ring, and the tracking error
        of the angles against the targets recomputed by :meth:`write_targets`."""
        self.recorder = Recorder(observables, self.steps, self.dev, store=store, chunk_bytes=chunk_bytes,
                                 min_rows=min_rows, track="angles", plan_worlds=plan_worlds)
        every = self.recorder.stream("angles").obs.every
        settle_row = math.ceil(SETTLE_SECONDS / (self.sim.timestep * every))
        settle_row = min(settle_row, self.recorder.stream("angles").rows - 1)
        dofs = torch.arange(len(self.motion.dof_names), dtype=torch.int32, device=self.dev)
        tracker = self.recorder.add_tracker(
            lambda out, counter, advance: self.write_targets(out, advance, counter, dofs), settle_row)
        tracker.targets(tracker.buf[:, 0], tracker.counter, 0)  # checks dofs now, not on the side stream later
        if self.vision is not None:
            self.vision.attach(self.recorder)

    def write_targets(self, ctrl: torch.Tensor, advance: int, counter: torch.Tensor | None = None,
                      act_ids: torch.Tensor | None = None) -> None:
        """The targets op (motion_to_ctrl or spline_to_ctrl) into ``ctrl`` at ``counter``
        (default the run's) and columns ``act_ids`` (default the driven actuators)."""
        op = ops.spline_to_ctrl if self.interp == "cubic" else ops.motion_to_ctrl
        op(self.buf, self.step if counter is None else counter, ctrl, self.act_ids if act_ids is None else act_ids,
           offsets=self.offs_dev, frames_per_step=self.fps_step, mode=self.mode, advance=advance)

    def initial_state(self, keep_state: bool = False, warmup_steps: int = 0) -> None:
        """Every joint starts at its first target (or, with ``keep_state``, where it
        is), then ``warmup_steps`` steps with the controls held there; the state
        reached is sample 0 of every observable."""
        qpos, ctrl = self.sim.view("qpos"), self.sim.view("ctrl")
        if not keep_state:
            init = torch.empty_like(ctrl)
            self.write_targets(init, 0)
            cols = self.act_ids.long()
            qpos[:, self.adrs.long()] = init[:, cols]
            ctrl[:, cols] = init[:, cols]
            self.sim.forward()
        if warmup_steps:
            self.write_targets(ctrl, 0)
            for _ in range(warmup_steps):
                self.sim.step()
        self.recorder.record(self.step)
        if self.vision is not None:
            if keep_state and not warmup_steps:  # the eyes' poses from the kept state, not stale ones
                self.sim.kinematics()
            self.vision.sample(0)
        self.recorder.flush_ready(0)

    def one_step(self, timed: bool = False) -> None:
        """[targets op(advance=1), mjw.step, record_chunk per observable]; ``timed``
        synchronizes between the stages and adds their times to ``split``."""
        on_cuda, sim = self.on_cuda, self.sim
        t0 = time.perf_counter()
        with profiling.stage(f"flycuda.{'spline' if self.interp == 'cubic' else 'motion'}_to_ctrl", cuda=on_cuda):
            self.write_targets(sim.view("ctrl"), 1)
        if timed:
            _sync(sim)
            t1 = time.perf_counter()
        with profiling.stage("mjw.step", cuda=on_cuda):
            sim.step()
        if timed:
            _sync(sim)
            t2 = time.perf_counter()
        with profiling.stage("flycuda.record_chunk", cuda=on_cuda):
            self.recorder.record(self.step)
        if timed:
            _sync(sim)
            t3 = time.perf_counter()
            self.split["flycuda ops"] += (t1 - t0) + (t3 - t2)
            self.split["physics"] += t2 - t1

    def advanced(self, n: int) -> None:
        """Counts ``n`` steps as run and queues out the chunks they completed."""
        self.done += n
        if self.vision is not None:
            self.vision.sample(self.done)
        self.recorder.flush_ready(self.done)


class _Renders:
    """Renders a mosaic every ``every`` steps, and always the first and the last state
    (so ``--render`` has at least two frames and ``--frames`` the final state)."""

    def __init__(self, run: _Run, renderer, writer, every: int):
        self.run, self.renderer, self.writer, self.every = run, renderer, writer, every
        self.frames, self.seconds, self.last_step = 0, 0.0, -1

    @property
    def active(self) -> bool:
        return self.renderer is not None and (self.every > 0 or self.writer is not None)

    def next_due(self, done: int) -> int:
        """The next step at which a frame is due (the run's end when none)."""
        return (done // self.every + 1) * self.every if self.every else self.run.steps

    def render(self) -> None:
        t0 = time.perf_counter()
        with profiling.stage("render", cuda=self.run.on_cuda):
            frame = self._frame()
            if self.writer is not None:
                self.writer.add(frame)
        _sync(self.run.sim)  # render is outside the graph: always measured
        self.seconds += time.perf_counter() - t0
        self.frames += 1
        self.last_step = self.run.done

    def _frame(self):
        """The mosaic; with the vision stage and a TileRenderer of tiles (not drawing
        into a mosaic), each world's latest eye readouts beneath its tile."""
        eyes, r = self.run.vision, self.renderer
        if eyes is None or getattr(r, "cols", 1) != 0:
            return r.render_mosaic()
        from .vision import mosaic_with_eyes

        return mosaic_with_eyes(r.render(), eyes.vision.readouts[r.worlds.long()], eyes.vision.retina)

    def first(self) -> None:
        if self.active:
            self.render()

    def after_step(self) -> None:
        if self.active and self.every and self.run.done % self.every == 0:
            self.render()

    def last(self) -> None:
        if self.active and self.last_step != self.run.done:
            self.render()


def _progress_bar(progress: bool, steps: int, worlds: int):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=steps, unit="step", desc=f"replay {worlds} worlds", leave=False)


# --- the run -------------------------------------------------------------------------

def _warm_up_and_split(run: _Run, renders: _Renders, t_start: float) -> tuple[float, dict, float]:
    """The first step (Warp's JIT / module load) timed with set-up, then up to
    SPLIT_STEPS synchronized eager steps timed stage by stage (part of the replay).
    Returns (set-up + first step seconds, per-stage seconds, wall seconds of the split steps)."""
    run.one_step()
    _sync(run.sim)
    # the first frame is render time, the first eyes' sample vision time
    jit_seconds = time.perf_counter() - t_start - renders.seconds - (run.vision.seconds if run.vision else 0.0)
    run.advanced(1)
    renders.after_step()
    n_split = min(SPLIT_STEPS, run.steps - run.done)
    t0 = time.perf_counter()
    for _ in range(n_split):
        run.one_step(timed=True)
        run.advanced(1)
        renders.after_step()
    _sync(run.sim)
    # Per-step stage times from the synchronized eager steps, scaled to the whole run.
    split = {k: v / n_split * run.steps for k, v in run.split.items()} if n_split else dict(run.split)
    return jit_seconds, split, time.perf_counter() - t0


def _capture(run: _Run, use_graph: bool, steps_per_graph: int):
    """K steps captured into one CUDA graph on the shared stream (not timed), or None;
    the vision stage's sample into its own."""
    if use_graph and run.vision is not None:
        run.vision.capture()
    if not use_graph or run.steps - run.done < steps_per_graph:
        return None
    return streams.capture_graph(run.one_step, run.sim.wp_device, repeat=steps_per_graph)


def _timed_loop(run: _Run, renders: _Renders, cuda_graph, steps_per_graph: int, prof, bar) -> float:
    """The remaining steps: graph launches where a whole launch fits before the next due
    frame or vision sample and before a recording ring slot would be reused, eager
    steps otherwise.
    Returns the wall seconds."""
    _sync(run.sim)
    t0 = time.perf_counter()
    while run.done < run.steps:
        room = min(run.steps, renders.next_due(run.done), run.recorder.safe_until(),
                   run.vision.next_due(run.done) if run.vision is not None else run.steps)
        if cuda_graph is not None and run.done + steps_per_graph <= room:
            with profiling.stage("replay.graph_launch", cuda=run.on_cuda):
                streams.launch_graph(cuda_graph)
            n = steps_per_graph
        else:
            run.one_step()
            n = 1
        run.advanced(n)
        renders.after_step()
        if prof is not None:
            prof.step()
        if bar:
            bar.update(n)
    _sync(run.sim)
    return time.perf_counter() - t0
