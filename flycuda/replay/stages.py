"""The replay's stages (:class:`flycuda.sim.stepper.Stage`): the recording's targets into the
controls (:class:`Targets`), the recording and its store (:class:`Recording`), frames
(:class:`Renders`). The eyes are :class:`flycuda.vision.stage.VisionStage`; the loop that
runs them all is :func:`flycuda.sim.stepper.run_stages`. Each is built from the checked
settings (nothing allocated) and sets itself up when the loop starts."""

from __future__ import annotations

import signal
import time

import torch

from .. import ops
from .. import profile as profiling
from ..errors import RecordingError
from ..recording.observables import resolve as resolve_observables
from ..recording.recorder import Recorder
from ..recording.sink import open_sink
from ..sim.motion import Motion
from ..sim.stepper import Stage, due_room, sync
from ..vision.eyes import mosaic_with_eyes
from ..vision.stage import VisionStage
from .results import TRACKING_SKIP_SECONDS, rmse_from_sums, settle_row
from .settings import ReplayError

__all__ = ["Targets", "TargetRows", "Recording", "Renders"]


class Targets(Stage):
    """``motion``'s targets into the controls at the device counter, advancing it (the
    targets op: ``motion_to_ctrl``, or ``spline_to_ctrl`` with ``interp="cubic"``), from
    start frames ``offs`` (float64 [W], host) in ``mode``; ``act_ids``: the actuator per
    motion DOF (default matched by name, :meth:`flycuda.sim.Sim.actuator_ids`)."""

    def __init__(self, motion: Motion, offs: torch.Tensor, mode: str, interp: str = "linear",
                 act_ids: torch.Tensor | None = None):
        self.motion, self.offs, self.mode, self.interp, self.act_ids = motion, offs, mode, interp, act_ids
        self.sim = self.step = self.adrs = self.buf = self.offs_dev = None
        self.fps_step = 0.0  # recording frames per simulation step

    def setup(self, loop) -> None:
        """The recording on the device ([M, T, D], or cubic pieces [M, T, 4, D]), the driven
        actuators and their qpos addresses."""
        sim, dof_names = loop.sim, self.motion.dof_names
        act_ids = sim.actuator_ids(dof_names) if self.act_ids is None else self.act_ids
        act_ids = torch.as_tensor(act_ids)
        if tuple(act_ids.shape) != (len(dof_names),):
            raise ReplayError(f"act_ids must have shape [{len(dof_names)}] (one per motion DOF), "
                              f"got {tuple(act_ids.shape)}")
        self.sim, self.step = sim, loop.step
        self.act_ids = act_ids.to(device=sim.device, dtype=torch.int32)
        self.adrs = sim.qpos_adrs(self.act_ids)
        buf = self.motion.spline() if self.interp == "cubic" else self.motion.as_buffer()
        self.buf, self.offs_dev = buf.to(sim.device), self.offs.to(sim.device)
        self.fps_step = self.motion.fps * sim.timestep

    def write_targets(self, ctrl: torch.Tensor, advance: int, counter: torch.Tensor | None = None,
                      act_ids: torch.Tensor | None = None, offsets: torch.Tensor | None = None) -> None:
        """The targets op into ``ctrl`` at ``counter`` (default the loop's), columns ``act_ids``
        (default the driven actuators) and start frames ``offsets`` (default each world's)."""
        op = ops.spline_to_ctrl if self.interp == "cubic" else ops.motion_to_ctrl
        op(self.buf, self.step if counter is None else counter, ctrl, self.act_ids if act_ids is None else act_ids,
           offsets=self.offs_dev if offsets is None else offsets, frames_per_step=self.fps_step, mode=self.mode,
           advance=advance)

    def start(self, loop) -> None:
        """Every driven joint at its first target (unless the loop keeps the state as given),
        the controls held there through the warm-up's steps."""
        qpos, ctrl = self.sim.view("qpos"), self.sim.view("ctrl")
        if not loop.options.keep_state:
            init = torch.empty_like(ctrl)
            self.write_targets(init, 0)
            cols = self.act_ids.long()
            qpos[:, self.adrs.long()] = init[:, cols]
            ctrl[:, cols] = init[:, cols]
            self.sim.forward()
        if loop.options.warmup_steps:
            self.write_targets(ctrl, 0)

    def before_physics(self, loop) -> None:
        with profiling.stage(f"flycuda.{'spline' if self.interp == 'cubic' else 'motion'}_to_ctrl", cuda=loop.on_cuda):
            self.write_targets(self.sim.view("ctrl"), 1)


class TargetRows:
    """The targets of one chunk's rows in one launch of the targets op (the tracker's
    ``targets``): W x C virtual worlds, row r of world w starting at the frame position
    ``offsets[w] + (first + r every) * frames_per_step``, computed here in float64 as the
    op computes it (one multiply, one add, each rounded once), and read at a counter of 0
    (the op then adds 0.0): bit for bit the op at each row's step. A per-world motion
    buffer ([W, T, D] with W > 1) cannot serve W x C virtual worlds: it goes row by row."""

    def __init__(self, targets: Targets, C: int):
        dev, W, D = targets.sim.device, targets.sim.nworld, len(targets.motion.dof_names)
        self.run = targets
        self.dofs = torch.arange(D, dtype=torch.int32, device=dev)
        self.rows = torch.arange(C, dtype=torch.float64, device=dev)
        self.steps = torch.empty(C, dtype=torch.float64, device=dev)
        self.offsets = torch.empty(W, C, dtype=torch.float64, device=dev)
        self.zero = torch.zeros(1, dtype=torch.int64, device=dev)  # a plain counter at 0, never advanced
        self.counter = ops.new_step_counter(dev)                   # the row-by-row path's
        self.device_bytes = 8 * (self.rows.numel() + self.steps.numel() + self.offsets.numel() + 1) + 4 * D + 20

    def __call__(self, out: torch.Tensor, first: int, every: int) -> None:
        """Targets at steps first, first + every, ... into ``out`` [W, C, D] (contiguous)."""
        run, (W, C, D) = self.run, out.shape
        if run.buf.shape[0] != 1:
            self.counter[:1].fill_(first)
            for r in range(C):
                run.write_targets(out[:, r], every, self.counter, self.dofs)
            return
        torch.mul(self.rows, float(every), out=self.steps)
        self.steps.add_(float(first))   # each row's step: exact integers in float64
        self.steps.mul_(run.fps_step)    # step * frames_per_step, rounded as the op rounds it
        torch.add(run.offs_dev[:, None], self.steps[None, :], out=self.offsets)  # offset + it, likewise
        run.write_targets(out.view(W * C, D), 0, self.zero, self.dofs, offsets=self.offsets.view(W * C))


class Recording(Stage):
    """What the replay records: the observables ``specs`` (resolved against the worlds, every
    ``record_every`` steps by default) and those of the stages before it, in device rings
    streamed to ``target`` (a checked :class:`flycuda.recording.Target`, or None: nowhere),
    with the tracking error of the angles against ``targets``' own op. ``facts``: the
    store's attributes beyond the loop's (timestep, worlds, steps)."""

    def __init__(self, targets: Targets, specs: list, target, record_every: int, chunk_bytes: int, facts: dict):
        self.targets, self.specs, self.target = targets, specs, target
        self.record_every, self.chunk_bytes, self.facts = record_every, chunk_bytes, facts
        self.recorder = self.sink = None
        self.closed = False

    def setup(self, loop) -> None:
        """The rings and the tracker, then the store opened (nothing is opened when a
        stage before fails)."""
        sim, tg, target = loop.sim, self.targets, self.target
        observables = resolve_observables(sim, self.specs, dof_names=tg.motion.dof_names, adrs=tg.adrs,
                                          default_every=self.record_every)
        earlier = loop.stages[:loop.stages.index(self)]
        for st in earlier:
            observables += st.observables(loop)
        angles = next(o for o in observables if o.name == "angles")
        first = settle_row(sim.timestep, angles.every, angles.rows(loop.steps))
        rec = self.recorder = Recorder(observables, loop.steps, sim.device, store=target is not None,
                                       chunk_bytes=self.chunk_bytes, min_rows=loop.options.per_launch, track="angles",
                                       plan_worlds=target.plan_worlds if target is not None else None)
        tracker = rec.add_tracker(TargetRows(tg, rec.stream("angles").C), first)
        tracker.targets(tracker.buf, 0, angles.every)  # checks the ids now, not on the side stream later
        for st in earlier:
            if isinstance(st, VisionStage):
                st.attach(rec)
        if target is not None:
            facts = dict(timestep=sim.timestep, worlds=target.worlds_total or sim.nworld, steps=loop.steps,
                         settle_seconds=TRACKING_SKIP_SECONDS, **self.facts)
            self.sink = open_sink(target, rec, facts, sim.nworld, sim.device)

    def after_physics(self, loop) -> None:
        with profiling.stage("flycuda.record_chunk", cuda=loop.on_cuda):
            self.recorder.record(loop.step)

    def room(self, loop, done: int) -> int:
        return self.recorder.room(done)

    def prepare(self, loop, first: int, last: int) -> None:
        self.recorder.ensure_slots(first, last)

    def after(self, loop, done: int) -> None:
        self.recorder.flush_ready(done)

    def finish(self, loop) -> None:
        """The last chunks out; the store closed complete with the tracking error and the
        worlds MuJoCo Warp's buffers overflowed in."""
        self.recorder.finish()
        if self.sink is not None:
            tracker, w0 = self.recorder.tracker, self.target.world_offset or 0
            self.sink.close(ok=True, rmse_per_dof=rmse_from_sums(tracker.sq.cpu(), tracker.count).tolist(),
                            mjw_overflow={str(w0 + w): why for w, why in loop.stats.overflow.items()})
            self.closed = True

    def abort(self, loop, why: str) -> None:
        """The store closed incomplete with ``why``; on a preemption, first the samples taken
        so far (the filling chunks) flushed, and the store marked ``preempted at step N``."""
        if self.recorder is not None and loop.preempted is not None and self.sink is not None and not self.closed:
            self.closed = True
            try:
                self.recorder.finish(loop.done)
            finally:
                name = signal.Signals(loop.preempted.signum).name
                self.sink.close(ok=False, status=f"preempted at step {loop.done} ({name})")
        if self.recorder is not None:
            self.recorder.abort()
        if self.sink is not None and not self.closed:  # a stage after this one failed in its finish
            self.sink.close(ok=False, why=why)
            self.closed = True

    # -- snapshots (flycuda.replay.snapshot) --------------------------------------------
    def rows_queued(self) -> dict:
        """Samples per stored array in the chunks queued out so far (the store holds them
        once the writer gets there)."""
        rows = self.recorder.rows_queued()
        if self.recorder.tracker is not None:
            rows["targets"] = rows[self.recorder.track]
        return rows

    def state(self, loop) -> dict:
        """Each stream's chunks queued out and its filling ring slot; the tracking sums."""
        t = self.recorder.tracker
        return {"streams": self.recorder.streams_state(), "sq": t.sq.cpu().clone(), "count": t.count}

    def restore(self, loop, state: dict) -> None:
        try:
            self.recorder.restore_streams(state["streams"])
        except RecordingError as e:
            raise ReplayError(str(e)) from None
        self.recorder.tracker.sq.copy_(state["sq"])
        self.recorder.tracker.count = int(state["count"])


class Renders(Stage):
    """Renders a mosaic every ``every`` steps, and always the first and the last state
    (so ``--render`` has at least two frames and ``--frames`` the final state)."""

    def __init__(self, renderer, writer, every: int):
        self.renderer, self.writer, self.every = renderer, writer, every
        self.frames, self.seconds, self.last_step = 0, 0.0, -1
        self.sim = self.eyes = None

    @property
    def active(self) -> bool:
        return self.renderer is not None and (self.every > 0 or self.writer is not None)

    def setup(self, loop) -> None:
        self.sim, self.eyes = loop.sim, loop.stage(VisionStage)

    def room(self, loop, done: int) -> int:
        return due_room(self.every if self.active else 0, loop.steps, done)

    def after(self, loop, done: int) -> None:
        if self.active and (done == 0 or (self.every and done % self.every == 0)):
            self.render(done)

    def end(self, loop) -> None:
        if self.active and self.last_step != loop.done:
            self.render(loop.done)

    def render(self, done: int) -> None:
        t0 = time.perf_counter()
        with profiling.stage("render", cuda=self.sim.device.type == "cuda"):
            frame = self._frame()
            if self.writer is not None:
                self.writer.add(frame)
        sync(self.sim)  # render is outside the graph: always measured
        self.seconds += time.perf_counter() - t0
        self.frames += 1
        self.last_step = done

    def _frame(self):
        """The mosaic; with the vision stage and a TileRenderer of tiles (not drawing
        into a mosaic), each world's latest eye readouts beneath its tile."""
        eyes, r = self.eyes, self.renderer
        if eyes is None or getattr(r, "cols", 1) != 0:
            return r.render_mosaic()
        return mosaic_with_eyes(r.render(), eyes.vision.readouts[r.worlds.long()], eyes.vision.retina)
