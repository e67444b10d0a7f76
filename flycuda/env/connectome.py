"""flyvis's connectome-constrained network behind every world's eyes in :mod:`flycuda.env`
(issue 40): the ``connectome`` observation group.

Each control step, after the eyes (:class:`flycuda.vision.Vision`) read the new state, the eyes'
readouts become flyvis's input as FlyGym 1.x made them (the brighter of each ommatidium's two
channels, in flyvis's column order: :func:`flycuda.vision.network.photoreceptors`), the network
(:class:`flycuda.vision.network.ConnectomeNetwork`, both eyes of every world) runs
``rate x control_dt`` steps of ``1 / rate`` on that frame (FlyGym 1.x: one step per vision update
at its ``vision_refresh_rate``, 500 Hz), and the chosen cell types' voltages go into the
environment's own columns, on the device, inside the step's graph. A world that starts an episode
restarts its eyes' networks from flyvis's steady state (1 s of grey from rest), computed once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import EnvError, VisionError
from ..vision.connectome import Connectome
from ..vision.network import ConnectomeNetwork, flyvis_column_order, initial_parameters, load_checkpoint, photoreceptors

__all__ = ["ConnectomeSpec", "ConnectomeStage", "EYES", "column_names", "steps_per_control"]

EYES = ("left", "right")


@dataclass(frozen=True)
class ConnectomeSpec:
    """What ``make(..., connectome=)`` asks for (a dict of these fields, or True: the defaults).

    Attributes:
        cell_types: the cell types whose voltages are observed (flyvis's names, e.g. T4a, T5b, Mi1).
        columns: ``"central"`` (each eye's central column: one value per type and eye) or ``"all"``
            (721 per type and eye, flyvis's column order).
        rate: the network's steps per second (FlyGym 1.x's 500 Hz); ``rate x control_dt`` steps run
            per control step, and the physics step must divide ``1 / rate``.
        checkpoint: a flyvis checkpoint (:func:`flycuda.vision.network.load_checkpoint`); None: the
            connectome's initial parameters (an untrained network).
        file: flyvis's connectome file; None: the installed flyvis wheel's.
    """

    cell_types: tuple = ("T4a", "T4b", "T4c", "T4d", "T5a", "T5b", "T5c", "T5d")
    columns: str = "central"
    rate: float = 500.0
    checkpoint: str | None = None
    file: str | None = None

    @classmethod
    def of(cls, value) -> "ConnectomeSpec":
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise EnvError(f"connectome must be True or a dict of {', '.join(cls.__dataclass_fields__)}, got {value!r}")
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise EnvError(f"connectome has no option {unknown[0]!r}; its options are: "
                           f"{', '.join(cls.__dataclass_fields__)}")
        spec = cls(**{k: tuple(v) if k == "cell_types" else v for k, v in value.items()})
        if spec.columns not in ("central", "all") or not spec.cell_types:
            raise EnvError(f"connectome needs columns 'central' or 'all' and at least one cell type, got "
                           f"columns={spec.columns!r}, cell_types={spec.cell_types!r}")
        return spec


def column_names(spec: ConnectomeSpec, columns: int) -> list[str]:
    """The observation columns' names: ``connectome:<type>:<eye>`` (central) or
    ``connectome:<type>:<eye>:<column>`` (all), eyes outermost."""
    if spec.columns == "central":
        return [f"connectome:{t}:{eye}" for eye in EYES for t in spec.cell_types]
    return [f"connectome:{t}:{eye}:{c}" for eye in EYES for t in spec.cell_types for c in range(columns)]


def steps_per_control(rate: float, control_dt: float, timestep: float) -> int:
    """``rate x control_dt``, an integer, with the physics step dividing ``1 / rate``.

    Raises:
        EnvError: either does not divide.
    """
    k, m = rate * control_dt, 1.0 / (rate * timestep)
    if not (math.isfinite(rate) and rate > 0 and abs(k - round(k)) < 1e-6 and round(k) >= 1
            and abs(m - round(m)) < 1e-6 and round(m) >= 1):
        raise EnvError(f"connectome rate {rate:g} Hz: its step 1/rate must be a whole number of physics steps "
                       f"({timestep:g} s) and fit a whole number of times in the control step ({control_dt:g} s): "
                       f"e.g. make(..., control_dt={max(1.0 / rate, timestep):g}) (the network runs on each control "
                       f"step's eyes)")
    return int(round(k))


class ConnectomeStage:
    """The network behind every world's eyes (capturable: buffers made here).

    Args:
        env: the environment (its worlds, eyes, control step).
        spec: :class:`ConnectomeSpec`.
        out: float32 [W, 2, K] to write: the observed voltages, eyes then types (then columns).
    """

    def __init__(self, env, spec: ConnectomeSpec, out: torch.Tensor):
        if env.vision is None:
            raise EnvError("connectome= needs the eyes: make(..., vision='exact' or 'fast:K', connectome=...)")
        W, dev = env.num_envs, env.device
        self.k = steps_per_control(spec.rate, env.control_dt, env.sim.timestep)
        try:
            c = Connectome.build(spec.file)
            params = load_checkpoint(spec.checkpoint) if spec.checkpoint is not None else initial_parameters(c)
            self.net = ConnectomeNetwork(c, params, 2 * W, dt=1.0 / spec.rate, device=dev)
            nodes = [self.net.nodes(t, central=spec.columns == "central") for t in spec.cell_types]
            order = flyvis_column_order(env.vision.retina.id_map)
        except VisionError as e:
            raise EnvError(f"connectome: {e}") from None
        if self.net.columns != env.vision.readouts.shape[2]:
            raise EnvError(f"connectome: its network has {self.net.columns} input columns, the eyes "
                           f"{env.vision.readouts.shape[2]} ommatidia")
        self.out, self.N, self.W, self.readouts = out, c.num_nodes, W, env.vision.readouts
        self.nodes = torch.cat(nodes)
        self.order = torch.as_tensor(order, device=dev)
        self.stimulus = torch.empty(2 * W, self.net.columns, device=dev)
        self._scratch = torch.empty(W, 2, self.net.columns, device=dev)
        rest = ConnectomeNetwork(c, params, 1, dt=1.0 / spec.rate, device=dev)
        self.steady = rest.steady_state().clone()  # [1, N]: every eye's start
        self._eyes = torch.zeros(W, 2, dtype=torch.bool, device=dev)
        self.net.voltages.copy_(self.steady.expand_as(self.net.voltages))

    def reset(self, done: torch.Tensor) -> None:
        """The eyes of the worlds ``done`` marks back at the steady state."""
        self._eyes.copy_(done.unsqueeze(1))
        v = self.net.voltages
        torch.where(self._eyes.view(-1, 1), self.steady, v, out=v)

    def observe(self, advance: bool = True) -> None:
        """``k`` network steps on the eyes' readouts now (unless ``advance`` is False: a reset's
        observation), then the observed voltages."""
        if advance:
            photoreceptors(self.readouts, self.order, self.stimulus, self._scratch)
            self.net.run(self.stimulus, self.k)
        torch.index_select(self.net.voltages.view(self.W, 2, self.N), 2, self.nodes, out=self.out)
