"""The step loop of N worlds: stages around the physics, launches of K steps, host work between.

One step is ``[stage.before_physics ..., mjw.step, stage.after_physics ...]`` over the
stages in their order. A stage is anything with the hooks of :class:`Stage` (the replay's
targets, eyes, recording and frames are; the fly's controllers and senses plug in the same
way): :func:`run_stages` calls each hook of each stage at its time and knows nothing else
of them.

* set-up: ``setup(loop)`` in order (a stage may read the stages before it), once the worlds,
  the device step counter and the number of steps are known;
* the initial state: ``start(loop)``, the warm-up's steps (controls as the stages left them),
  then ``after_physics`` and ``after(loop, 0)``: the state reached is sample 0;
* the first step eagerly (Warp's JIT / module load), timed with the set-up; then
  ``SPLIT_STEPS`` eager steps synchronized between physics and the stages, timed apart;
  then eager steps up to the launch grid;
* ``capture(loop)`` (a stage's own graphs) and the step captured K times into one CUDA graph
  on the stream torch and Warp share (CUDA, ``graph=True``); on the CPU a launch is K plain
  steps;
* the timed loop: a launch where a whole one fits before every stage's ``room(loop, done)``
  (:class:`Schedule`), an eager step otherwise; ``prepare(loop, first, last)`` before each,
  ``after(loop, done)`` after each; then ``end(loop)``, untimed;
* ``finish(loop)`` at the end, or ``abort(loop, why)`` on any error (no store is left
  marked complete);
* preemption (:mod:`flycuda.sim.preempt`): after each launch's ``after`` hooks, a SIGTERM or
  SIGINT noted meanwhile raises :class:`~flycuda.sim.preempt.Preempted` (``loop.preempted``
  holds it for the stages' ``abort``);
* resume: with ``options.resume`` (what :meth:`Loop.state` returned at some step), the
  worlds, the device counter and every stage (``restore``) are set back to that step instead
  of the initial state, and the run goes on from there, bit for bit as if never stopped.

The device counter is advanced inside the step by a stage (the replay's targets op); at the
end it must equal the steps run.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from .. import profile as profiling
from ..ops import new_step_counter
from . import preempt, streams
from .preempt import Preempted

__all__ = ["Stage", "Schedule", "LoopOptions", "LoopStats", "Loop", "run_stages", "due_room", "SPLIT_STEPS"]

SPLIT_STEPS = 10  # eager steps timed stage by stage


class Stage:
    """What a step loop asks of one stage; every hook does nothing unless overridden.
    ``seconds``: host time the stage measures itself (frames, samples), left out of
    the first step's time; ``loop`` is the :class:`Loop` running the stage."""

    seconds: float = 0.0

    def setup(self, loop: "Loop") -> None:
        """Allocates what the stage needs, before the initial state."""

    def observables(self, loop: "Loop") -> list:
        """What the stage offers the recording (after its set-up)."""
        return []

    def start(self, loop: "Loop") -> None:
        """Sets the initial state, before the warm-up's steps."""

    def before_physics(self, loop: "Loop") -> None:
        """Device work of every step before the physics (captured; no host sync)."""

    def after_physics(self, loop: "Loop") -> None:
        """Device work of every step after the physics, and for the initial state."""

    def room(self, loop: "Loop", done: int) -> int:
        """The last step a launch starting after ``done`` steps may reach."""
        return loop.steps

    def prepare(self, loop: "Loop", first: int, last: int) -> None:
        """Host work before steps ``first`` .. ``last`` run (a launch or an eager step)."""

    def after(self, loop: "Loop", done: int) -> None:
        """Host work once ``done`` steps have run (0: the initial state)."""

    def capture(self, loop: "Loop") -> None:
        """Captures the stage's own graphs (CUDA, graphs on), after its first eager use."""

    def end(self, loop: "Loop") -> None:
        """Host work once every step has run, outside the timed loop (the last frame)."""

    def finish(self, loop: "Loop") -> None:
        """The end of a run that completed."""

    def abort(self, loop: "Loop", why: str) -> None:
        """The end of a run that failed (also during set-up): leaves nothing marked complete."""

    def state(self, loop: "Loop") -> dict:
        """What the stage carries from one step to the next (tensors, copied to the host), for
        a snapshot; nothing by default."""
        return {}

    def restore(self, loop: "Loop", state: dict) -> None:
        """The stage as :meth:`state` found it, in place of :meth:`start` (a resumed run)."""


def due_room(every: int, steps: int, done: int) -> int:
    """The room of host work every ``every`` steps (0: none): up to the next multiple."""
    return min(steps, (done // every + 1) * every) if every else steps


@dataclass(frozen=True)
class Schedule:
    """``steps`` steps in launches of ``per_launch`` (None: none, every step eager);
    ``room(done)``: the last step a launch starting after ``done`` may reach. Pure
    arithmetic: the loop asks it, tests run it at any scale."""

    steps: int
    per_launch: int | None
    room: object = None  # Callable[[int], int]; None: the run's end

    def warmup_end(self, at_least: int) -> int:
        """The step the warm-up's eager steps end at: the first multiple of K from
        ``at_least`` (capped at the run's end)."""
        K = self.per_launch or 1
        return min(self.steps, -(-at_least // K) * K)

    def next(self, done: int) -> int:
        """The steps the next launch runs after ``done``: K when a whole launch fits, else 1."""
        K = self.per_launch
        room = self.steps if self.room is None else min(self.steps, self.room(done))
        return K if K is not None and done + K <= room else 1

    def counts(self, done: int) -> tuple[int, int]:
        """(steps in launches, eager steps) from ``done`` to the end."""
        launched = eager = 0
        while done < self.steps:
            n = self.next(done)
            if self.per_launch is not None and n == self.per_launch:
                launched += n
            else:
                eager += n
            done += n
        return launched, eager


@dataclass(frozen=True)
class LoopOptions:
    """How :func:`run_stages` runs: ``steps`` steps in launches of ``per_launch`` (CUDA graphs
    when ``graph``), ``warmup_steps`` untimed steps first, ``keep_state``: the worlds' state
    as given (the stages read it), a progress bar named ``desc``, a torch.profiler trace at
    ``profile``; ``t_start``: when the set-up began (the first step's time counts from it)."""

    steps: int
    per_launch: int = 1
    graph: bool = True
    warmup_steps: int = 0
    keep_state: bool = False
    progress: bool = True
    profile: str | None = None
    t_start: float | None = None
    desc: str = "steps"
    resume: dict | None = None  # Loop.state() of the step to go on from


@dataclass
class LoopStats:
    """What a run measured: set-up + first step seconds, per-part seconds of the synchronized
    steps scaled to the run, wall seconds of the rest, and how the steps ran."""

    jit_seconds: float = 0.0
    split: dict = field(default_factory=lambda: {"physics": 0.0, "flycuda ops": 0.0})
    wall_seconds: float = 0.0
    graph: bool = False
    per_launch: int = 1   # steps per launch
    launched: int = 0     # steps run inside launches of K (graphs on CUDA, K plain calls on the CPU)
    eager: int = 0        # steps run one by one (the warm-up, partial launches)
    split_steps: int = 0  # of the eager steps, those synchronized and timed stage by stage
    profile_summary: str = ""
    overflow: dict = field(default_factory=dict)  # world -> what overflowed (Sim.overflowed), at the end


class Loop:
    """One run of ``stages`` over ``sim``'s worlds (see the module's text): what the stages
    read (``sim``, ``step``, ``steps``, ``options``, ``stages``, ``done``) and the run itself."""

    def __init__(self, sim, stages: list, options: LoopOptions):
        self.sim, self.stages, self.options, self.steps = sim, list(stages), options, options.steps
        self.step = new_step_counter(sim.device)
        self.done = 0
        self.stats = LoopStats(per_launch=options.per_launch)
        self.preempted: Preempted | None = None

    @property
    def on_cuda(self) -> bool:
        return self.sim.device.type == "cuda"

    @property
    def graphs(self) -> bool:
        """Are launches captured CUDA graphs?"""
        return self.options.graph and self.on_cuda

    def stage(self, kind: type):
        """The first stage of type ``kind``, or None."""
        return next((st for st in self.stages if isinstance(st, kind)), None)

    # -- one step ----------------------------------------------------------------------
    def one_step(self, timed: bool = False) -> None:
        """[before_physics..., mjw.step, after_physics...]; ``timed`` synchronizes between
        the parts and adds their times to the split."""
        t0 = time.perf_counter()
        for st in self.stages:
            st.before_physics(self)
        t1 = self._sync_time(timed)
        with profiling.stage("mjw.step", cuda=self.on_cuda):
            self.sim.step()
        t2 = self._sync_time(timed)
        for st in self.stages:
            st.after_physics(self)
        if timed:
            t3 = self._sync_time(timed)
            self.stats.split["flycuda ops"] += (t1 - t0) + (t3 - t2)
            self.stats.split["physics"] += t2 - t1

    def _sync_time(self, timed: bool) -> float:
        if timed:
            sync(self.sim)
        return time.perf_counter()

    def step_eagerly(self, timed: bool = False) -> None:
        """One step outside any launch."""
        for st in self.stages:
            st.prepare(self, self.done + 1, self.done + 1)
        self.one_step(timed)
        self.stats.eager += 1

    def launch(self, n: int, graph) -> None:
        """A launch of ``n`` steps: the captured graph on CUDA, ``n`` plain steps on the CPU."""
        for st in self.stages:
            st.prepare(self, self.done + 1, self.done + n)
        if graph is not None:
            with profiling.stage("loop.graph_launch", cuda=self.on_cuda):
                streams.launch_graph(graph)
        else:
            for _ in range(n):
                self.one_step()
        self.stats.launched += n

    def advanced(self, n: int) -> None:
        """Counts ``n`` steps as run; each stage's host work after them."""
        self.done += n
        for st in self.stages:
            st.after(self, self.done)
        signum = preempt.requested()
        if signum is not None:  # the stages have written what they must (a snapshot among them)
            self.preempted = Preempted(signum, self.done)
            raise self.preempted

    # -- the run -----------------------------------------------------------------------
    def room(self, done: int) -> int:
        return min((st.room(self, done) for st in self.stages), default=self.steps)

    def schedule(self, per_launch: int | None) -> Schedule:
        return Schedule(self.steps, per_launch, self.room)

    def initial_state(self) -> None:
        for st in self.stages:
            st.start(self)
        for _ in range(self.options.warmup_steps):
            self.sim.step()
        for st in self.stages:
            st.after_physics(self)
        for st in self.stages:
            st.after(self, 0)

    def state(self) -> dict:
        """Everything the next step depends on, on the host: the steps done, the device
        counter, the worlds' carried state (:meth:`flycuda.sim.Sim.carried_state`) and each
        stage's (:meth:`Stage.state`, by position)."""
        sync(self.sim)
        return {"done": self.done, "counter": self.step.cpu().clone(), "sim": self.sim.carried_state(),
                "stages": [st.state(self) for st in self.stages]}

    def restore(self, state: dict) -> None:
        """The run as :meth:`state` found it, in place of the initial state."""
        if len(state["stages"]) != len(self.stages):
            raise RuntimeError(f"flycuda: the snapshot has {len(state['stages'])} stages' state, the loop "
                               f"{len(self.stages)} stages")
        self.sim.load_carried_state(state["sim"])
        self.step.copy_(state["counter"])
        self.done = int(state["done"])
        for st, s in zip(self.stages, state["stages"]):
            st.restore(self, s)

    def warm_up_and_split(self, schedule: Schedule) -> float:
        """The first step, timed with the set-up; SPLIT_STEPS synchronized steps timed part
        by part; eager steps onto the launch grid. Returns their wall seconds but the first's."""
        if self.done >= self.steps:  # resumed at its last step: nothing left to run
            return 0.0
        self.step_eagerly()
        sync(self.sim)
        t_start = self.options.t_start if self.options.t_start is not None else self._t_run
        self.stats.jit_seconds = time.perf_counter() - t_start - sum(st.seconds for st in self.stages)
        self.advanced(1)
        n_split = self.stats.split_steps = min(SPLIT_STEPS, self.steps - self.done)
        t0 = time.perf_counter()
        for _ in range(n_split):
            self.step_eagerly(timed=True)
            self.advanced(1)
        for _ in range(schedule.warmup_end(self.done) - self.done):  # onto the launch grid, unsynchronized
            self.step_eagerly()
            self.advanced(1)
        sync(self.sim)
        split = self.stats.split
        self.stats.split = {k: v / n_split * self.steps for k, v in split.items()} if n_split else dict(split)
        return time.perf_counter() - t0

    def capture(self):
        """The stages' own graphs, then K steps in one CUDA graph on the shared stream (or None)."""
        if not self.graphs:
            return None
        for st in self.stages:
            st.capture(self)
        if self.steps - self.done < self.options.per_launch:
            return None
        return streams.capture_graph(self.one_step, self.sim.wp_device, repeat=self.options.per_launch)

    def timed_loop(self, graph, schedule: Schedule, prof, bar) -> float:
        """The remaining steps as ``schedule`` says; returns their wall seconds."""
        sync(self.sim)
        t0 = time.perf_counter()
        while self.done < self.steps:
            n = schedule.next(self.done)
            if schedule.per_launch is not None and n == schedule.per_launch:
                self.launch(n, graph)
            else:
                self.step_eagerly()
            self.advanced(n)
            if prof is not None:
                prof.step()
            if bar:
                bar.update(n)
        sync(self.sim)
        return time.perf_counter() - t0

    def run(self) -> LoopStats:
        """Every stage's set-up, the initial state, the warm-up and split steps, the capture and
        the timed loop; then every stage's finish (or abort, on any error)."""
        try:
            self._run()
            self.stats.overflow = self.sim.overflowed()  # one read of the device, for the stages' finish
            for st in self.stages:
                st.finish(self)
        except BaseException as e:
            for st in self.stages:
                st.abort(self, f"{type(e).__name__}: {e}")
            raise
        return self.stats

    def _run(self) -> None:
        opts = self.options
        self._t_run = time.perf_counter()  # the set-up's start, unless the options say an earlier one
        for st in self.stages:
            st.setup(self)
        with streams.shared_stream(self.sim.device):  # torch's ops and Warp's steps in one stream order
            if opts.resume is None:
                self.initial_state()
            else:
                self.restore(opts.resume)
        bar = _progress_bar(self.steps, opts.desc) if opts.progress else None
        prof_ctx = profiling.Profiler(opts.profile, cuda=self.on_cuda) if opts.profile else contextlib.nullcontext()
        launches = opts.graph or not self.on_cuda  # captured graphs on CUDA (unless graph=False), plain steps on the CPU
        schedule = self.schedule(opts.per_launch if launches else None)
        try:
            with prof_ctx as prof, streams.shared_stream(self.sim.device):
                split_wall = self.warm_up_and_split(schedule)
                if bar:
                    bar.update(self.done)
                graph = self.capture()
                if self.on_cuda and graph is None:
                    schedule = self.schedule(None)
                loop_wall = self.timed_loop(graph, schedule, prof, bar)
                for st in self.stages:
                    st.end(self)
        finally:
            if bar:
                bar.close()
        self.stats.graph = graph is not None
        self.stats.wall_seconds = split_wall + loop_wall
        self.stats.profile_summary = prof.summary() if prof is not None else ""
        if int(self.step[0]) != self.steps:  # the device counter must agree with the host's count
            raise RuntimeError(f"flycuda: device step counter {int(self.step[0])} != {self.steps} steps run")


def _progress_bar(steps: int, desc: str):
    from tqdm.auto import tqdm  # noqa: PLC0415  (only a run with a bar needs it: import flycuda.sim stays light)

    return tqdm(total=steps, unit="step", desc=desc, leave=False)


def sync(sim) -> None:
    """Waits for the worlds' device (CUDA: Warp's and torch's work; the CPU: nothing)."""
    if sim.device.type == "cuda":
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize(sim.device)


def run_stages(sim, stages: list, options: LoopOptions) -> LoopStats:
    """Runs ``options.steps`` steps of ``sim``'s worlds with ``stages`` (see the module's text)."""
    return Loop(sim, stages, options).run()
