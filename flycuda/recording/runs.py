"""A recording and what its run is now: :func:`open_run` reads a store's progress
(:mod:`flycuda.recording.progress`) and says whether the run is ``complete``, ``running`` (a
live heartbeat), ``interrupted`` (a stale heartbeat, or its process gone on this host),
``preempted`` (it stopped on SIGTERM/SIGINT and said so) or ``failed`` (an error it could
name), with the valid prefix of every array."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import RecordingError, StoreError
from .progress import run_state
from .reader import Recording
from .store import progress_of, row_shapes

__all__ = ["Run", "open_run", "resumable"]


@dataclass
class Run:
    """A recording and what its run is now (see :func:`open_run`).

    Attributes:
        state: "complete", "running", "interrupted", "preempted" or "failed".
        status: the store's own status line ("running", "preempted at step N", ...).
        step: the last step every array holds every sample of (-1: none).
        rows: samples written per array (the valid prefix of each).
        heartbeat: the writer's last heartbeat (time, unix, host, pid), or {}.
        recording: the :class:`flycuda.recording.Recording` (whole arrays, NaN past the prefix).
    """

    state: str
    status: str
    step: int
    rows: dict
    heartbeat: dict
    recording: object = field(repr=False, default=None)

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def names(self) -> list[str]:
        return self.recording.names

    def read(self, name: str, worlds=slice(None)) -> np.ndarray:
        """float32 [worlds, rows, D] of ``name``: its valid prefix only."""
        n = self._rows(name)
        return np.asarray(self.recording[name].get_orthogonal_selection((worlds, slice(0, n), slice(None))))

    def _rows(self, name: str) -> int:
        self.recording[name]  # noqa: B018 - names the arrays it has, for a name it lacks
        return int(self.rows.get(name, 0))

    def line(self) -> str:
        """One line a command prints for a run that did not complete."""
        seen = ", ".join(f"{k} {v:,}/{self.recording[k].shape[1]:,}" for k, v in sorted(self.rows.items()))
        return f"the recording is {self.state} ({self.status}): its valid prefix reaches step {self.step:,} ({seen})"


def open_run(path) -> Run:
    """Opens a recording (path or zarr store) and says what its run is now, with the valid
    prefix of every array (:class:`Run`). A store written before progress was recorded, or
    by a run that closed, reads its ``rows_written`` from the arrays' attrs.

    Raises:
        RecordingError: not a flycuda recording.
    """
    rec = Recording.open(path)
    info = rec.info
    progress = info.get("progress") or {}
    shapes = row_shapes(rec.group)
    written = {n: int(progress.get("rows_written", {}).get(n, rec[n].attrs.get("rows_written", 0) or 0))
               for n in shapes}
    if info.get("complete"):
        written = {n: int(rec[n].attrs.get("rows_written", rows) or rows) for n, (rows, _) in shapes.items()}
    beat = dict(progress.get("heartbeat") or {})
    done = progress_of(shapes, written)
    return Run(run_state(info, beat), str(info.get("status", "")), done["step"], done["rows_written"], beat, rec)


def resumable(path) -> Run:
    """The run of the ``.zarr`` store at ``path``, once it is one a ``--resume`` can go on
    with: a flycuda store whose run did not complete and is not running.

    Raises:
        RecordingError: "cannot resume PATH: why", in one line.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).rstrip("/").endswith(".zarr"):
        raise RecordingError(f"resume must be the path of a .zarr store, got {path!r}")
    try:
        run = open_run(path)
    except (RecordingError, StoreError) as e:
        raise RecordingError(f"cannot resume {path}: {e}") from None
    if run.state == "complete":
        raise RecordingError(f"cannot resume {path}: its run is complete, there is nothing left to run")
    if run.state == "running":
        hb = run.heartbeat
        raise RecordingError(f"cannot resume {path}: it is still being written (pid {hb.get('pid')} on "
                             f"{hb.get('host')}, heartbeat {hb.get('time')})")
    return run
