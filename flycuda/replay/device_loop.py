"""The replay's device loop: the worlds' device buffers (:class:`ReplayLoop`), the initial state
and warm-up, the synchronized split steps, graph capture, and the timed loop of graph
launches and eager steps; frames rendered along the way (:class:`Renders`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .. import ops
from .. import profile as profiling
from ..recording.observables import Observable
from ..recording.recorder import Recorder
from ..sim import streams
from ..sim.mjwarp import Sim
from ..sim.motion import Motion
from ..vision.eyes import mosaic_with_eyes
from .results import SPLIT_STEPS, settle_row
from .schedule import Schedule
from .settings import ReplayError

__all__ = ["ReplayLoop", "Renders", "sync", "progress_bar", "warm_up_and_split", "capture", "timed_loop", "Schedule", "TargetRows"]


def sync(sim: Sim) -> None:
    if sim.device.type == "cuda":
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize(sim.device)


@dataclass
class ReplayLoop:
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
    vision: object = None      # a flycuda.vision.stage.VisionStage, or None
    done: int = 0              # steps run so far
    launched: int = 0          # steps run inside launches of K (graphs on CUDA, K plain calls on the CPU)
    eager: int = 0             # steps run one by one (the warm-up, partial launches)
    split_steps: int = 0       # of the eager steps, those synchronized and timed stage by stage
    split: dict = field(default_factory=lambda: {"physics": 0.0, "flycuda ops": 0.0})

    @classmethod
    def setup(cls, sim: Sim, motion: Motion, offs, duration: float, mode: str, interp: str = "linear",
              act_ids: torch.Tensor | None = None) -> "ReplayLoop":
        dev = sim.device
        if act_ids is None:
            act_ids = sim.actuator_ids(motion.dof_names)
        act_ids = torch.as_tensor(act_ids)
        if tuple(act_ids.shape) != (len(motion.dof_names),):
            raise ReplayError(f"act_ids must have shape [{len(motion.dof_names)}] (one per motion DOF), "
                              f"got {tuple(act_ids.shape)}")
        act_ids = act_ids.to(device=dev, dtype=torch.int32)
        adrs = sim.qpos_adrs(act_ids)
        steps = max(1, int(round(duration / sim.timestep)))
        buf = motion.spline() if interp == "cubic" else motion.as_buffer()
        return cls(sim=sim, motion=motion, offs=offs, mode=mode, steps=steps, interp=interp, act_ids=act_ids,
                   adrs=adrs, buf=buf.to(dev), offs_dev=offs.to(dev),
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
        angles = next(o for o in observables if o.name == "angles")
        first = settle_row(self.sim.timestep, angles.every, angles.rows(self.steps))
        self.recorder = Recorder(observables, self.steps, self.dev, store=store, chunk_bytes=chunk_bytes,
                                 min_rows=min_rows, track="angles", plan_worlds=plan_worlds)
        tracker = self.recorder.add_tracker(TargetRows(self, self.recorder.stream("angles").C), first)
        tracker.targets(tracker.buf, 0, angles.every)  # checks the ids now, not on the side stream later
        if self.vision is not None:
            self.vision.attach(self.recorder)

    def write_targets(self, ctrl: torch.Tensor, advance: int, counter: torch.Tensor | None = None,
                      act_ids: torch.Tensor | None = None, offsets: torch.Tensor | None = None) -> None:
        """The targets op (motion_to_ctrl or spline_to_ctrl) into ``ctrl`` at ``counter``
        (default the run's), columns ``act_ids`` (default the driven actuators) and start
        frames ``offsets`` (default each world's)."""
        op = ops.spline_to_ctrl if self.interp == "cubic" else ops.motion_to_ctrl
        op(self.buf, self.step if counter is None else counter, ctrl, self.act_ids if act_ids is None else act_ids,
           offsets=self.offs_dev if offsets is None else offsets, frames_per_step=self.fps_step, mode=self.mode,
           advance=advance)

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
            sync(sim)
            t1 = time.perf_counter()
        with profiling.stage("mjw.step", cuda=on_cuda):
            sim.step()
        if timed:
            sync(sim)
            t2 = time.perf_counter()
        with profiling.stage("flycuda.record_chunk", cuda=on_cuda):
            self.recorder.record(self.step)
        if timed:
            sync(sim)
            t3 = time.perf_counter()
            self.split["flycuda ops"] += (t1 - t0) + (t3 - t2)
            self.split["physics"] += t2 - t1

    def step_eagerly(self, timed: bool = False) -> None:
        """One step outside any launch (its ring slots made ready first)."""
        self.recorder.ensure_slots(self.done + 1, self.done + 1)
        self.one_step(timed)
        self.eager += 1

    def launch(self, n: int, graph) -> None:
        """A launch of ``n`` steps: the captured graph on CUDA, ``n`` plain steps on the CPU."""
        self.recorder.ensure_slots(self.done + 1, self.done + n)
        if graph is not None:
            with profiling.stage("replay.graph_launch", cuda=self.on_cuda):
                streams.launch_graph(graph)
        else:
            for _ in range(n):
                self.one_step()
        self.launched += n

    def schedule(self, renders: "Renders", per_launch: int | None) -> Schedule:
        """The launch schedule of this run (launches of ``per_launch`` steps; None: none)."""
        dues = ([renders.every] if renders.active and renders.every else []) + \
               ([self.vision.every] if self.vision is not None else [])
        chunks = [(st.rows, st.C, st.obs.every) for st in self.recorder.streams]
        return Schedule(self.steps, per_launch, tuple(dues), tuple(chunks))

    def advanced(self, n: int) -> None:
        """Counts ``n`` steps as run and queues out the chunks they completed."""
        self.done += n
        if self.vision is not None:
            self.vision.sample(self.done)
        self.recorder.flush_ready(self.done)


class TargetRows:
    """The targets of one chunk's rows in one launch of the targets op (the tracker's
    ``targets``): W x C virtual worlds, row r of world w starting at the frame position
    ``offsets[w] + (first + r every) * frames_per_step``, computed here in float64 as the
    op computes it (one multiply, one add, each rounded once), and read at a counter of 0
    (the op then adds 0.0): bit for bit the op at each row's step. A per-world motion
    buffer ([W, T, D] with W > 1) cannot serve W x C virtual worlds: it goes row by row."""

    def __init__(self, run: ReplayLoop, C: int):
        dev, W, D = run.dev, run.sim.nworld, len(run.motion.dof_names)
        self.run = run
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


class Renders:
    """Renders a mosaic every ``every`` steps, and always the first and the last state
    (so ``--render`` has at least two frames and ``--frames`` the final state)."""

    def __init__(self, run: ReplayLoop, renderer, writer, every: int):
        self.run, self.renderer, self.writer, self.every = run, renderer, writer, every
        self.frames, self.seconds, self.last_step = 0, 0.0, -1

    @property
    def active(self) -> bool:
        return self.renderer is not None and (self.every > 0 or self.writer is not None)

    def render(self) -> None:
        t0 = time.perf_counter()
        with profiling.stage("render", cuda=self.run.on_cuda):
            frame = self._frame()
            if self.writer is not None:
                self.writer.add(frame)
        sync(self.run.sim)  # render is outside the graph: always measured
        self.seconds += time.perf_counter() - t0
        self.frames += 1
        self.last_step = self.run.done

    def _frame(self):
        """The mosaic; with the vision stage and a TileRenderer of tiles (not drawing
        into a mosaic), each world's latest eye readouts beneath its tile."""
        eyes, r = self.run.vision, self.renderer
        if eyes is None or getattr(r, "cols", 1) != 0:
            return r.render_mosaic()

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


def progress_bar(progress: bool, steps: int, worlds: int):
    if not progress:
        return None

    return tqdm(total=steps, unit="step", desc=f"replay {worlds} worlds", leave=False)


def warm_up_and_split(run: ReplayLoop, renders: Renders, t_start: float, schedule: Schedule) -> tuple[float, dict, float]:
    """The first step (Warp's JIT / module load) timed with set-up, then SPLIT_STEPS
    synchronized eager steps timed stage by stage (part of the replay), then plain eager
    steps up to a multiple of the launch size (so that the launches that follow stay
    aligned with frames and samples). Returns (set-up + first step seconds, per-stage
    seconds, wall seconds of the split and alignment steps)."""
    run.step_eagerly()
    sync(run.sim)
    # the first frame is render time, the first eyes' sample vision time
    jit_seconds = time.perf_counter() - t_start - renders.seconds - (run.vision.seconds if run.vision else 0.0)
    run.advanced(1)
    renders.after_step()
    n_split = run.split_steps = min(SPLIT_STEPS, run.steps - run.done)
    t0 = time.perf_counter()
    for _ in range(n_split):
        run.step_eagerly(timed=True)
        run.advanced(1)
        renders.after_step()
    for _ in range(schedule.warmup_end(run.done) - run.done):  # onto the launch grid, unsynchronized
        run.step_eagerly()
        run.advanced(1)
        renders.after_step()
    sync(run.sim)
    # Per-step stage times from the synchronized eager steps, scaled to the whole run.
    split = {k: v / n_split * run.steps for k, v in run.split.items()} if n_split else dict(run.split)
    return jit_seconds, split, time.perf_counter() - t0


def capture(run: ReplayLoop, use_graph: bool, steps_per_graph: int):
    """K steps captured into one CUDA graph on the shared stream (not timed), or None;
    the vision stage's sample into its own."""
    if use_graph and run.vision is not None:
        run.vision.capture()
    if not use_graph or run.steps - run.done < steps_per_graph:
        return None
    return streams.capture_graph(run.one_step, run.sim.wp_device, repeat=steps_per_graph)


def timed_loop(run: ReplayLoop, renders: Renders, cuda_graph, schedule: Schedule, prof, bar) -> float:
    """The remaining steps as ``schedule`` says: launches (``cuda_graph`` on CUDA, plain
    steps on the CPU) where a whole launch fits, eager steps otherwise.
    Returns the wall seconds."""
    sync(run.sim)
    t0 = time.perf_counter()
    while run.done < run.steps:
        n = schedule.next(run.done)
        if schedule.per_launch is not None and n == schedule.per_launch:
            run.launch(n, cuda_graph)
        else:
            run.step_eagerly()
        run.advanced(n)
        renders.after_step()
        if prof is not None:
            prof.step()
        if bar:
            bar.update(n)
    sync(run.sim)
    return time.perf_counter() - t0
