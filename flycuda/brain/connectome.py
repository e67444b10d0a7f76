"""The whole-brain connectivity: FlyWire v783's files as philshiu/Drosophila_brain_model reads them
(``Completeness_783.csv``: one row per neuron, its FlyWire root id the index; and
``Connectivity_783.parquet``: ``Presynaptic_Index``, ``Postsynaptic_Index``, ``Excitatory x
Connectivity``, the signed synapse count), held once for every brain as a presynaptic CSR; and a
generator of synthetic connectomes in the same format, for tests and benchmarks.

The files are downloads (about 100 MB: https://github.com/philshiu/Drosophila_brain_model, or
FlyWire's Codex, https://codex.flywire.ai); :meth:`Connectome.load` reads them from a folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import FlycudaError

__all__ = ["Connectome", "COMPLETENESS", "CONNECTIVITY", "synthetic"]

COMPLETENESS = "Completeness_783.csv"
CONNECTIVITY = "Connectivity_783.parquet"
COLUMNS = ("Presynaptic_Index", "Postsynaptic_Index", "Excitatory x Connectivity")
WHERE = ("the FlyWire v783 files of philshiu/Drosophila_brain_model (Completeness_783.csv, "
         "Connectivity_783.parquet: https://github.com/philshiu/Drosophila_brain_model)")


@dataclass
class Connectome:
    """N neurons and E synapses as a CSR by presynaptic neuron (each neuron's synapses in the
    files' order): ``rowptr`` int32 [N + 1], ``post`` int32 [E], ``count`` int32 [E] (signed
    synapse counts); ``root_ids`` int64 [N], the FlyWire root id of each neuron (index i is
    model.py's Brian2 index); ``synthetic``: generated, not FlyWire's."""

    root_ids: np.ndarray
    rowptr: torch.Tensor
    post: torch.Tensor
    count: torch.Tensor
    synthetic: bool = False

    @property
    def N(self) -> int:
        """Neurons."""
        return len(self.root_ids)

    @property
    def E(self) -> int:
        """Synapses (connections: each carries its signed synapse count)."""
        return int(self.post.shape[0])

    @classmethod
    def from_edges(cls, root_ids, pre, post, count, *, synthetic: bool = False) -> "Connectome":
        """From edge lists (Brian2 indices ``pre``/``post`` in [0, N), signed ``count``)."""
        root_ids = np.asarray(root_ids, dtype=np.int64)
        pre, post, count = (np.asarray(x, dtype=np.int64) for x in (pre, post, count))
        N = len(root_ids)
        if not (len(pre) == len(post) == len(count)):
            raise FlycudaError(f"connectome: pre, post and count must have one length, got {len(pre)}, {len(post)}, "
                               f"{len(count)}")
        for name, x in (("pre", pre), ("post", post)):
            if len(x) and (x.min() < 0 or x.max() >= N):
                raise FlycudaError(f"connectome: {name} indices must lie in [0, {N}), got [{x.min()}, {x.max()}]")
        if len(count) and np.abs(count).max() >= 2 ** 31:
            raise FlycudaError("connectome: synapse counts must fit int32")
        order = np.argsort(pre, kind="stable")
        rowptr = np.zeros(N + 1, np.int64)
        np.cumsum(np.bincount(pre, minlength=N), out=rowptr[1:])
        as32 = lambda x: torch.from_numpy(np.ascontiguousarray(x, dtype=np.int32))  # noqa: E731
        return cls(root_ids, as32(rowptr), as32(post[order]), as32(count[order]), synthetic)

    @classmethod
    def load(cls, folder: str) -> "Connectome":
        """Reads ``folder``/Completeness_783.csv and ``folder``/Connectivity_783.parquet (or a
        synthetic pair written by :meth:`write`)."""
        comp, conn = os.path.join(folder, COMPLETENESS), os.path.join(folder, CONNECTIVITY)
        missing = [p for p in (comp, conn) if not os.path.exists(p)]
        if missing:
            raise FlycudaError(f"connectome: {missing[0]} not found; flycuda.brain needs {WHERE}")
        import pandas as pd  # noqa: PLC0415  (only to read the files)

        ids = pd.read_csv(comp, index_col=0).index.to_numpy(np.int64)
        df = pd.read_parquet(conn)
        absent = [c for c in COLUMNS if c not in df.columns]
        if absent:
            raise FlycudaError(f"connectome: {conn} has no column {absent[0]!r} (expected {', '.join(COLUMNS)})")
        synth = os.path.exists(os.path.join(folder, "SYNTHETIC"))
        return cls.from_edges(ids, *(df[c].to_numpy() for c in COLUMNS), synthetic=synth)

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pre, post, count) int64 arrays, in CSR order."""
        pre = np.repeat(np.arange(self.N), np.diff(self.rowptr.numpy()))
        return pre, self.post.numpy().astype(np.int64), self.count.numpy().astype(np.int64)

    def write(self, folder: str) -> None:
        """Writes the two files (and, for a synthetic connectome, a SYNTHETIC marker) into ``folder``."""
        import pandas as pd  # noqa: PLC0415

        os.makedirs(folder, exist_ok=True)
        pd.DataFrame({"Unnamed: 1": np.arange(self.N)}, index=pd.Index(self.root_ids, name="Root ID")).to_csv(
            os.path.join(folder, COMPLETENESS))
        pre, post, count = self.edges()
        pd.DataFrame(dict(zip(COLUMNS, (pre, post, count)))).to_parquet(os.path.join(folder, CONNECTIVITY))
        if self.synthetic:
            with open(os.path.join(folder, "SYNTHETIC"), "w") as f:
                f.write("generated by flycuda.brain.synthetic; not FlyWire's connectome\n")

    def index_of(self, root_ids) -> np.ndarray:
        """The Brian2 indices of FlyWire root ids (each must be a neuron of this connectome)."""
        lookup = {int(r): i for i, r in enumerate(self.root_ids)}
        missing = [int(r) for r in np.atleast_1d(root_ids) if int(r) not in lookup]
        if missing:
            raise FlycudaError(f"connectome: root id {missing[0]} is not one of its {self.N} neurons")
        return np.array([lookup[int(r)] for r in np.atleast_1d(root_ids)], dtype=np.int64)


def synthetic(n: int = 139_255, synapses_per_neuron: float = 108.0, *, inhibitory: float = 0.3, seed: int = 0,
              ) -> Connectome:
    """A generated connectome of FlyWire v783's scale and rough statistics (documented as
    synthetic): ``n`` neurons (139,255 as v783), lognormal out-degrees of mean
    ``synapses_per_neuron`` connections (v783: ~15 M over 139,255, about 108), uniform targets without
    self-connections, synapse counts geometric from 1 (mean 3.6, as v783's 54.5 M synapses over
    15 M connections), each neuron's sign fixed (a fraction ``inhibitory`` negative: Dale's law).
    Root ids 720575940600000000 + i."""
    rng = np.random.default_rng(seed)
    deg = rng.lognormal(mean=np.log(synapses_per_neuron) - 0.5, sigma=1.0, size=n)
    deg = np.minimum(np.round(deg).astype(np.int64), n - 1)
    pre = np.repeat(np.arange(n, dtype=np.int64), deg)
    post = rng.integers(0, n - 1, size=len(pre))
    post = post + (post >= pre)  # no self-connection
    sign = np.where(rng.random(n) < inhibitory, -1, 1)
    count = rng.geometric(1 / 3.6, size=len(pre)) * sign[pre]
    return Connectome.from_edges(720575940600000000 + np.arange(n), pre, post, count, synthetic=True)
