"""Recordings on disk: a zarr v3 group, one array per observable, and its writer.

Layout of a store (readable with zarr, xarray or dask, without flycuda)::
    out.zarr/                  group; attrs["flycuda"]: run facts (see create)
      angles   [world, time, column] float32, chunks (worlds per chunk, rows per chunk, D)
      targets  [world, time, column] the targets applied at the same steps
      qpos, body_pos, sensor, ...      one per observable, each at its own rate

Each array's attrs hold ``columns`` (names), ``every`` (steps per sample),
``timestep``; sample k of an array is the state after ``k * every`` steps.
Missing samples read as NaN (the fill value).

A store is created with ``complete: false`` and ``status: "running"``; only a run
that finished on every rank marks it ``complete: true``. A run that fails
(exception, Ctrl-C, a failed rank) marks it ``status: "incomplete: <why>"`` with the
samples written so far per array (``rows_written``), so its complete chunks stay
readable and it never looks whole. Ranks write disjoint chunks of one store
concurrently (world chunks never straddle two ranks), which needs no locks.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import queue
import shutil
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
import torch

from ..errors import StoreError
from .progress import HEARTBEAT_S, heartbeat, valid_step

__all__ = ["StoreError", "ArraySpec", "command_line", "as_command", "check_path", "check_layout", "row_shapes", "progress_of", "create", "open_store", "close", "mark", "Writer", "world_chunk", "FORMAT", "UNITS", "data_arrays", "memory_store",
           "consolidate", "zarr_module"]

FORMAT = "flycuda.recording/1"
# units of each kind of array (MuJoCo's, as the model has them: NeuroMechFly's lengths are mm)
UNITS = {"angles": "rad", "targets": "rad", "ctrl": "the actuators' (rad for position actuators)",
         "qpos": "the model's length unit (free joints), rad (hinges), 1 (quaternions)",
         "qvel": "the model's length unit / s, rad / s", "body_pos": "the model's length unit",
         "body_quat": "1 (w, x, y, z)", "sensor": "the sensors' own", "actuator_force": "N, or N x length (hinges)",
         "vision": "1 (brightness, 0..1)"}


@dataclass
class ArraySpec:
    """One array of a store: [worlds, rows, len(columns)], chunked (world_chunk, rows_chunk, D),
    with dimensions (world, NAME_time, NAME_column) and those as coordinates (seconds; the
    column names), so xarray opens the store as one Dataset."""

    name: str
    worlds: int
    rows: int
    columns: list
    every: int
    world_chunk: int
    rows_chunk: int
    observable: str = ""  # the spec it was recorded from (flycuda.recording.observables)
    attrs: dict = field(default_factory=dict)  # more attrs (e.g. vision's sample shape and mode)


def zarr_module():
    """The zarr package (imported on first use: only stores need it).

    Raises:
        StoreError: zarr is not installed.
    """
    try:
        import zarr  # noqa: PLC0415  (lazy: only stores need zarr)
    except ImportError:  # pragma: no cover - a pinned dependency
        raise StoreError("zarr is not installed; pip install zarr (flycuda's recordings are zarr v3 stores)") from None
    return zarr


def memory_store():
    """An in-memory zarr store (small runs: ``record="memory"``)."""
    return zarr_module().storage.MemoryStore()


def _is_path(target) -> bool:
    return isinstance(target, (str, os.PathLike))


def check_path(path: str, overwrite: bool) -> None:
    """Refuses an existing store unless ``overwrite`` (and anything that is not a store),
    and an output folder that is missing or not writable. Changes nothing."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StoreError(f"cannot create recording {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise StoreError(f"cannot create recording {path}: folder {parent} is not writable")
    if os.path.lexists(path):
        if not overwrite:
            raise StoreError(f"recording {path} already exists; pass --overwrite (overwrite=True) to replace it")
        if not os.path.isfile(os.path.join(path, "zarr.json")):
            raise StoreError(f"{path} exists and is not a zarr store; refusing to overwrite it")


def _prepare_path(path: str, overwrite: bool) -> None:
    """check_path, then removes the store being overwritten."""
    check_path(path, overwrite)
    if os.path.lexists(path):
        shutil.rmtree(path)


def versions() -> dict:
    """Versions of what produced a recording."""
    out = {}
    for pkg in ("flycuda", "torch", "mujoco", "mujoco-warp", "warp-lang", "flygym", "zarr"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


_COMMAND: list = []  # the command line a store records (the CLI's, where main() was given one)


def command_line() -> list:
    """The command line a new store records (its ``command``: what ``--resume`` runs again):
    the one the ``flycuda`` command was given (``flycuda.cli.main``), else ``sys.argv``."""
    return list(_COMMAND[-1]) if _COMMAND else list(sys.argv)


@contextlib.contextmanager
def as_command(argv: list):
    """Stores made inside the block record ``argv`` as their command line."""
    _COMMAND.append(list(argv))
    try:
        yield
    finally:
        _COMMAND.pop()


def create(target, arrays: list[ArraySpec], attrs: dict, *, overwrite: bool = False):
    """Creates a store at ``target`` (a path, or any zarr store such as
    ``zarr.storage.MemoryStore()``) holding ``arrays``; returns the zarr group.

    ``attrs`` (JSON) go under ``attrs["flycuda"]`` with the format, versions, the
    command line, the creation time and ``complete: false``."""
    zarr = zarr_module()
    if _is_path(target):
        target = os.fspath(target)
        _prepare_path(target, overwrite)
    try:
        group = zarr.open_group(target, mode="w")
        worlds = max((a.worlds for a in arrays), default=0)
        _coordinate(group, "world", np.arange(worlds, dtype=np.int64), {"long_name": "world index"})
        for a in arrays:
            kind = (a.observable or a.name).split(":")[0].split("@")[0]
            group.create_array(
                a.name, shape=(a.worlds, a.rows, len(a.columns)), dtype="float32", fill_value=math.nan,
                chunks=(a.world_chunk, a.rows_chunk, max(1, len(a.columns))),
                dimension_names=("world", f"{a.name}_time", f"{a.name}_column"),
                attributes={"columns": list(a.columns), "every": a.every, "units": UNITS.get(kind, ""),
                            "timestep": attrs.get("timestep"), "observable": a.observable, "rows_written": 0,
                            **a.attrs})  # an observable's own attrs (its units per column, ...) win
            times = np.arange(a.rows, dtype=np.float64) * a.every * float(attrs.get("timestep") or 0.0)
            _coordinate(group, f"{a.name}_time", times, {"units": "s", "long_name": f"time of each {a.name} sample"})
            _coordinate(group, f"{a.name}_column", np.array(list(a.columns), dtype=str), {"long_name": "column"})
        group.attrs["flycuda"] = {
            "format": FORMAT, **attrs, "versions": versions(), "command": command_line(),
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "complete": False, "status": "running"}
        consolidate(group)
    except OSError as e:
        raise StoreError(f"cannot create recording {target}: {e}") from None
    return group


def _coordinate(group, name: str, values: np.ndarray, attrs: dict) -> None:
    """A 1-D coordinate array named as its dimension (xarray makes it the dimension's index)."""
    arr = group.create_array(name, shape=values.shape, dtype=values.dtype if values.dtype.kind != "U" else str,
                             dimension_names=(name,), attributes=attrs)
    arr[...] = values


def check_layout(group, arrays: list[ArraySpec]) -> None:
    """Refuses (one line, naming the first difference) a store whose arrays are not
    ``arrays``: names, shapes, chunks and columns (a resumed run writes on into it)."""
    have = data_arrays(group)
    want = sorted(a.name for a in arrays)
    if have != want:
        raise StoreError(f"the store holds {', '.join(have)}, this run records {', '.join(want)}")
    for a in arrays:
        arr = group[a.name]
        shape, chunks = (a.worlds, a.rows, len(a.columns)), (a.world_chunk, a.rows_chunk, max(1, len(a.columns)))
        if tuple(arr.shape) != shape or tuple(arr.chunks) != chunks:
            raise StoreError(f"the store's {a.name} is {tuple(arr.shape)} in chunks {tuple(arr.chunks)}, this run's "
                             f"{shape} in chunks {chunks}")
        if list(arr.attrs.get("columns", [])) != list(a.columns):
            raise StoreError(f"the store's {a.name} has other columns than this run's")


def row_shapes(group) -> dict:
    """Each recorded array's (samples in all, steps per sample)."""
    return {n: (int(group[n].shape[1]), int(group[n].attrs.get("every", 1))) for n in data_arrays(group)}


def progress_of(shapes: dict, rows_written: dict) -> dict:
    """``rows_written`` per array (of :func:`row_shapes`' ``shapes``) and the step they reach
    (:func:`flycuda.recording.progress.valid_step`)."""
    rows = {n: int(rows_written.get(n, 0)) for n in shapes}
    return {"rows_written": rows, "step": valid_step(rows, {n: r for n, (r, _) in shapes.items()},
                                                     {n: e for n, (_, e) in shapes.items()})}


def data_arrays(group) -> list[str]:
    """The recorded arrays of a store ([world, time, column]), without the coordinates."""
    return sorted(k for k, a in group.arrays() if a.ndim == 3)


def consolidate(group) -> None:
    """Writes the consolidated metadata (one read opens the store in xarray); called after
    every change of attributes. flycuda itself reads each array's own metadata."""
    zarr = zarr_module()
    with warnings.catch_warnings():  # zarr v3 keeps consolidated metadata outside the spec (xarray reads it)
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(group.store, path=group.path or None)


def open_store(target, mode: str = "r"):
    """The zarr group of a flycuda recording (path or store); ``mode`` "r" or "r+"."""
    zarr = zarr_module()
    if _is_path(target) and not os.path.isfile(os.path.join(os.fspath(target), "zarr.json")):
        raise StoreError(f"no recording at {os.fspath(target)} (no zarr.json)")
    group = zarr.open_group(target, mode=mode, use_consolidated=False)  # the arrays' own, latest metadata
    info = group.attrs.get("flycuda")
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise StoreError(f"{target} is a zarr store but not a flycuda recording (attrs['flycuda'] missing)")
    return group


def close(group, writer: Writer, *, ok: bool, why: str = "", status: str | None = None, mark_complete: bool = True,
          **facts) -> None:
    """Drains ``writer`` and marks its store: complete (with ``facts``) when ``ok`` (unless
    ``mark_complete`` is False: a torchrun rank leaves that to rank 0), else incomplete with
    ``why`` (or the whole ``status`` line: "preempted at step N"); the chunks written stay
    readable either way."""
    if ok:
        writer.close()
        if mark_complete:
            mark(group, complete=True, status="complete", rows_written=writer.rows, **facts)
        return
    writer.close(raise_error=False)
    mark(group, complete=False, status=(status or f"incomplete: {why}")[:500], rows_written=writer.rows)


def mark(group, *, complete: bool, status: str, rows_written: dict | None = None, **extra) -> None:
    """Sets the store's completion mark (and each array's ``rows_written``, and the progress
    they reach: :mod:`flycuda.recording.progress`)."""
    for name, rows in (rows_written or {}).items():
        group[name].attrs["rows_written"] = int(rows)
    info = dict(group.attrs["flycuda"])
    info.update(extra, complete=bool(complete), status=status)
    if rows_written:
        info["progress"] = {**info.get("progress", {}), **progress_of(row_shapes(group), rows_written)}
    group.attrs["flycuda"] = info
    consolidate(group)


class Writer:
    """A thread that writes chunks into a store in the order they are queued.

    ``put(name, w0, k0, data, done)`` queues ``data`` (numpy [w, r, D]) for
    ``array[w0:w0+w, k0:k0+r]``; ``done()`` runs after the write (the recorder
    frees its host buffer there). ``wait`` (an optional callable) runs first in
    the thread (the CUDA copy's event); on a CUDA ``device`` the thread makes it current
    first, so that waiting creates no context on another GPU (torchrun: one GPU per
    rank, each rank's writer on its own). An error in the thread is raised by the
    next ``put`` or by ``close``. ``bytes_written``/``seconds`` measure it;
    ``rows[name]``: samples written so far (writes of an array come in order; a resumed
    run's start at the chunks already there). ``progress``: report them in the store's
    attrs (:mod:`flycuda.recording.progress`); ``job(fn)`` runs ``fn`` in order with the
    writes."""

    def __init__(self, group, max_queued: int = 64, device=None, progress: bool = True, rows: dict | None = None):
        self.group, self.bytes_written, self.seconds = group, 0, 0.0
        self.device = torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())  # the caller's, resolved here
        self.rows: dict[str, int] = {name: int((rows or {}).get(name, 0)) for name in data_arrays(group)}
        self._shapes = row_shapes(group)
        self.progress, self.progress_writes, self.progress_seconds = progress, 0, 0.0
        self._last_progress = 0.0
        self._queue: queue.Queue = queue.Queue(max_queued)
        self._error: BaseException | None = None
        self._arrays: dict = {}
        self._thread = threading.Thread(target=self._run, name="flycuda-store-writer", daemon=True)
        self._thread.start()

    def _array(self, name):
        if name not in self._arrays:
            self._arrays[name] = self.group[name]
        return self._arrays[name]

    def _run(self) -> None:
        try:
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.set_device(self.device)  # before any wait: the rank's GPU, not GPU 0
        except BaseException as e:  # noqa: BLE001 - raised by the next put or close, as any writer error
            self._error = e
        self._write_progress()  # the run is alive from its first moment
        while True:
            try:
                item = self._queue.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                self._write_progress()  # a heartbeat: alive, though no chunk came
                continue
            if item is None:
                self._write_progress()  # the last chunks' (close marks the store next)
                return
            name, w0, k0, data, wait, done = item
            try:
                if self._error is None:
                    if name is None:  # a job ordered after the chunks queued before it (a snapshot)
                        data()
                    else:
                        self._write(name, w0, k0, data, wait)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                self._error = e
            finally:
                if done is not None:
                    done()
            if self._queue.empty() or time.monotonic() - self._last_progress >= 1.0:
                self._write_progress()

    def _write(self, name, w0, k0, data, wait) -> None:
        if wait is not None:
            wait()
        t0 = time.perf_counter()
        arr = data() if callable(data) else data
        self._array(name)[w0:w0 + arr.shape[0], k0:k0 + arr.shape[1], :] = arr
        self.seconds += time.perf_counter() - t0
        self.bytes_written += arr.nbytes
        self.rows[name] = k0 + arr.shape[1]

    def _write_progress(self) -> None:
        """The store's ``progress`` (rows written, the step they reach, a heartbeat): one
        small JSON write (:mod:`flycuda.recording.progress`). Never raises: progress is a
        courtesy to readers, the chunks are what counts."""
        if not self.progress or self._error is not None:
            return
        t0 = time.perf_counter()
        try:
            info = dict(self.group.attrs["flycuda"])
            info["progress"] = {**progress_of(self._shapes, self.rows), "heartbeat": heartbeat()}
            self.group.attrs["flycuda"] = info
            consolidate(self.group)  # zarr drops the consolidated metadata on any attrs write
            self.progress_writes += 1
        except Exception:  # noqa: BLE001, S110 - a full disk shows in the next chunk's write
            pass
        self._last_progress = time.monotonic()
        self.progress_seconds += time.perf_counter() - t0

    def job(self, fn) -> None:
        """Runs ``fn()`` in the writer thread once every chunk queued before it is written
        (a snapshot that must not claim chunks the store lacks)."""
        self.put(None, 0, 0, fn)

    def _raise(self) -> None:
        if self._error is not None:
            e = self._error
            raise StoreError(f"writing the recording failed: {type(e).__name__}: {e}") from e

    def put(self, name: str, w0: int, k0: int, data, *, wait=None, done=None) -> None:
        self._raise()
        if not self._thread.is_alive():
            raise StoreError("the recording's writer is closed")
        self._queue.put((name, w0, k0, data, wait, done))

    def close(self, raise_error: bool = True) -> None:
        """Writes everything queued, stops the thread; raises a writer error."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if raise_error:
            self._raise()


def world_chunk(starts: list[int], total: int) -> int:
    """The largest world chunk that no rank boundary splits: gcd of the ranks'
    start worlds and the total (the total itself for one process)."""
    g = total
    for s in starts:
        g = math.gcd(g, s)
    return max(1, g)
