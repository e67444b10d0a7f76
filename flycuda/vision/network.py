"""flyvis's connectome-constrained network for every fly's eyes, on the device (issue 40).

* :func:`load_checkpoint`: a flyvis checkpoint's network parameters, read with
  ``torch.load(weights_only=True)`` (no flyvis, no pickled code);
* :func:`initial_parameters`: flyvis's initial (untrained) parameters, computed without flyvis;
* :func:`check_parameters`: parameters that fit a :class:`flycuda.vision.connectome.Connectome`,
  else one line naming the parameter;
* :class:`ConnectomeNetwork`: B eyes' voltages stepped by :func:`flycuda.ops.connectome_step`,
  with flyvis's initial states (``steady_state``, FlyGym 1.x's ``fade_in``);
* :func:`flyvis_column_order`: FlyGym 1.x's ``RetinaMapper``, from FlyGym's ommatidia order to
  flyvis's columns, and :func:`photoreceptors`, flycuda's ommatidia readouts as flyvis's input.

flyvis's pretrained networks come from its ``flyvis download-pretrained`` (a zip from a file
host, ``results/flow/0000/000..049/chkpts/``); flycuda never downloads: give it the path.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ..errors import VisionError
from ..ops import connectome_step
from .connectome import PARAMETERS, Connectome

__all__ = ["ConnectomeNetwork", "load_checkpoint", "initial_parameters", "check_parameters", "flyvis_weights", "flyvis_column_order",
           "photoreceptors", "GREY"]

GREY = 0.5
"""flyvis's grey: the photoreceptors' input of its steady state and the middle of its fade-in."""


def _numpy_globals() -> list:
    """What a flyvis checkpoint pickles besides tensors: its validation loss, a numpy float64
    (numpy 2's module path and numpy 1's)."""
    scalar = np._core.multiarray.scalar if hasattr(np, "_core") else np.core.multiarray.scalar
    return [scalar, (scalar, "numpy.core.multiarray.scalar"), np.dtype, type(np.dtype(np.float64))]


def load_checkpoint(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The network parameters of a flyvis checkpoint (``torch.save`` of ``{"network": state_dict,
    ...}``: flyvis's ``chkpts/chkpt_XXXXX`` and FlyGym 1.x's ``best_chkpt``) or of a bare state dict,
    on the CPU. Read with ``torch.load(weights_only=True)``: tensors and numpy scalars only.

    Raises:
        VisionError: no such file, or not a checkpoint of flyvis's network.
    """
    if not os.path.isfile(path):
        raise VisionError(f"flyvis checkpoint {os.fspath(path)!r} does not exist")
    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (pickle's and torch's errors, in one line)
        raise VisionError(f"{os.fspath(path)!r} is not a flyvis checkpoint torch.load can read with "
                          f"weights_only=True: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    sd = obj.get("network", obj) if isinstance(obj, dict) else None
    if not isinstance(sd, dict) or not any(k in sd for k in PARAMETERS):
        raise VisionError(f"{os.fspath(path)!r} holds no flyvis network parameters ({', '.join(PARAMETERS)})")
    return dict(sd)


def _group_means(values: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """Each group's mean in float64, its sum exactly rounded (math.fsum; pandas' groupby mean sums
    with Kahan's compensation, which rounds the same here)."""
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(n + 1))
    v = values[order].astype(np.float64)
    return np.array([math.fsum(v[bounds[i]:bounds[i + 1]]) / (bounds[i + 1] - bounds[i]) for i in range(n)])


def initial_parameters(connectome: Connectome) -> dict[str, torch.Tensor]:
    """flyvis's initial (untrained) parameters of its default network, without flyvis
    (``flyvis/network/initialization.py``): resting potentials drawn from Normal(0.5, 0.05) by a
    CPU generator seeded 0 (flyvis's on a machine without CUDA; with one, flyvis draws on the GPU,
    other values), time constants 0.05 s, each edge type's sign, ``log`` of each (type, offset)
    group's mean synapse count, and ``0.01 /`` each edge type's mean count as its strength."""
    T, G, S = (connectome.parameter_shapes()[k][0] for k in ("nodes_bias", "edges_sign", "edges_syn_count"))
    g = torch.Generator().manual_seed(0)
    bias = torch.normal(torch.tensor(np.repeat(0.5, T)).float(), torch.tensor(np.repeat(0.05, T)).float(), generator=g)
    first = np.unique(connectome.edge_type, return_index=True)[1]
    return {"nodes_bias": bias, "nodes_time_const": torch.tensor(np.repeat(0.05, T)).float(),
            "edges_sign": torch.as_tensor(connectome.sign[first]),
            "edges_syn_count": torch.tensor(np.log(_group_means(connectome.n_syn, connectome.syn_group, S))).float(),
            "edges_syn_strength": torch.tensor(0.01 / _group_means(connectome.n_syn, connectome.edge_type, G)).float()}


def check_parameters(connectome: Connectome, params: dict) -> dict[str, torch.Tensor]:
    """``params`` as float32 CPU tensors, checked against ``connectome``'s parameter groups.

    Raises:
        VisionError: a parameter missing, unexpected, of the wrong shape or not finite (one line
            naming it).
    """
    shapes = connectome.parameter_shapes()
    extra = sorted(set(params) - set(PARAMETERS))
    if extra:
        raise VisionError(f"unexpected parameter {extra[0]!r}: flyvis's network has {', '.join(PARAMETERS)}")
    out = {}
    for name in PARAMETERS:
        if name not in params:
            raise VisionError(f"parameter {name!r} is missing (flyvis's network has {', '.join(PARAMETERS)})")
        t = torch.as_tensor(params[name]).detach().to("cpu", torch.float32)
        if tuple(t.shape) != shapes[name]:
            raise VisionError(f"parameter {name!r} has shape {tuple(t.shape)}; the connectome needs {shapes[name]}")
        if not torch.isfinite(t).all():
            raise VisionError(f"parameter {name!r} holds a non-finite value")
        out[name] = t
    return out


def flyvis_weights(connectome: Connectome, params: dict) -> torch.Tensor:
    """Each edge's weight [E] in flyvis's edge order, as flyvis computes it at every forward
    (on the CPU, in float32): ``(sign * exp(syn_count)) * syn_strength``, the count's exp taken
    per group before the gather, the strength clamped to >= 0 (flyvis's ``Network.clamp``)."""
    et, sg = torch.as_tensor(connectome.edge_type), torch.as_tensor(connectome.syn_group)
    strength = params["edges_syn_strength"].clamp(min=0)
    return (params["edges_sign"].index_select(-1, et) * params["edges_syn_count"].exp().index_select(-1, sg)
            * strength.index_select(-1, et))


class ConnectomeNetwork:
    """flyvis's network for ``batch`` eyes on ``device``, one :func:`flycuda.ops.connectome_step`
    per step (capturable: buffers made here; :meth:`run` alternates two voltage buffers and
    leaves the result in :attr:`voltages`, the same tensor throughout).

    The edges are kept as rows in flyvis's per-node order (:meth:`Connectome.rows`), their
    weights computed once as flyvis does (:func:`flyvis_weights`): 12 MB for the network, shared
    by every eye; each eye's state is its N voltages (183 KB), twice (the step reads the old ones).

    Args:
        connectome: the structure (:meth:`Connectome.build`).
        params: the parameters (:func:`load_checkpoint`, or flyvis's ``Network.state_dict()``).
        batch: eyes (2 per fly: left, right).
        dt: the network's step (s): flyvis trained at 0.02, FlyGym 1.x stepped at 1 / 500.
        device: where the state and tables live.
    """

    def __init__(self, connectome: Connectome, params: dict, batch: int, *, dt: float, device=None):
        if not (isinstance(batch, int) and batch >= 1) or not (isinstance(dt, float | int) and 0 < dt < 1):
            raise VisionError(f"ConnectomeNetwork needs batch >= 1 and 0 < dt < 1 s, got batch={batch!r}, dt={dt!r}")
        p = check_parameters(connectome, params)
        dev = torch.device(device) if device is not None else torch.device("cpu")
        order, rowptr = connectome.rows()
        nodes = torch.as_tensor(connectome.node_type, dtype=torch.int64)
        self.connectome, self.batch, self.dt, self.device = connectome, batch, float(dt), dev
        self.input_nodes, self.columns = connectome.input_layout()
        self.rowptr = torch.as_tensor(rowptr, dtype=torch.int32).to(dev)
        self.src = torch.as_tensor(connectome.source[order], dtype=torch.int32).to(dev)
        self.weight = flyvis_weights(connectome, p)[torch.as_tensor(order)].to(dev)
        self.bias = p["nodes_bias"].index_select(0, nodes).to(dev)
        self.tau = p["nodes_time_const"].index_select(0, nodes).to(dev)
        N = connectome.num_nodes
        self._v = torch.empty(N, batch, device=dev).t()  # node-major: the kernel's gathers coalesce
        self._next = torch.empty(N, batch, device=dev).t()
        self._stimulus = torch.empty(batch, self.columns, device=dev)
        self.reset()

    @property
    def voltages(self) -> torch.Tensor:
        """float32 [B, N]: every eye's node voltages now (flyvis's "activity"; a view, updated in place)."""
        return self._v

    def tensors(self) -> list:
        """Every tensor the network holds (its tables, both voltage buffers, its stimulus): its memory."""
        return [self.rowptr, self.src, self.weight, self.bias, self.tau, self._v, self._next, self._stimulus]

    def reset(self) -> None:
        """Every eye at its nodes' resting potentials (flyvis's initial state, before any input)."""
        self._v.copy_(self.bias.expand_as(self._v))

    def step(self, stimulus: torch.Tensor) -> torch.Tensor:
        """One step of ``dt`` with ``stimulus`` [B, 721] (flyvis's column order; each column's value
        to R1-R8); returns :attr:`voltages`."""
        return self.run(stimulus, 1)

    def run(self, stimulus: torch.Tensor, steps: int) -> torch.Tensor:
        """``steps`` steps on one ``stimulus``, the two voltage buffers taking turns (one copy into
        :attr:`voltages` at the end when ``steps`` is odd); returns :attr:`voltages`."""
        self._check_stimulus(stimulus)
        now, nxt = self._v, self._next
        for _ in range(steps):
            connectome_step(now, stimulus, self.rowptr, self.src, self.weight, self.bias, self.tau, nxt, dt=self.dt,
                            input_nodes=self.input_nodes)
            now, nxt = nxt, now
        if now is not self._v:
            self._v.copy_(now)
        return self._v

    def _check_stimulus(self, stimulus) -> None:
        """Exactly [batch, columns]: one value per column for R1-R8. The op alone takes any width
        that divides the input nodes (two eyes' readouts flattened into 1,442 columns would feed R1
        the wrong columns): flyvis refuses them, and so does the network."""
        shape = tuple(stimulus.shape) if isinstance(stimulus, torch.Tensor) else None
        if shape != (self.batch, self.columns):
            got = f"shape {list(shape)}" if shape is not None else type(stimulus).__name__
            raise VisionError(f"stimulus must be [batch, columns] = [{self.batch}, {self.columns}] (one value per "
                              f"column, flyvis's column order), got {got}")

    def steady_state(self, value: float = GREY, seconds: float = 1.0) -> torch.Tensor:
        """flyvis's ``steady_state``: from rest, ``int(seconds / dt)`` steps of a uniform ``value``
        (flyvis's ``simulate`` starts movies here)."""
        self.reset()
        self._stimulus.fill_(value)
        for _ in range(int(seconds / self.dt)):
            self.step(self._stimulus)
        return self._v

    def fade_in(self, frames: torch.Tensor, seconds: float = 1.0) -> torch.Tensor:
        """flyvis's ``fade_in_state`` (FlyGym 1.x's start): from rest, ``T = int(seconds / dt)``
        steps of ``linspace(0, 1, T)[t] * (frames - 0.5) + 0.5``, ``frames`` [B, 721]."""
        self.reset()
        T = int(seconds / self.dt)
        ramp = torch.linspace(0, 1, T)
        for t in range(T):
            torch.sub(frames, GREY, out=self._stimulus)
            self._stimulus.mul_(ramp[t].item()).add_(GREY)
            self.step(self._stimulus)
        return self._v

    def nodes(self, cell_type: str, central: bool = False) -> torch.Tensor:
        """int64 indices (on the device) of ``cell_type``'s nodes, or of its central column's."""
        c = self.connectome
        ids = [c.central_node(cell_type)] if central else c.nodes_of(cell_type)
        return torch.as_tensor(np.asarray(ids), dtype=torch.int64, device=self.device)


def _box_eye_centers(extent: int = 15, kernel_size: int = 13) -> np.ndarray:
    """flyvis's ``BoxEye.receptor_centers``: (y, x) = (d (u + v / 2), d v) per column in flyvis's
    order, truncated toward zero (``torch.long``)."""
    d = kernel_size
    yx = [(d * (u + v / 2), d * v) for u in range(-extent, extent + 1)
          for v in range(max(-extent, -extent - u), min(extent, extent - u) + 1)]
    return torch.tensor(yx, dtype=torch.long).numpy()


def flyvis_column_order(id_map: np.ndarray) -> np.ndarray:
    """FlyGym 1.x's ``RetinaMapper`` (``examples/vision/vision_network.py``): for each of flyvis's
    721 columns, the FlyGym ommatidium it reads (``flygym_to_flyvis(x) = x[..., order]``), from
    FlyGym's ommatidia id map (:attr:`flycuda.vision.RetinaMap.id_map`): an affine map from
    flyvis's receptor centers to the map's pixels through the corner ommatidia, truncated to
    pixels as 1.x does."""
    centers = _box_eye_centers()
    cols = np.unique(centers[:, 1])
    left, right = centers[centers[:, 1] == cols[0]], centers[centers[:, 1] == cols[-1]]
    a = np.array([left[:, 0].min(), cols[0]])
    b = np.array([right[:, 0].max(), cols[-1]])
    ra, ca = np.where(id_map == 1)
    rb, cb = np.where(id_map == id_map.max())
    ga, gb = np.array([ra.mean(), ca.mean()]), np.array([rb.mean(), cb.mean()])
    row_k = (gb[0] - ga[0]) / (b[0] - a[0])
    col_k = (gb[1] - ga[1]) / (b[1] - a[1])
    pix = np.empty_like(centers)  # int64: 1.x truncates the mapped centers so
    pix[:, 0] = row_k * centers[:, 0] + (ga[0] - row_k * a[0])
    pix[:, 1] = col_k * centers[:, 1] + (ga[1] - col_k * a[1])
    order = np.array([id_map[r, c] for r, c in pix], dtype=np.int64) - 1
    if sorted(order.tolist()) != list(range(len(order))):
        raise VisionError("the ommatidia id map does not map one to one onto flyvis's 721 columns")
    return order


def photoreceptors(readouts: torch.Tensor, order: torch.Tensor, out: torch.Tensor, scratch: torch.Tensor
                   ) -> torch.Tensor:
    """flycuda's ommatidia readouts [W, 2, 721, 2] (FlyGym's order, one channel per ommatidium
    nonzero) as flyvis's input ``out`` [W * 2, 721]: FlyGym 1.x's ``max`` over the two channels
    (into ``scratch`` [W, 2, 721]), then its ``RetinaMapper`` (``order``: :func:`flyvis_column_order`
    on the device). In place, no allocation (capturable)."""
    torch.amax(readouts, dim=3, out=scratch)
    torch.index_select(scratch, 2, order, out=out.view(scratch.shape))
    return out
