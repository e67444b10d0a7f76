"""flyvis's network behind both eyes of every world, fed by a :class:`flycuda.vision.Vision`'s
readouts: what the env's ``connectome`` observations (:mod:`flycuda.env.connectome`) and the
replay's ``connectome`` observables (:mod:`flycuda.vision.stage`) run.

The readouts become flyvis's input as FlyGym 1.x made them (:func:`flycuda.vision.network.photoreceptors`),
:class:`flycuda.vision.network.ConnectomeNetwork` steps both eyes of every world, and the chosen
cell types' voltages are gathered into one buffer, all on the device and in place (capturable).
"""

from __future__ import annotations

import torch

from ..errors import VisionError
from .connectome import Connectome
from .network import ConnectomeNetwork, flyvis_column_order, initial_parameters, load_checkpoint, photoreceptors

__all__ = ["EyeNetworks", "EYES", "DEFAULT_CELL_TYPES", "COLUMNS", "observed_names"]

EYES = ("left", "right")
DEFAULT_CELL_TYPES = ("T4a", "T4b", "T4c", "T4d", "T5a", "T5b", "T5c", "T5d")
"""The motion pathway's direction-selective cells: observed unless others are named."""
COLUMNS = ("central", "all")
"""Which columns of each cell type are observed: each eye's central one, or all 721."""


def observed_names(cell_types, columns: str, count: int = 721) -> list[str]:
    """The observed values' names: ``connectome:<type>:<eye>`` (central) or
    ``connectome:<type>:<eye>:<column>`` (all, flyvis's column order), eyes outermost."""
    if columns == "central":
        return [f"connectome:{t}:{eye}" for eye in EYES for t in cell_types]
    return [f"connectome:{t}:{eye}:{c}" for eye in EYES for t in cell_types for c in range(count)]


class EyeNetworks:
    """flyvis's network for both eyes of every world behind ``vision`` (buffers made here).

    Args:
        vision: a :class:`flycuda.vision.Vision` (its ``readouts`` [W, 2, 721, 2] are the input).
        dt: the network's step (s): FlyGym 1.x stepped it once per eye update (1/500 s).
        cell_types: flyvis's cell types to observe (e.g. T4a, Mi1).
        columns: ``"central"`` or ``"all"`` (:data:`COLUMNS`).
        checkpoint: a flyvis checkpoint (:func:`flycuda.vision.network.load_checkpoint`); None:
            the connectome's initial parameters.
        file: flyvis's connectome file; None: the installed flyvis wheel's or ``$FLYCUDA_CONNECTOME``.
        out: float32 [W, 2, K] to gather the observed voltages into (None: made here).

    Attributes:
        out: [W, 2, K] the observed voltages (eyes, then types, then columns).
        steady: [1, N] flyvis's steady state in grey.
        start: [2, N] where each eye (left, right) starts and restarts: the steady state, or after
            :meth:`start_in_scene` FlyGym 1.x's fade-in of a world's first frame.
        nodes: int64 [K] the observed nodes of one eye.
        cell_types, columns: what is observed (as given).

    Raises:
        VisionError: an unknown cell type (the valid ones listed), a type without one node per
            column with ``columns="all"`` (flyvis's Lawf1 and Lawf2 have 123), a checkpoint that does
            not fit the connectome, eyes whose ommatidia are not the network's 721 columns, or an
            ``out`` of another shape.
    """

    def __init__(self, vision, dt: float, cell_types=DEFAULT_CELL_TYPES, columns: str = "central",
                 checkpoint=None, file=None, out: torch.Tensor | None = None):
        if columns not in COLUMNS or not cell_types:
            raise VisionError(f"the network's observations need columns 'central' or 'all' and at least one cell "
                              f"type, got columns={columns!r}, cell_types={tuple(cell_types)!r}")
        readouts = vision.readouts
        W, dev = readouts.shape[0], readouts.device
        c = Connectome.build(file)
        params = load_checkpoint(checkpoint) if checkpoint is not None else initial_parameters(c)
        self.net = ConnectomeNetwork(c, params, 2 * W, dt=dt, device=dev)
        if self.net.columns != readouts.shape[2]:
            raise VisionError(f"the network has {self.net.columns} input columns, the eyes {readouts.shape[2]} "
                              f"ommatidia")
        per_type = [self.net.nodes(t, central=columns == "central") for t in cell_types]
        for t, n in zip(cell_types, per_type):
            if columns == "all" and n.numel() != self.net.columns:
                raise VisionError(f"cell type {t!r} has {n.numel()} nodes, not one per column ({self.net.columns}): "
                                  f"observe it with columns='central'")
        self.nodes = torch.cat(per_type)
        self.cell_types, self.columns = tuple(cell_types), columns
        self.order = torch.as_tensor(flyvis_column_order(vision.retina.id_map), device=dev)
        self.W, self.N, self.readouts = W, c.num_nodes, readouts
        if out is not None and tuple(out.shape) != (W, 2, self.nodes.numel()):
            raise VisionError(f"out must be [{W}, 2, {self.nodes.numel()}] (worlds, eyes, observed nodes), got "
                              f"{list(out.shape)}")
        self.out = torch.empty(W, 2, self.nodes.numel(), device=dev) if out is None else out
        self.stimulus = torch.empty(2 * W, self.net.columns, device=dev)
        self._scratch = torch.empty(W, 2, self.net.columns, device=dev)
        self._connectome, self._params, self.dt = c, params, dt
        rest = ConnectomeNetwork(c, params, 1, dt=dt, device=dev)
        self.steady = rest.steady_state().clone()  # [1, N]: flyvis's steady state in grey
        self.start = self.steady.expand(2, -1).clone()  # [2, N]: where each eye (left, right) starts
        self._eyes = torch.zeros(W, 2, dtype=torch.bool, device=dev)
        self.net.voltages.copy_(self.start.repeat(W, 1))

    @property
    def names(self) -> list[str]:
        """The observed values' names (:func:`observed_names`), in :attr:`out`'s order."""
        return observed_names(self.cell_types, self.columns, self.net.columns)

    def tensors(self) -> list:
        """Every tensor held here (the network's, the steady state, the input and output buffers)."""
        return self.net.tensors() + [self.steady, self.start, self.stimulus, self._scratch, self.out, self.nodes, self.order,
                                     self._eyes]

    def start_in_scene(self, world: int = 0, seconds: float = 1.0) -> None:
        """FlyGym 1.x's start (``RealisticVisionFly``: flyvis's ``fade_in_state`` on the first
        frame): from rest, ``seconds`` of the readouts ``world``'s eyes see now, faded in from grey;
        every eye restarts there from now on (:attr:`start`, [2, N]: the left eye's, the right's),
        and every eye is there now. On the host, once (not captured)."""
        photoreceptors(self.readouts, self.order, self.stimulus, self._scratch)
        fade = ConnectomeNetwork(self._connectome, self._params, 2, dt=self.dt, device=self.start.device)
        self.start.copy_(fade.fade_in(self.stimulus[2 * world:2 * world + 2], seconds))
        self.net.voltages.copy_(self.start.repeat(self.W, 1))

    def reset(self, done: torch.Tensor) -> None:
        """The eyes of the worlds ``done`` marks (bool [W]) back at :attr:`start`."""
        self._eyes.copy_(done.unsqueeze(1))
        v = self.net.voltages.view(self.W, 2, self.N)
        torch.where(self._eyes.unsqueeze(2), self.start.unsqueeze(0), v, out=v)

    def advance(self, steps: int) -> None:
        """``steps`` network steps on the eyes' readouts now."""
        photoreceptors(self.readouts, self.order, self.stimulus, self._scratch)
        self.net.run(self.stimulus, steps)

    def observe(self) -> torch.Tensor:
        """The observed voltages now, into :attr:`out`."""
        torch.index_select(self.net.voltages.view(self.W, 2, self.N), 2, self.nodes, out=self.out)
        return self.out
