"""flyvis's connectome-constrained network behind every world's eyes in :mod:`flycuda.env`
(issue 40): the ``connectome`` observation group.

Each control step, after the eyes (:class:`flycuda.vision.Vision`) read the new state, the eyes'
readouts become flyvis's input as FlyGym 1.x made them (the brighter of each ommatidium's two
channels, in flyvis's column order: :func:`flycuda.vision.network.photoreceptors`), the network
(:class:`flycuda.vision.network.ConnectomeNetwork`, both eyes of every world) runs
``rate x control_dt`` steps of ``1 / rate`` on that frame (FlyGym 1.x: one step per vision update
at its ``vision_refresh_rate``, 500 Hz), and the chosen cell types' voltages go into the
environment's own columns, on the device, inside the step's graph. A world that starts an episode
restarts its eyes' networks from flyvis's steady state (1 s of grey from rest), computed once, or
with ``start="scene"`` from FlyGym 1.x's start (1 s fading in the first frame the eyes see).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import EnvError, VisionError
from ..vision.eye_network import COLUMNS, DEFAULT_CELL_TYPES, EYES, EyeNetworks, observed_names

__all__ = ["ConnectomeSpec", "ConnectomeStage", "EYES", "column_names", "steps_per_control"]


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
        start: where each eye's network starts an episode: ``"grey"`` (flyvis's steady state: 1 s
            of grey from rest) or ``"scene"`` (FlyGym 1.x's: 1 s from rest fading in the first
            frame world 0's eyes see, computed at the environment's first reset; its later resets
            restart there too).
    """

    cell_types: tuple = DEFAULT_CELL_TYPES
    columns: str = "central"
    rate: float = 500.0
    checkpoint: str | None = None
    file: str | None = None
    start: str = "grey"

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
        if spec.columns not in COLUMNS or not spec.cell_types or spec.start not in ("grey", "scene"):
            raise EnvError(f"connectome needs columns 'central' or 'all', at least one cell type and start 'grey' "
                           f"or 'scene', got columns={spec.columns!r}, cell_types={spec.cell_types!r}, "
                           f"start={spec.start!r}")
        return spec


def column_names(spec: ConnectomeSpec, columns: int) -> list[str]:
    """The observation columns' names (:func:`flycuda.vision.eye_network.observed_names`)."""
    return observed_names(spec.cell_types, spec.columns, columns)


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
    """The network behind every world's eyes (capturable: buffers made here; ``spec``: what it
    was made from).

    Args:
        env: the environment (its worlds, eyes, control step).
        spec: :class:`ConnectomeSpec`.
        out: float32 [W, 2, K] to write: the observed voltages, eyes then types (then columns).
    """

    def __init__(self, env, spec: ConnectomeSpec, out: torch.Tensor):
        if env.vision is None:
            raise EnvError("connectome= needs the eyes: make(..., vision='exact' or 'fast:K', connectome=...)")
        self.spec, self.k = spec, steps_per_control(spec.rate, env.control_dt, env.sim.timestep)
        try:
            self.eyes = EyeNetworks(env.vision, 1.0 / spec.rate, spec.cell_types, spec.columns, spec.checkpoint,
                                    spec.file, out=out)
        except VisionError as e:
            raise EnvError(f"connectome: {e}") from None
        self.net, self.nodes, self.steady, self.out = self.eyes.net, self.eyes.nodes, self.eyes.steady, out
        self._begun = False

    def reset(self, done: torch.Tensor) -> None:
        """The eyes of the worlds ``done`` marks back at their start."""
        self.eyes.reset(done)

    def begin(self) -> bool:
        """At the environment's first reset, after its eyes read the worlds (on the host): with
        ``start="scene"`` every eye's network faded in on world 0's frame. True when it did."""
        if self.spec.start != "scene" or self._begun:
            return False
        self.eyes.start_in_scene()
        self._begun = True
        return True

    def observe(self, advance: bool = True) -> None:
        """``k`` network steps on the eyes' readouts now (unless ``advance`` is False: a reset's
        observation), then the observed voltages."""
        if advance:
            self.eyes.advance(self.k)
        self.eyes.observe()
