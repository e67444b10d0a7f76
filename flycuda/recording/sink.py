"""The one way a recording's store is opened and closed, for a replay and a
:class:`flycuda.recording.LoopRecorder` alike: created with one array per observable (or
joined, for a torchrun rank whose store another rank created), its writer attached to the
:class:`Recorder`, and closed complete (with the run's facts) or incomplete (with the reason)."""

from __future__ import annotations

import os

from . import store as zstore
from .reader import Recording, Target

__all__ = ["Sink", "open_sink", "target_of"]


def target_of(record, overwrite: bool = False) -> Target | None:
    """Where a recording goes (None: nowhere): ``record`` as a :class:`Target` (a path, a
    zarr store, "memory", or a Target); a path is checked now, before anything is built."""
    if record is None or isinstance(record, Target):
        target = record
    else:
        target = Target(store=record, overwrite=overwrite)
    if target is not None and target.group is None and target.create \
            and isinstance(target.store, (str, os.PathLike)) and target.store != "memory":
        zstore.check_path(os.fspath(target.store), target.overwrite)
    return target


class Sink:
    """A store that a :class:`Recorder` streams into: ``group`` (zarr) and its ``writer``."""

    def __init__(self, target: Target, group, writer):
        self.target, self.group, self.writer = target, group, writer

    def close(self, ok: bool, why: str = "", status: str | None = None, **facts) -> None:
        """Drains the writer and marks the store: complete with ``facts`` (unless the target
        leaves that to another rank), or incomplete with ``why`` (``status``: the whole status
        line instead, e.g. "preempted at step N"); written chunks stay readable."""
        zstore.close(self.group, self.writer, ok=ok, why=why, status=status, mark_complete=self.target.finalize,
                     **(facts if ok else {}))

    def recording(self) -> Recording:
        """The store, read lazily."""
        return Recording(self.group)


def open_sink(target: Target, recorder, facts: dict, worlds: int, device) -> Sink:
    """Opens ``target`` for ``recorder``'s ``worlds`` worlds (``target.worlds_total`` in all
    under torchrun): created with ``facts`` (unless the target brings its group or another
    rank creates it), met by every rank (``target.sync``), the writer attached."""
    group = target.group
    if group is None and target.create:
        W = target.worlds_total or worlds
        group = zstore.create(target.zarr_store(), recorder.array_specs(W, target.world_chunk or W),
                              {**facts, **target.attrs}, overwrite=target.overwrite)
    if target.sync is not None:
        target.sync()  # torchrun: the store exists for every rank past this point
    if group is None:
        group = zstore.open_store(target.zarr_store(), "r+")
    if target.rows_written is not None:  # resumed: the store must be the one this run writes
        W = target.worlds_total or worlds
        zstore.check_layout(group, recorder.array_specs(W, target.world_chunk or W))
        zstore.mark(group, complete=False, status="running")  # live again: a second --resume is refused
    writer = zstore.Writer(group, device=device, progress=target.world_offset == 0,  # torchrun: rank 0 reports
                           rows=target.rows_written)
    recorder.attach(writer, target.world_offset)
    return Sink(target, group, writer)
