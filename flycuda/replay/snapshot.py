"""Snapshots of a replay, and resuming one from them bit for bit.

A replay that records into a ``.zarr`` path writes, with a chunk of joint angles that ends at
a step (the first, then at most one per ``snapshot_seconds``) and when it is preempted, a snapshot of everything the next step depends on
(:meth:`flycuda.sim.stepper.Loop.state`: MuJoCo Warp's carried Data fields, the device step
counter, the recorder's filling ring slots and tracking sums) into ``STORE.resume/``, beside
the store::

    out.zarr.resume/step-000000005631.pt     torch.save of {"meta": ..., "state": ...}
    out.zarr.resume/step-000000005631.json   its marker: size and SHA-256, written last

The snapshot is queued on the store's writer thread after the chunks queued before it, so it
never claims a chunk the store lacks; its file is written, synced and renamed, then its marker
likewise, so a kill at any moment leaves either a whole snapshot or none. The latest
:data:`KEEP` are kept; a completed run removes the folder.

:func:`load_latest` reads the newest whole snapshot (falling back to the one before, and
saying so, when the newest is corrupt or half-written); :func:`check_fingerprint` refuses
one made by another flycuda, model, motion or settings, in one line, before anything runs.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field

import torch

from ..errors import ReplayError
from ..sim import preempt
from ..sim.stepper import Stage

__all__ = ["FORMAT", "KEEP", "snapshot_dir", "Snapshot", "Snapshots", "load_latest", "check_fingerprint",
           "write_snapshot", "remove_snapshots", "tensors_in"]

FORMAT = "flycuda.snapshot/1"
KEEP = 2  # snapshots kept: the newest, and one to fall back to


def snapshot_dir(store: str) -> str:
    """The folder of a store's snapshots: ``STORE.resume`` beside it."""
    return os.path.abspath(os.fspath(store)).rstrip(os.sep) + ".resume"


@dataclass
class Snapshot:
    """A snapshot read back: ``meta`` (format, fingerprint, step, rows written), ``state``
    (:meth:`Loop.state`), the file, and ``notes``: snapshots passed over, and why."""

    meta: dict
    state: dict
    path: str
    notes: list = field(default_factory=list)

    @property
    def step(self) -> int:
        return int(self.meta["step"])


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_atomic(path: str, write) -> None:
    """``write(file)`` into ``path.part``, synced, then renamed onto ``path``."""
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_snapshot(folder: str, meta: dict, state: dict, keep: int = KEEP) -> str:
    """Writes one snapshot (the file, then its marker) and removes all but the ``keep``
    newest; returns the file's path."""
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"step-{int(meta['step']):012d}")
    buf = io.BytesIO()
    torch.save({"meta": meta, "state": state}, buf)
    data = buf.getvalue()  # hashed as written, not read back
    _write_atomic(stem + ".pt", lambda f: f.write(data))
    marker = {"format": FORMAT, "step": int(meta["step"]), "bytes": len(data),
              "sha256": hashlib.sha256(data).hexdigest()}
    _write_atomic(stem + ".json", lambda f: f.write(json.dumps(marker).encode()))
    _prune(folder, keep)
    return stem + ".pt"


def _markers(folder: str) -> list[str]:
    """The markers in ``folder``, newest first."""
    return sorted(glob.glob(os.path.join(folder, "step-*.json")), reverse=True)


def _prune(folder: str, keep: int) -> None:
    for old in _markers(folder)[keep:]:
        for path in (old, old[:-len(".json")] + ".pt"):
            if os.path.exists(path):
                os.remove(path)
    newest = {os.path.basename(m).split(".")[0] for m in _markers(folder)}
    for path in glob.glob(os.path.join(folder, "step-*")):  # a kill's leftovers: .part files, unmarked files
        if os.path.basename(path).split(".")[0] not in newest:
            os.remove(path)


def remove_snapshots(store: str) -> None:
    """Removes a store's snapshots (its run completed)."""
    shutil.rmtree(snapshot_dir(store), ignore_errors=True)


def load_latest(store: str) -> Snapshot:
    """The newest whole snapshot of ``store``: its marker present, its file of the marked
    size and SHA-256, loadable (``weights_only``). Older ones serve when newer ones fail,
    each failure noted in ``notes``.

    Raises:
        ReplayError: no snapshot, or none whole.
    """
    folder = snapshot_dir(store)
    markers = _markers(folder)
    if not markers:
        raise ReplayError(f"{store} has no snapshot to resume from ({folder} holds none): it was recorded "
                          "without snapshots, or killed before its first chunk")
    notes = []
    for marker in markers:
        why = _check_marker(marker)
        if why is None:
            path = marker[:-len(".json")] + ".pt"
            try:
                doc = torch.load(path, map_location="cpu", weights_only=True)
                return Snapshot(doc["meta"], doc["state"], path, notes)
            except Exception as e:  # noqa: BLE001 - a corrupt file: the one before it serves
                why = f"unreadable ({type(e).__name__})"
        notes.append(f"snapshot {os.path.basename(marker)[:-len('.json')]} is {why}; falling back to the one before")
    raise ReplayError(f"{store}: no whole snapshot to resume from in {folder}: " + "; ".join(notes))


def _check_marker(marker: str) -> str | None:
    """Why the snapshot behind ``marker`` cannot serve, or None."""
    try:
        with open(marker) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return "marked by an unreadable marker"
    path = marker[:-len(".json")] + ".pt"
    if m.get("format") != FORMAT:
        return f"of another format ({m.get('format')!r}, this flycuda reads {FORMAT!r})"
    if not os.path.isfile(path):
        return "missing its file"
    if os.path.getsize(path) != m.get("bytes") or _sha256(path) != m.get("sha256"):
        return "corrupt or half-written (size or SHA-256 differ from its marker)"
    return None


def check_fingerprint(snapshot: Snapshot, fingerprint: dict, store: str) -> None:
    """Refuses (one line, naming the first difference) a snapshot whose run differs from this
    one in anything its steps depend on."""
    theirs = snapshot.meta.get("fingerprint", {})
    for key in [*fingerprint, *(k for k in theirs if k not in fingerprint)]:  # the weightiest first
        if theirs.get(key) == fingerprint.get(key):
            continue
        if key.endswith("_sha256"):
            raise ReplayError(f"cannot resume {store}: it was recorded with other {key[:-len('_sha256')]} (their "
                              "SHA-256 differs; resume with the settings it was recorded with)")
        raise ReplayError(f"cannot resume {store}: it was recorded with {key}={theirs.get(key)!r}, this run has "
                          f"{key}={fingerprint.get(key)!r} (resume with the settings it was recorded with)")


def store_path(target) -> str | None:
    """The path of a recording target's store, where snapshots go beside it (None: a store
    without a path, a torchrun rank other than 0's share, or no store)."""
    store = getattr(target, "store", None)
    if isinstance(store, (str, os.PathLike)) and os.fspath(store) != "memory" and target.world_offset == 0 \
            and target.finalize:
        return os.fspath(store)
    return None


def fingerprint(settings, ws, steps: int, offsets: torch.Tensor) -> dict:
    """What a replay's steps depend on besides its state: flycuda's and MuJoCo Warp's
    versions, the device kind, the model, the motion and start frames (SHA-256), the steps
    and the settings that shape them (a resumed run must match it)."""
    from ..recording.store import versions  # noqa: PLC0415

    v = versions()
    motion = ws.motion.angles.detach().cpu().contiguous()
    return {"flycuda": v.get("flycuda"), "mujoco_warp": v.get("mujoco-warp"), "device": ws.sim.device.type,
            "model": ws.model or "custom", "nq": int(ws.sim.mjm.nq), "nu": int(ws.sim.mjm.nu),
            "timestep": ws.sim.timestep, "worlds": ws.sim.nworld, "steps": int(steps), "motion": ws.motion_name,
            "motion_sha256": hashlib.sha256(motion.numpy().tobytes()).hexdigest(),
            "offsets_sha256": hashlib.sha256(offsets.detach().cpu().double().numpy().tobytes()).hexdigest(),
            "mode": settings.mode, "interp": ws.interp, "warmup": ws.warmup, "vision": str(settings.vision),
            "observe": sorted(str(o) for o in (settings.observe if not isinstance(settings.observe, str)
                                                 else [settings.observe])),
            "record_every": settings.record_every, "chunk_bytes": settings.chunk_bytes,
            "keep_state": settings.keep_state, "nconmax": settings.nconmax, "njmax": settings.njmax,
            "connectome_checkpoint": str(settings.connectome_checkpoint), "warp": v.get("warp-lang"),
            "gpu": torch.cuda.get_device_name(ws.sim.device) if ws.sim.device.type == "cuda" else None,
            "mjmodel_sha256": _model_sha(ws.sim.mjm)}


def _model_sha(mjm) -> str:
    """SHA-256 of a compiled MjModel (its binary form: every field)."""
    import mujoco  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    buf = np.zeros(mujoco.mj_sizeModel(mjm), np.uint8)
    mujoco.mj_saveModel(mjm, None, buf)
    return hashlib.sha256(buf.tobytes()).hexdigest()


def resume_from(store: str, fp: dict, target) -> Snapshot:
    """The snapshot a run resumes ``store`` from, checked against this run's fingerprint
    ``fp``; ``target`` (the store's Target) learns the rows the store holds. Says on stderr
    which snapshots it passed over."""
    import sys  # noqa: PLC0415

    snap = load_latest(store)
    for note in snap.notes:
        print(f"flycuda replay: {note}", file=sys.stderr)
    check_fingerprint(snap, fp, store)
    target.rows_written = dict(snap.meta["rows_written"])
    return snap


class Snapshots(Stage):
    """Takes a snapshot of the loop into ``folder`` each time the recording (``recording``:
    the replay's :class:`flycuda.replay.stages.Recording`) has queued out a chunk of joint
    angles, and when a preemption is asked for; written by the store's writer thread after
    those chunks. ``fingerprint``: the run's facts a snapshot is checked against."""

    def __init__(self, folder: str, fingerprint: dict, recording, min_seconds: float = 0.0):
        self.folder, self.fingerprint, self.recording = folder, fingerprint, recording
        self.min_seconds, self.last = float(min_seconds), -math.inf
        self.failures: list = []  # why snapshots could not be written (the run goes on without them)
        self.flushed = -1
        self.taken = 0
        self.bytes = 0
        self.seconds = 0.0  # host time taking them (device sync and copies), not writing them
        self.write_seconds = 0.0  # the writer thread's time writing them (file, sync, marker)
        self.file_bytes = 0  # the last one's file

    def setup(self, loop) -> None:
        self.flushed = self._angles().flushed

    def restore(self, loop, state: dict) -> None:
        self.flushed = self._angles().flushed

    def _angles(self):
        return self.recording.recorder.stream("angles")

    def after(self, loop, done: int) -> None:
        """A snapshot when a chunk of angles has gone out (at most one per ``min_seconds``), and
        always when a preemption is asked for."""
        flushed = self._angles().flushed
        asked = preempt.requested() is not None
        due = flushed > self.flushed and time.monotonic() - self.last >= self.min_seconds
        if (due or asked) and done > 0:
            self.flushed, self.last = flushed, time.monotonic()
            self.take(loop, done)

    def take(self, loop, done: int) -> None:
        t0 = time.perf_counter()
        state = loop.state()
        meta = {"format": FORMAT, "step": done, "fingerprint": self.fingerprint,
                "rows_written": self.recording.rows_queued()}
        self.bytes += sum(t.numel() * t.element_size() for t in tensors_in(state))
        self.taken += 1
        self.seconds += time.perf_counter() - t0
        self.recording.sink.writer.job(lambda: self._write(meta, state))

    def _write(self, meta: dict, state: dict) -> None:
        """In the writer thread: the snapshot to disk (timed). A failure (a full disk) is noted
        and warned of once; the recording goes on without that snapshot."""
        t0 = time.perf_counter()
        try:
            path = write_snapshot(self.folder, meta, state)
        except OSError as e:
            if not self.failures:
                warnings.warn(f"flycuda replay: cannot write a snapshot into {self.folder} ({e}); the run goes on "
                              "without it (it resumes from an older one, if any)", RuntimeWarning, stacklevel=2)
            self.failures.append(str(e))
            return
        self.write_seconds += time.perf_counter() - t0
        self.file_bytes = os.path.getsize(path)

    def summary(self) -> dict:
        """Snapshots taken, their state's bytes, the last file's bytes, the host seconds taking
        them and the writer's seconds writing them."""
        return {"taken": self.taken, "bytes": self.bytes, "file_bytes": self.file_bytes, "seconds": self.seconds,
                "write_seconds": self.write_seconds}


def tensors_in(obj):
    """Every tensor in a snapshot's state (nested dicts, lists and tuples)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from tensors_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from tensors_in(v)
