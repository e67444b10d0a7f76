"""Recording a loop of one's own (a controller, a CPG with feedback on the joint angles) the way
a replay records: every observable into its device ring at a device step counter, streamed
chunk by chunk into a store that ``flycuda render``, the plots, zarr and xarray read.

    rec = LoopRecorder(sim, ["qpos@30hz", "ctrl"], "loop.zarr", steps=n, model="hexapod")
    for _ in range(n):
        sim.view("ctrl")[:] = my_policy(sim.view("qpos"))   # your loop writes the controls
        sim.step()
        rec.step()                                          # the state reached, at the device counter
    rec.close()                                             # the store is complete (or: with LoopRecorder(...))

Inside a CUDA graph capture ``rec.step()`` does only its device part (advance the counter,
record: capturable); around each launch of K captured steps call ``rec.before_launch(K)`` and
``rec.after_launch(K)`` (the ring slots' waits and the chunks' copies out happen there).
Memory: the rings (2 chunks of about 16 MiB per observable) whatever ``steps`` is.
"""

from __future__ import annotations

from .. import ops
from ..errors import RecordingError
from .observables import Observable, parse, resolve
from .reader import Recording
from .recorder import CHUNK_BYTES, Recorder
from .sink import open_sink, target_of

__all__ = ["LoopRecorder"]


class LoopRecorder:
    """Records ``observe`` of ``sim``'s worlds over ``steps`` steps of a loop of one's own.

    Args:
        sim: the worlds (:class:`flycuda.sim.Sim`).
        observe: observables (:mod:`flycuda.recording.observables`), e.g. ``["qpos@30hz",
            "body_pos:Thorax", "ctrl"]``; ``angles`` is a replay's (the driven joints), not here.
        store: where the recording goes: a path (``out.zarr``), ``"memory"``, or None (the
            rings only: nothing is kept).
        steps: the steps the loop runs (the store's arrays hold steps + 1 samples at most:
            sample 0 is the state when recording starts).
        model: the model's name or MJCF path, so that ``flycuda render`` can re-pose the
            worlds (e.g. "hexapod", "neuromechfly"); None: the store cannot be rendered.
        overwrite: replace an existing store. chunk_bytes: about this many bytes per chunk.
        timestep: seconds per step of the loop (default the sim's; a loop of control steps
            of n physics steps each: n times it). Rates in Hz count in these steps.
        resume: a resumed loop's :meth:`state` (``store``: the store's Target, opened with
            the rows its snapshot says were written): recording goes on from there.

    ``observe`` may also hold :class:`flycuda.recording.observables.Observable` s of one's
    own buffers (any float32 [W, N] tensor refilled in place each step, e.g. an
    environment's observations, actions and rewards).
    """

    def __init__(self, sim, observe, store=None, *, steps: int, model: str | None = None, overwrite: bool = False,
                 chunk_bytes: int = CHUNK_BYTES, timestep: float | None = None, facts: dict | None = None,
                 resume: dict | None = None):
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise RecordingError(f"steps must be a positive integer (the loop's length), got {steps!r}")
        items = [observe] if isinstance(observe, (str, Observable)) else list(observe)
        own = [o for o in items if isinstance(o, Observable)]
        specs = [parse(o) if isinstance(o, str) else o for o in items if not isinstance(o, Observable)]
        if not specs and not own:
            raise RecordingError("observe must name at least one observable, e.g. ['qpos@30hz']")
        target = target_of(store, overwrite)  # a path is checked before anything is allocated
        self.sim, self.steps, self.done = sim, steps, 0
        self.counter = ops.new_step_counter(sim.device)
        dt = float(timestep) if timestep is not None else sim.timestep
        self.recorder = Recorder(resolve(sim, specs, timestep=dt) + own, steps, sim.device, store=target is not None,
                                 chunk_bytes=chunk_bytes)
        if resume is not None:  # a resumed run's state, checked before its store is touched
            self.recorder.restore_streams(resume["streams"])
        self.sink = None
        if target is not None:
            facts = dict(timestep=dt, worlds=sim.nworld, steps=steps, source="flycuda.recording.LoopRecorder",
                         **({"model": model} if model is not None else {}), **(facts or {}))
            self.sink = open_sink(target, self.recorder, facts, sim.nworld, sim.device)
        self.closed = False
        if resume is not None:  # a resumed run (store: its Target with the rows written): as it was
            self.restore(resume)  # (its streams again: cheap, and the counter and steps done)
        else:
            self.recorder.record(self.counter)  # sample 0: the state now
            self.recorder.flush_ready(0)

    # -- per step ------------------------------------------------------------------------
    def record_step(self) -> None:
        """The device part of one step (capturable): the counter advanced, then every
        observable due at it recorded from the worlds' current state."""
        ops.advance_step(self.counter, 1)
        self.recorder.record(self.counter)

    def step(self) -> None:
        """After each step of the loop: the state it reached, recorded. Eager: also the
        ring slot's wait before and the finished chunks' copies out after; inside a CUDA
        graph capture only :meth:`record_step` (then use :meth:`before_launch` and
        :meth:`after_launch` around each launch)."""
        if self.recorder.capturing():
            self.record_step()
            return
        self.before_launch(1)
        self.record_step()
        self.after_launch(1)

    def before_launch(self, n: int) -> None:
        """Before a launch of ``n`` captured steps (or one eager step): the ring slots they
        write are free (a wait on the device, never a host sync)."""
        self._check_open()
        if self.done + n > self.steps:
            raise RecordingError(f"the loop was recorded for steps={self.steps}; {self.done + n} steps would pass it")
        if self.done + n > self.recorder.safe_until():
            raise RecordingError(f"a launch of {n} steps is longer than the rings hold between copies out "
                                 f"({self.recorder.safe_until() - self.done} steps now): launch fewer steps at a time")
        self.recorder.ensure_slots(self.done + 1, self.done + n)

    def after_launch(self, n: int) -> None:
        """After a launch of ``n`` steps: counts them, queues out the chunks they finished."""
        self.done += n
        self.recorder.flush_ready(self.done)

    # -- snapshots (a resumable loop's: flycuda.cli.rollout) ----------------------------------
    def state(self) -> dict:
        """What the recording's next step depends on, on the host: the steps done, the device
        counter, each stream's chunks queued out and its filling ring slot."""
        return {"done": self.done, "counter": self.counter.cpu().clone(), "streams": self.recorder.streams_state()}

    def restore(self, state: dict) -> None:
        """The recording as :meth:`state` found it (the same observables, or RecordingError)."""
        self.recorder.restore_streams(state["streams"])
        self.counter.copy_(state["counter"])
        self.done = int(state["done"])

    def rows_queued(self) -> dict:
        """Samples per stored array in the chunks queued out so far."""
        return self.recorder.rows_queued()

    # -- the end ---------------------------------------------------------------------------
    def close(self) -> Recording | None:
        """Queues out the last chunks, waits for the writer, marks the store complete
        (with the samples written so far: a loop that stopped early keeps what it ran);
        returns the :class:`Recording` (None without a store)."""
        if self.closed:
            return self.sink.recording() if self.sink is not None else None
        self.closed = True
        self.recorder.finish(self.done)
        if self.sink is None:
            return None
        self.sink.close(ok=True, steps_run=self.done)
        return self.sink.recording()

    def stop(self, status: str) -> None:
        """Stops early on a preemption: the samples so far queued out (the filling chunks
        too), the store marked incomplete with ``status`` (e.g. "preempted at step N (SIGTERM)")."""
        if self.closed:
            return
        self.closed = True
        try:
            self.recorder.finish(self.done)
        finally:
            if self.sink is not None:
                self.sink.close(ok=False, status=status)

    def abort(self, why: str) -> None:
        """Stops after an error: the store is marked incomplete, its finished chunks readable."""
        if self.closed:
            return
        self.closed = True
        self.recorder.abort()
        if self.sink is not None:
            self.sink.close(ok=False, why=why)

    def __enter__(self) -> LoopRecorder:
        return self

    def __exit__(self, kind, err, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.abort(f"{kind.__name__}: {err}")

    def _check_open(self) -> None:
        if self.closed:
            raise RecordingError("this LoopRecorder is closed")
