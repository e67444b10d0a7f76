"""A replay's recording: where it goes (:class:`Target`) and how to read it back
(:class:`Recording`), lazily, from a zarr store (:mod:`flycuda.recording.store`).

    rec = flycuda.recording.Recording.open("out.zarr")
    rec.complete, rec.names                       # True, ['angles', 'targets', 'qpos', ...]
    rec["body_pos"][0:16, ::10]                   # numpy, read chunk by chunk from disk
    rec.columns("angles"), rec.times("qpos")      # labels, seconds of each sample

Nothing is read until asked for, so a recording larger than memory is fine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import RecordingError
from . import store as zstore

__all__ = ["Recording", "Target", "RecordingError", "parse_worlds"]


@dataclass
class Target:
    """Where a replay writes its recording.

    store: a path (``out.zarr``), a zarr store, or "memory" (a zarr MemoryStore:
    small runs only, it lives in host memory). ``group``: an already created
    store's group. Under torchrun every rank writes its worlds at ``world_offset``
    of a ``worlds_total``-world store: the rank with ``create`` creates it, then
    every rank calls ``sync()`` (a rendezvous) and the others open it.
    ``finalize``: mark the store complete when the run ends (False when the ranks
    do it together)."""

    store: object = "memory"
    overwrite: bool = False
    world_offset: int = 0
    worlds_total: int | None = None
    world_chunk: int | None = None
    group: object = None
    finalize: bool = True
    create: bool = True
    sync: object = None
    plan_worlds: int | None = None  # torchrun: size chunks for the largest rank's worlds
    rows_written: dict | None = None  # a resumed run: the samples per array its store already holds
    attrs: dict = field(default_factory=dict)

    def zarr_store(self):
        if isinstance(self.store, str) and self.store == "memory":
            return zstore.memory_store()
        return self.store


class Recording:
    """Read access to a flycuda recording (a zarr group)."""

    def __init__(self, group):
        self.group = group

    @classmethod
    def open(cls, target) -> "Recording":
        """Opens a recording (path or zarr store) for reading."""
        return cls(zstore.open_store(target, "r"))

    @property
    def info(self) -> dict:
        """The run's facts (attrs["flycuda"]): model, motion, timestep, worlds, steps,
        versions, command, complete, status."""
        return dict(self.group.attrs["flycuda"])

    @property
    def complete(self) -> bool:
        return bool(self.info.get("complete"))

    @property
    def names(self) -> list[str]:
        """The recorded arrays (not their coordinates: world, NAME_time, NAME_column)."""
        return zstore.data_arrays(self.group)

    def __getitem__(self, name: str):
        """The zarr array ``name`` [world, time, column] (index it to read)."""
        if name not in self.names:
            raise RecordingError(f"the recording has no {name!r}; it has: {', '.join(self.names)}")
        return self.group[name]

    def columns(self, name: str) -> list[str]:
        return list(self[name].attrs["columns"])

    def every(self, name: str) -> int:
        return int(self[name].attrs["every"])

    def times(self, name: str) -> np.ndarray:
        """Seconds of each sample of ``name``."""
        a = self[name]
        return np.arange(a.shape[1]) * int(a.attrs["every"]) * float(self.info["timestep"])

    def read(self, name: str, worlds=slice(None)) -> torch.Tensor:
        """float32 torch tensor of ``name`` for ``worlds`` (all samples): the whole
        [W, R, D] array unless ``worlds`` narrows it: meant for small runs or few worlds."""
        return torch.from_numpy(np.asarray(self[name][worlds]))

    def samples(self, name: str, worlds=slice(None), rows=slice(None)) -> np.ndarray:
        """float32 numpy samples of ``name`` [worlds, rows, ...], each row reshaped to
        the array's ``sample_shape`` (vision: [2, O, 2], eye, ommatidium, (yellow,
        pale)), else [D]; reads only the chunks ``worlds`` and ``rows`` touch."""
        a = self[name]
        data = np.asarray(a.get_orthogonal_selection((worlds, rows, slice(None))))
        shape = a.attrs.get("sample_shape")
        return data.reshape(*data.shape[:2], *shape) if shape else data

    def vision(self, worlds=slice(None), rows=slice(None)) -> np.ndarray:
        """The eyes' readouts float32 [worlds, rows, 2, O, 2] (``--vision``): sample k is
        FlyGym's ``get_ommatidia_readouts`` layout after ``k * every("vision")`` steps.
        All of them by default (11.5 kB per world and sample): narrow ``worlds`` and
        ``rows`` for large runs."""
        return self.samples("vision", worlds, rows)

    @property
    def recorded(self) -> torch.Tensor:
        """The driven joint angles [W, R, D] (small runs; see :meth:`read`)."""
        return self.read("angles")

    @property
    def targets(self) -> torch.Tensor:
        """The targets [W, R, D] applied at the same steps (small runs)."""
        return self.read("targets")

    def to_npz(self, path: str, extra: dict | None = None) -> None:
        """Writes the angles, targets and facts as the .npz ``--record out.npz`` writes
        (small runs: it reads every array), atomically."""
        info = self.info
        tmp = os.fspath(path) + ".part.npz"
        np.savez(tmp, recorded=np.asarray(self["angles"][:]), targets=np.asarray(self["targets"][:]),
                 dof_names=np.array(self.columns("angles")), times=self.times("angles"),
                 timestep=np.float64(info["timestep"]), worlds=np.int64(self["angles"].shape[0]),
                 **(extra or {}))
        os.replace(tmp, path)


def parse_worlds(spec, total: int) -> list[int]:
    """World indices from "0:16", "3", "1,4,9", a slice, a range or a list; checked."""
    if isinstance(spec, str):
        if ":" in spec:
            parts = [int(p) if p.strip() else None for p in spec.split(":")]
            spec = slice(*parts)
        else:
            spec = [int(p) for p in spec.split(",") if p.strip()]
    ids = list(range(total))[spec] if isinstance(spec, slice) else [int(i) for i in spec]
    bad = [i for i in ids if not 0 <= i < total]
    if not ids or bad:
        raise RecordingError(f"worlds must select from 0..{total - 1} (the recording has {total}), "
                             f"got {bad or 'none'}")
    return ids
