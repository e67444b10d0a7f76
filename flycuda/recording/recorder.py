"""The recording stage of a replay: observables streamed out in fixed memory.

Every observable (:mod:`flycuda.recording.observables`) has a ring of ``ring`` chunks of C
samples on the device, ``[ring, W, C, D]``, which :func:`flycuda.record_chunk`
fills inside the (captured) step at the device step counter. When a chunk is
full the host, between graph launches, queues on a side stream: wait for an
event recorded after the producing steps, copy the chunk into a pinned host
buffer (non-blocking), run the tracking error on it, record a "copied" event.
A writer thread waits for that event and appends the chunk to the store. The
simulation stream never synchronizes: before it writes a ring slot again it
waits (on the device) for the copy of that slot's previous chunk, and the host
blocks only when the writer falls ``ring`` chunks behind (backpressure). On the
CPU the same code runs with plain copies instead of streams and events.

Memory: per observable ``2 x ring x W x C x D x 4`` bytes (device ring + host
buffers), with C chosen so one chunk is about ``chunk_bytes`` (and at most
MAX_ROWS samples). Nothing grows with the number of steps beyond that. The tracking error is accumulated on the device,
chunk by chunk, against targets recomputed by the very op that wrote the
controls (same inputs, same counter values: bit-identical to what was applied).
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass

import torch

from .. import _ext, ops
from ..errors import RecordingError
from . import store as zstore
from .observables import Observable

__all__ = ["Recorder", "Tracker", "rows_per_chunk", "chunk_room", "slot_room", "chunks_complete", "CHUNK_BYTES", "RING"]

CHUNK_BYTES = 16 * 2**20  # target bytes of one chunk (device and host alike)
MAX_ROWS = 256            # samples per chunk at most (few worlds: the chunk still streams out)
RING = 2                  # chunks per observable on the device: one fills, one is copied out


def chunks_complete(done: int, rows: int, C: int, every: int) -> int:
    """Chunks of a stream (``rows`` samples, ``C`` per chunk, one every ``every`` steps)
    whose last sample is recorded once ``done`` steps have run."""
    if done < 0:
        return 0
    written = min(done // every + 1, rows)  # samples 0 .. done // every
    return -(-rows // C) if written >= rows else written // C


def slot_room(flushed: int, C: int, every: int) -> int:
    """The most steps that may run while ``flushed`` chunks of a stream have been queued out:
    every step up to the end of the chunk after the one filling now. Chunk c's slot is
    chunk c - RING's, so it may be written once that one's copy out is queued (the simulation
    stream then waits for it on the device, :meth:`Recorder.ensure_slots`), and the filling
    chunk's own copy is queued before chunk c + RING could overwrite it."""
    return (flushed + RING) * C * every - 1


def chunk_room(done: int, chunks) -> int | None:
    """The last step a launch starting after ``done`` steps may reach for streams ``chunks``
    ((rows, rows per chunk, every) each), their chunks queued out as they complete (None:
    no stream). Pure arithmetic: the launch schedule asks it at any scale."""
    return min((slot_room(chunks_complete(done, rows, C, every), C, every) for rows, C, every in chunks),
               default=None)


def rows_per_chunk(worlds: int, width: int, rows: int, chunk_bytes: int = CHUNK_BYTES, min_rows: int = 1) -> int:
    """C: samples per chunk so that [worlds, C, width] float32 is about ``chunk_bytes``,
    at most MAX_ROWS (at least ``min_rows``: a graph launch's steps), at most the run's ``rows``."""
    per_row = max(1, worlds * width * 4)
    return max(1, min(rows, max(min_rows, min(MAX_ROWS, chunk_bytes // per_row))))


@dataclass
class _Stream:
    """One observable's ring on the device, its host buffers and its progress."""

    obs: Observable
    rows: int                     # samples over the whole run
    C: int                        # samples per chunk
    ring: torch.Tensor            # [RING, W, C, D] on the device
    host: list                    # RING x [W, C, D] (pinned on CUDA), or [] without a store
    free: list                    # RING x threading.Semaphore(1): host buffer free for the next copy
    copied: list                  # RING x CUDA event of the last copy out of each slot (or None)
    flushed: int = 0              # chunks handed out so far
    ready: int = RING - 1         # the last chunk whose slot the simulation stream may write

    @property
    def chunks(self) -> int:
        return -(-self.rows // self.C)

    def last_row(self, c: int) -> int:
        return min((c + 1) * self.C, self.rows) - 1

    def record(self, step: torch.Tensor) -> None:
        """The sample at the device counter into the ring (capturable)."""
        ops.record_chunk(self.obs.source, self.obs.columns, self.ring, step, every=self.obs.every)


class Tracker:
    """Per-DOF tracking error on the device: the sum over worlds and samples after
    ``settle_row`` of (angle - target)^2 in float64, and the count of samples.

    ``targets(out, first, every)`` writes the targets at steps ``first``, ``first + every``,
    ... into ``out`` [W, C, D] (C rows: one chunk), bit for bit what the replay's targets op
    wrote at those counter values (:class:`flycuda.replay.stages.TargetRows`: one
    launch per chunk)."""

    def __init__(self, targets, worlds: int, dofs: int, rows_chunk: int, every: int, settle_row: int,
                 device: torch.device):
        self.targets, self.every, self.settle_row = targets, every, settle_row
        self.buf = torch.full((worlds, rows_chunk, dofs), math.nan, device=device)  # one chunk of targets
        self.diff = torch.empty(worlds, rows_chunk, dofs, dtype=torch.float64, device=device)  # no temporaries
        self.sq = torch.zeros(dofs, dtype=torch.float64, device=device)
        self.count = 0

    def chunk(self, angles: torch.Tensor, k0: int, n: int) -> None:
        """Targets of samples k0 .. k0+n-1 into ``self.buf[:, :n]`` and their error
        against ``angles`` ([W, >= n, D]) into the sums."""
        self.targets(self.buf, k0 * self.every, self.every)
        lo = min(max(self.settle_row - k0, 0), n)
        if lo < n:
            diff = self.diff[:, :n - lo]
            diff.copy_(angles[:, lo:n])
            diff.sub_(self.buf[:, lo:n])
            self.sq += diff.square_().sum(dim=(0, 1))
            self.count += diff.shape[0] * diff.shape[1]


class Recorder:
    """Records ``observables`` over ``steps`` steps into device rings and, with
    ``store``, streams full chunks to the writer given to :meth:`attach` (a
    :class:`flycuda.recording.store.Writer`). Without a store only the tracker (see
    :meth:`add_tracker`) sees the chunks of ``track``, the angles observable.

    Call :meth:`record` inside every step, :meth:`ensure_slots` before and
    :meth:`flush_ready` after every launch (outside any capture; at most
    :meth:`safe_until` steps before the next flush), :meth:`finish` at the end (:meth:`abort` on an error).
    ``min_rows``: steps per graph launch (chunks hold at least one launch, and a
    multiple of it where possible); ``plan_worlds``: size the chunks for this many
    worlds (torchrun: the largest rank's share, so every rank's chunks align)."""

    def __init__(self, observables: list[Observable], steps: int, device: torch.device, *, store: bool = False,
                 chunk_bytes: int = CHUNK_BYTES, min_rows: int = 1, track: str | None = None,
                 plan_worlds: int | None = None):
        self.device, self.steps, self.store, self.plan_worlds = device, steps, store, plan_worlds
        self.writer, self.world_offset = None, 0
        self.on_cuda = device.type == "cuda"
        self.copy_stream = torch.cuda.Stream(device=device) if self.on_cuda else None
        self.tracker: Tracker | None = None
        self.track = track
        self._target_host: list = []
        self._target_free: list = []
        self.streams = [self._stream(o, steps, chunk_bytes, min_rows) for o in observables]

    def _stream(self, obs: Observable, steps: int, chunk_bytes: int, min_rows: int) -> _Stream:
        W, D = obs.source.shape[0], obs.width
        rows = obs.rows(steps)
        if obs.update is not None:  # sampled between launches (flycuda.vision.stage): no launch to align with
            min_rows = 1
        C = rows_per_chunk(self.plan_worlds or W, D, rows, chunk_bytes, -(-min_rows // obs.every))
        m = min_rows // math.gcd(min_rows, obs.every)  # C * every a multiple of a launch's steps, so
        if m > 1:                                          # chunk edges of every observable align with launches
            C = min(rows, -(-C // m) * m)
        ring = torch.full((RING, W, C, D), math.nan, device=self.device)
        host = [self._host_buffer(W, C, D) for _ in range(RING)] if self.store else []
        return _Stream(obs, rows, C, ring, host, [threading.Semaphore(1) for _ in range(RING)], [None] * RING)

    def _host_buffer(self, W: int, C: int, D: int) -> torch.Tensor:
        return torch.full((W, C, D), math.nan, pin_memory=self.on_cuda)

    def attach(self, writer, world_offset: int = 0) -> None:
        """The store's writer; this process's worlds start at ``world_offset`` there."""
        if not self.store:
            raise RecordingError("this Recorder was made without store=True")
        self.writer, self.world_offset = writer, world_offset

    def add_tracker(self, targets, settle_row: int) -> Tracker:
        """Tracks the ``track`` observable against ``targets`` (see :class:`Tracker`);
        with a store, the targets are stored too (array "targets")."""
        st = self.stream(self.track)
        W, C, D = st.ring.shape[1], st.C, st.ring.shape[3]
        self.tracker = Tracker(targets, W, D, C, st.obs.every, settle_row, self.device)
        if self.store:
            self._target_host = [self._host_buffer(W, C, D) for _ in range(RING)]
            self._target_free = [threading.Semaphore(1) for _ in range(RING)]
        return self.tracker

    def stream(self, name: str) -> _Stream:
        for st in self.streams:
            if st.obs.name == name:
                return st
        raise KeyError(name)

    # -- snapshots (a resumable run's: flycuda.replay.snapshot) -------------------------
    def rows_queued(self) -> dict:
        """Samples per stream in the chunks queued out so far (the store holds them once
        the writer gets there)."""
        return {st.obs.name: min(st.flushed * st.C, st.rows) for st in self.streams}

    def streams_state(self) -> dict:
        """Each stream's chunks queued out and its filling ring slot, on the host."""
        return {st.obs.name: {"flushed": st.flushed, "slot": st.ring[st.flushed % len(st.ring)].cpu().clone()}
                for st in self.streams}

    def restore_streams(self, state: dict) -> None:
        """The streams as :meth:`streams_state` found them (the same observables, or
        RecordingError naming both lists, with nothing changed)."""
        names = sorted(st.obs.name for st in self.streams)
        if sorted(state) != names:
            raise RecordingError(f"the snapshot records {', '.join(sorted(state))}, this run {', '.join(names)}")
        for st in self.streams:
            saved = state[st.obs.name]
            st.flushed, st.ready = int(saved["flushed"]), int(saved["flushed"]) + len(st.ring) - 1
            st.ring[st.flushed % len(st.ring)].copy_(saved["slot"])

    # -- inside the step ---------------------------------------------------------------
    def record(self, step: torch.Tensor) -> None:
        """Every Data observable's sample at the device counter (capturable); those
        with an ``update`` are recorded by :meth:`record_updated`."""
        for st in self.streams:
            if st.obs.update is None:
                st.record(step)

    def record_updated(self, step: torch.Tensor, name: str) -> None:
        """Observable ``name`` (one with an ``update``): computed, then recorded at the
        device counter (capturable). Its owner calls it at the steps of its samples."""
        st = self.stream(name)
        st.obs.update()
        st.record(step)

    # -- between launches -------------------------------------------------------------
    def safe_until(self) -> int:
        """The most steps that may have run before the next :meth:`flush_ready`
        (:func:`slot_room`)."""
        return min((slot_room(st.flushed, st.C, st.obs.every) for st in self.streams), default=self.steps)

    def room(self, done: int) -> int:
        """The last step a launch starting after ``done`` steps may reach (:func:`chunk_room`
        of these streams, each chunk queued out once complete: :meth:`flush_ready`)."""
        room = chunk_room(done, [(st.rows, st.C, st.obs.every) for st in self.streams])
        return self.steps if room is None else room

    def capturing(self) -> bool:
        """Is the current stream on this recorder's device being captured into a CUDA graph?"""
        return _ext.capturing(self.device)

    def ensure_slots(self, first: int, last: int) -> None:
        """Before steps ``first`` .. ``last`` run (a launch, an eager step, a sample): the
        simulation stream waits, on the device, for the copy out of every ring slot those
        steps will write whose previous chunk was copied out. Required before every launch:
        :meth:`flush_ready` alone does not order a slot's reuse after its copy. Never inside
        a capture (the wait belongs to the launch, not to the graph)."""
        if self.capturing():
            raise RuntimeError("flycuda recorder: ensure_slots inside a CUDA graph capture; call it before the launch")
        for st in self.streams:
            if last < 0 or first > last:
                continue
            c = min(last // st.obs.every, st.rows - 1) // st.C  # the last chunk the steps write
            if c <= st.ready:
                continue
            if c > st.flushed + RING - 1:
                raise RuntimeError(f"flycuda recorder: steps up to {last} would write chunk {c} of "
                                   f"{st.obs.name!r} before chunk {c - RING}, whose slot it reuses, was queued out "
                                   f"({st.flushed} queued; steps may run up to {self.safe_until()})")
            for k in range(st.ready + 1, c + 1):
                ev = st.copied[k % RING]  # the copy out of chunk k - RING: queued, as checked above
                if ev is not None:
                    torch.cuda.current_stream(self.device).wait_event(ev)
            st.ready = c

    def flush_ready(self, done: int) -> None:
        """Queues out every chunk whose last sample is recorded after ``done`` steps."""
        for st in self.streams:
            while st.flushed < st.chunks and st.last_row(st.flushed) * st.obs.every <= done:
                self._flush(st, st.flushed)
                st.flushed += 1

    def finish(self, done: int | None = None) -> None:
        """Queues the last (partial) chunks, of a run of ``done`` steps (default all:
        one that stopped early keeps the samples it recorded); later work on the
        simulation stream is ordered after every copy out."""
        done = self.steps if done is None else done
        for st in self.streams:
            st.rows = min(st.rows, done // st.obs.every + 1)  # no chunk past the last sample taken
        self.flush_ready(done)
        self.abort()

    def array_specs(self, worlds: int, world_chunk: int | None = None) -> list:
        """The store's arrays for these streams (:class:`flycuda.recording.store.ArraySpec`):
        ``worlds`` in all (torchrun: every rank's), chunked by ``world_chunk`` worlds; with a
        tracker, its targets ("targets") right after the tracked observable."""
        wc = world_chunk or worlds
        specs = [zstore.ArraySpec(st.obs.name, worlds, st.rows, st.obs.column_names, st.obs.every, wc, st.C,
                                  st.obs.spec, st.obs.attrs) for st in self.streams]
        if self.tracker is not None:
            st = self.stream(self.track)
            specs.insert(self.streams.index(st) + 1, zstore.ArraySpec("targets", worlds, st.rows,
                                                                      st.obs.column_names, st.obs.every, wc, st.C))
        return specs

    def abort(self) -> None:
        """Later work on the simulation stream (and the memory freed with this
        recorder) waits for whatever the side stream still does (also after an error)."""
        if self.on_cuda:
            torch.cuda.current_stream(self.device).wait_stream(self.copy_stream)

    def _flush(self, st: _Stream, c: int) -> None:
        """Chunk c out of its ring slot: on CUDA on the side stream, ordered after the
        producing steps by an event, copies non-blocking; on the CPU the same, in order."""
        slot, k0 = c % RING, c * st.C
        n = st.last_row(c) + 1 - k0
        tracked = self.tracker is not None and st.obs.name == self.track
        if self.writer is None and not tracked:
            return
        sim = filled = copied = None
        if self.on_cuda:
            sim = torch.cuda.current_stream(self.device)
            filled = torch.cuda.Event(blocking=True)
            filled.record(sim)
        if st.host:
            st.free[slot].acquire()  # blocks only when the writer is RING chunks behind
        side = torch.cuda.stream(self.copy_stream) if self.on_cuda else contextlib.nullcontext()
        with side:
            if filled is not None:
                self.copy_stream.wait_event(filled)
            if st.host:  # whole slots: contiguous on both sides, so truly asynchronous
                st.host[slot].copy_(st.ring[slot], non_blocking=self.on_cuda)
            with_targets = tracked and self.writer is not None
            if tracked:
                self.tracker.chunk(st.ring[slot], k0, n)
            if with_targets:
                self._target_free[slot].acquire()
                self._target_host[slot].copy_(self.tracker.buf, non_blocking=self.on_cuda)
            if self.on_cuda:
                copied = torch.cuda.Event(blocking=True)  # the writer thread sleeps on it, not spins
                copied.record(self.copy_stream)
        if copied is not None:
            st.copied[slot] = copied  # chunk c + RING waits for it before writing (ensure_slots)
        self._queue(st, slot, k0, n, copied.synchronize if copied is not None else None, with_targets)

    def _queue(self, st: _Stream, slot: int, k0: int, n: int, wait, with_targets: bool) -> None:
        if self.writer is None:
            return
        w0 = self.world_offset
        self.writer.put(st.obs.name, w0, k0, lambda: st.host[slot][:, :n].numpy(), wait=wait,
                        done=st.free[slot].release)
        if with_targets:
            self.writer.put("targets", w0, k0, lambda: self._target_host[slot][:, :n].numpy(), wait=wait,
                            done=self._target_free[slot].release)

    def device_bytes(self) -> int:
        """Bytes of device memory the recording holds (rings, tracking buffers)."""
        n = sum(st.ring.numel() * 4 for st in self.streams)
        if self.tracker is not None:
            t = self.tracker
            n += t.buf.numel() * 4 + t.diff.numel() * 8 + t.sq.numel() * 8 + getattr(t.targets, "device_bytes", 0)
        return n

    def host_bytes(self) -> int:
        """Bytes of (pinned) host buffers."""
        n = sum(sum(h.numel() * 4 for h in st.host) for st in self.streams)
        return n + sum(h.numel() * 4 for h in self._target_host)
