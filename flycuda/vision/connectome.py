"""flyvis's connectome, built without flyvis (issue 40): the nodes, edges and parameter groups of
flyvis 1.2.0's default network (TuragaLab, MIT), from its connectome file.

flyvis builds its network from ``fib25-fib19_v2.2.json`` (shipped in its wheel) with
``ConnectomeFromAvgFilters(extent=15, n_syn_fill=1)`` (``flyvis/connectome/connectome.py``):

* **Nodes**: the 65 cell types in the file's order, each a block of columns of the hexagonal
  lattice of extent 15 (721 columns; Lawf1 and Lawf2 on a stride (3, 2): 123), u ascending then v.
  45,669 nodes. R1-R8 come first: the inputs, one value per column to all eight.
* **Edges**: per edge entry of the file, in order; per offset (du, dv) (the file's, then the
  integer points inside their convex hull that the file lacks, with 1 synapse); per source node
  in node order: an edge to the node of the target type at (u + du, v + dv), dropped where
  there is none. 1,513,231 edges.
* **Parameter groups** (the checkpoint's 1-D parameters, each group numbered by first appearance in
  the edge list, as pandas' ``groupby(sort=False)``): per cell type (``nodes_bias``,
  ``nodes_time_const``), per (source type, target type) (``edges_sign``, ``edges_syn_strength``),
  per (source type, target type, dv, du) (``edges_syn_count``, the log of the mean synapse count).

flycuda never imports flyvis (``import flyvis`` sets torch's default device for the whole
process): :func:`connectome_file` finds the file in an installed flyvis wheel without importing it,
or takes a path.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass

import numpy as np

from ..errors import VisionError

__all__ = ["Connectome", "connectome_file", "CONNECTOME_FILE", "EXTENT", "PARAMETERS"]

CONNECTOME_FILE = "fib25-fib19_v2.2.json"
"""flyvis's connectome file (in its wheel, ``flyvis/connectome/``): the default network's."""
EXTENT = 15
"""The hexagonal lattice's extent of flyvis's default network: 1 + 3 * 15 * 16 = 721 columns."""
PARAMETERS = ("nodes_bias", "nodes_time_const", "edges_sign", "edges_syn_count", "edges_syn_strength")
"""The network's parameters in a flyvis checkpoint (``chkpt["network"]``), all float32 and 1-D."""


def connectome_file(path: str | os.PathLike | None = None) -> str:
    """The connectome file: ``path``, else ``$FLYCUDA_CONNECTOME``, else flyvis's in an installed
    flyvis wheel (found without importing flyvis).

    Raises:
        VisionError: the file does not exist, or none was named and flyvis is not installed.
    """
    path = path if path is not None else os.environ.get("FLYCUDA_CONNECTOME") or None
    if path is not None:
        if not os.path.isfile(path):
            raise VisionError(f"connectome file {os.fspath(path)!r} does not exist")
        return os.fspath(path)
    spec = importlib.util.find_spec("flyvis")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found = os.path.join(root, "connectome", CONNECTOME_FILE)
        if os.path.isfile(found):
            return found
    raise VisionError(f"no connectome file: pass the path to flyvis's {CONNECTOME_FILE} (or set FLYCUDA_CONNECTOME), "
                      f"or install the flyvis wheel that ships it (pip install --no-deps flyvis==1.2.0; flycuda does "
                      f"not import it)")


def _columns(extent: int, su: int, sv: int) -> tuple[np.ndarray, np.ndarray]:
    """The lattice's columns (u, v) on stride (su, sv), u ascending then v (flyvis's order)."""
    uv = [(u, v) for u in range(-extent, extent + 1) for v in range(max(-extent, -extent - u), min(extent, extent - u) + 1)
          if u % su == 0 and v % sv == 0]
    a = np.array(uv, dtype=np.int32).reshape(-1, 2)
    return a[:, 0], a[:, 1]


def _hull(points: np.ndarray) -> np.ndarray:
    """The convex hull's corners of integer points, counterclockwise (Andrew's monotone chain;
    points on an edge are not corners)."""
    pts = sorted(set(map(tuple, points.tolist())))
    if len(pts) < 3:
        return np.array(pts)

    def half(seq):
        out = []
        for p in seq:
            while len(out) >= 2 and ((out[-1][0] - out[-2][0]) * (p[1] - out[-2][1])
                                     - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0])) <= 0:
                out.pop()
            out.append(p)
        return out

    lower, upper = half(pts), half(reversed(pts))
    return np.array(lower[:-1] + upper[:-1])


def _fill_hull(offsets: list, n_syn_fill: float) -> list:
    """flyvis's ``fill_hull``: the offsets, then the integer points inside their convex hull that
    they lack (u-major), each with ``n_syn_fill`` synapses (matplotlib's point-in-path test, as
    flyvis)."""
    from matplotlib.path import Path  # noqa: PLC0415  (only a build needs it)

    known = np.array([o[0] for o in offsets])
    corners = _hull(known)
    if len(corners) < 3:
        return offsets
    lo, hi = known.min(0), known.max(0)
    grid = np.stack(np.meshgrid(np.arange(lo[0], hi[0] + 1), np.arange(lo[1], hi[1] + 1), indexing="ij"), -1)
    grid = grid.reshape(-1, 2)
    inside = grid[Path(corners).contains_points(grid)]
    have = set(map(tuple, known.tolist()))
    return offsets + [[[int(u), int(v)], n_syn_fill] for u, v in inside if (int(u), int(v)) not in have]


def _first_appearance(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids numbered by first appearance (pandas' groupby(sort=False)), and each group's first
    position."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


@dataclass(frozen=True)
class Connectome:
    """flyvis's default network's structure (see the module's docstring), as numpy arrays.

    Attributes:
        cell_types: the 65 cell types, in the file's (and the node parameters') order.
        input_types, output_types: the input (R1-R8) and output cell types.
        node_type: int32 [N], each node's cell type (an index into ``cell_types``).
        u, v: int32 [N], each node's column.
        source, target: int64 [E], each edge's nodes, in flyvis's edge order.
        sign, n_syn: float32 [E], each edge's sign and synapse count.
        edge_type: int64 [E], each edge's (source type, target type) group
            (``edges_sign``, ``edges_syn_strength``).
        syn_group: int64 [E], each edge's (source type, target type, dv, du) group (``edges_syn_count``).
        edge_type_keys: [(source type, target type)] per group.
        syn_group_keys: [(source type, target type, du, dv)] per group.
    """

    cell_types: tuple
    input_types: tuple
    output_types: tuple
    node_type: np.ndarray
    u: np.ndarray
    v: np.ndarray
    source: np.ndarray
    target: np.ndarray
    sign: np.ndarray
    n_syn: np.ndarray
    edge_type: np.ndarray
    syn_group: np.ndarray
    edge_type_keys: tuple
    syn_group_keys: tuple

    @classmethod
    def build(cls, path: str | os.PathLike | None = None, *, extent: int = EXTENT, n_syn_fill: float = 1.0
              ) -> "Connectome":
        """flyvis's ``ConnectomeFromAvgFilters(file, extent, n_syn_fill)`` from the connectome file
        (:func:`connectome_file`: ``path`` or flyvis's). About a second."""
        with open(connectome_file(path)) as f:
            spec = json.load(f)
        types = tuple(n["name"] for n in spec["nodes"])
        index = {t: i for i, t in enumerate(types)}
        node_type, us, vs = [], [], []
        for i, n in enumerate(spec["nodes"]):
            pattern, args = n["pattern"]
            su, sv = {"stride": lambda: args, "tile": lambda: (args, args), "single": lambda: (1, 1)}[pattern]()
            u, v = _columns(0 if pattern == "single" else extent, su, sv)
            node_type.append(np.full(len(u), i, np.int32)), us.append(u), vs.append(v)
        node_type, u, v = np.concatenate(node_type), np.concatenate(us), np.concatenate(vs)
        lookup = np.full((len(types), 2 * extent + 1, 2 * extent + 1), -1, np.int64)
        lookup[node_type, u + extent, v + extent] = np.arange(len(u))
        members = [np.flatnonzero(node_type == i) for i in range(len(types))]
        parts = [[] for _ in range(4)]  # source, target, sign, n_syn
        for e in spec["edges"]:
            s, t = index[e["src"]], index[e["tar"]]
            offsets = _fill_hull(e["offsets"], n_syn_fill) if n_syn_fill > 0 and len(e["offsets"]) >= 3 else e["offsets"]
            for (du, dv), n_syn in offsets:
                src = members[s]
                tu, tv = u[src] + du, v[src] + dv
                ok = (np.abs(tu) <= extent) & (np.abs(tv) <= extent)
                tgt = np.full(len(src), -1, np.int64)
                tgt[ok] = lookup[t, tu[ok] + extent, tv[ok] + extent]
                keep = tgt >= 0
                for part, values in zip(parts, (src[keep], tgt[keep], np.full(keep.sum(), e["alpha"], np.float32),
                                                np.full(keep.sum(), n_syn, np.float32))):
                    part.append(values)
        source, target, sign, n_syn = (np.concatenate(p) for p in parts)
        st, tt = node_type[source].astype(np.int64), node_type[target].astype(np.int64)
        du, dv = (u[target] - u[source]).astype(np.int64), (v[target] - v[source]).astype(np.int64)
        edge_type, et_first = _first_appearance(st * len(types) + tt)
        span = 4 * extent + 1  # du, dv in (-2 extent, 2 extent)
        syn_group, sg_first = _first_appearance(((st * len(types) + tt) * span + dv + 2 * extent) * span + du + 2 * extent)
        name = lambda i: types[int(i)]  # noqa: E731
        return cls(cell_types=types, input_types=tuple(spec["input_units"]), output_types=tuple(spec["output_units"]),
                   node_type=node_type, u=u, v=v, source=source, target=target, sign=sign, n_syn=n_syn,
                   edge_type=edge_type, syn_group=syn_group,
                   edge_type_keys=tuple((name(st[i]), name(tt[i])) for i in et_first),
                   syn_group_keys=tuple((name(st[i]), name(tt[i]), int(du[i]), int(dv[i])) for i in sg_first))

    @property
    def num_nodes(self) -> int:
        return len(self.node_type)

    @property
    def num_edges(self) -> int:
        return len(self.source)

    def parameter_shapes(self) -> dict[str, tuple[int]]:
        """Each of :data:`PARAMETERS`' shapes for this connectome (a checkpoint must match)."""
        T, G, S = len(self.cell_types), len(self.edge_type_keys), len(self.syn_group_keys)
        return {"nodes_bias": (T,), "nodes_time_const": (T,), "edges_sign": (G,), "edges_syn_count": (S,),
                "edges_syn_strength": (G,)}

    def nodes_of(self, cell_type: str) -> np.ndarray:
        """The nodes of ``cell_type`` (int64, in column order).

        Raises:
            VisionError: an unknown cell type (the message lists the valid ones).
        """
        if cell_type not in self.cell_types:
            raise VisionError(f"unknown cell type {cell_type!r}; the cell types are: {', '.join(self.cell_types)}")
        return np.flatnonzero(self.node_type == self.cell_types.index(cell_type))

    def central_node(self, cell_type: str) -> int:
        """The node of ``cell_type`` at the central column (u, v) = (0, 0)."""
        nodes = self.nodes_of(cell_type)
        return int(nodes[(self.u[nodes] == 0) & (self.v[nodes] == 0)][0])

    def input_layout(self) -> tuple[int, int]:
        """(input_nodes, columns): the input types are the first blocks, each one column per
        node of the lattice, as flyvis's R1-R8 are.

        Raises:
            VisionError: they are not (a connectome file other than flyvis's layout).
        """
        C = int((self.node_type == 0).sum())
        first = self.cell_types[:len(self.input_types)]
        ok = tuple(first) == tuple(self.input_types) and all((self.node_type == i).sum() == C for i in range(len(first)))
        if not ok:
            raise VisionError(f"the input cell types {self.input_types} must be the first blocks, each of {C} columns")
        return C * len(first), C

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, rowptr): the edges stably sorted by target (each node's inputs in flyvis's
        edge order, the order its CPU scatter_add_ sums them) and the CSR offsets [N + 1]."""
        order = np.argsort(self.target, kind="stable")
        rowptr = np.zeros(self.num_nodes + 1, np.int64)
        rowptr[1:] = np.cumsum(np.bincount(self.target, minlength=self.num_nodes))
        return order, rowptr
