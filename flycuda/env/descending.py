"""Descending actions (``make(..., action="descending")``): a policy sends two descending
drives per world (left, right), as the NeuroMechFly v2 paper's RL agent did, and FlyGym's
``HybridTurningController`` turns them into the 42 joint targets and six adhesions at every
physics step, inside the environment's captured step.

Per physics step, for every world: the controller's sensory inputs from MuJoCo Warp's Data
(:func:`flycuda.ops.hybrid_senses`: thorax and tarsus5 heights, heading, the ground's force on
each leg's tibia, tarsus1 and tarsus2), then one controller step (:func:`flycuda.ops.hybrid_step`,
FlyGym's turning controller: each side's oscillator amplitude ``|drive|``, running backwards where
it is negative; the retraction and stumbling rules), which writes the fly's ctrl; then the
physics step. A reset world's controller restarts from its own initial phases (FlyGym's, drawn
once from ``seed + w``), magnitudes and corrections 0.

Deviations from FlyGym's own loop, by construction: the physics is MuJoCo Warp's (float32, no
noslip solver), so the senses are float32 values widened to float64; the fly is the
environment's NeuroMechFly (FlyGym's tutorial fly: the same legs-only skeleton, position
actuators and tarsus adhesion as ``make_locomotion_fly``, with its own gains).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..control.cpg import tripod_params
from ..control.steps import load_steps, locomotion_dof_names
from ..errors import EnvError
from ..ops import hybrid_params, hybrid_step
from ..ops.walking import LEGS
from .layout import own_slice

__all__ = ["Descending", "DRIVE_BOUND", "locomotion_actuators"]

DRIVE_BOUND = 1.0
"""The action space's bound on each drive: [-1, 1] (1: the CPG's intrinsic amplitude; negative
runs that side backwards)."""

def locomotion_actuators(sim, fly_name: str = "nmf") -> torch.Tensor:
    """int32 [48]: the ctrl columns the controller writes: ``fly_name``'s 42 position actuators
    in FlyGym's default locomotion DOF order, then its six tarsus5 adhesion actuators (LEGS'
    order), by FlyGym's names."""
    names = [f"{fly_name}/{n}-position" for n in locomotion_dof_names()]
    names += [f"{fly_name}/{leg}_tarsus5-adhesion" for leg in LEGS]
    try:
        return sim.actuator_ids(names)
    except Exception as e:  # BridgeError: what did not match
        raise EnvError(f"action='descending' needs FlyGym's NeuroMechFly with its locomotion actuators ({e})") from None


class Descending:
    """The controller of every world, its state and its sensory inputs (all on the device;
    every method in place, capturable)."""

    def __init__(self, sim, seed: int, fly_name: str = "nmf"):
        from ..flygym.senses import HybridSenses  # noqa: PLC0415  (FlyGym's names; imports no FlyGym)

        W, dev = sim.nworld, sim.device
        self.sim, self.ids = sim, locomotion_actuators(sim, fly_name).to(dev)
        try:
            self.senses = HybridSenses.of_model(sim.mjm, fly_name)
        except Exception as e:
            raise EnvError(f"action='descending': {e}") from None
        table, cpg = load_steps(dev), tripod_params().to(dev)
        self.params = hybrid_params(table.knots, table.coeffs, table.neutral, table.swing_end, cpg.freqs, cpg.amps,
                                    cpg.weights, cpg.biases, cpg.convergence, timestep=sim.timestep, device=dev)
        phases = np.stack([np.random.RandomState(seed + w).random(6) * 2 * np.pi for w in range(W)])
        self.init_state = torch.zeros(W, 5, 6, dtype=torch.float64, device=dev)
        self.init_state[:, 0] = torch.from_numpy(phases).to(dev)
        self.state = self.init_state.clone()
        self.persistence = torch.zeros(W, 6, dtype=torch.int64, device=dev)
        self._zero = torch.zeros((), dtype=torch.int64, device=dev)
        self.drive = torch.zeros(W, 2, dtype=torch.float64, device=dev)
        self._wrapped = torch.zeros(W, 6, dtype=torch.float64, device=dev)
        self.senses.read(sim)  # allocates its outputs, on the sim's device

    def step(self, actions: torch.Tensor) -> None:
        """One physics step's controls: the senses now, then the controller (ctrl written)."""
        self.drive.copy_(actions)
        self.senses.read(self.sim)
        hybrid_step(self.drive, *self.senses.inputs(), self.params, self.state, self.persistence, self.ids,
                    self.sim.view("ctrl"))

    def reset(self, done: torch.Tensor) -> None:
        """The worlds ``done`` marks (bool [W]) restart their controller."""
        torch.where(done.view(-1, 1, 1), self.init_state, self.state, out=self.state)
        torch.where(done.view(-1, 1), self._zero, self.persistence, out=self.persistence)

    def observe(self, own: torch.Tensor) -> None:
        """The controller's observation columns into the environment's own float32 buffer:
        the drives, the oscillators' phases (in [0, 2 pi)) and magnitudes, the retraction and
        stumbling corrections."""
        own[:, own_slice("drive")].copy_(self.drive)
        torch.remainder(self.state[:, 0], 2 * math.pi, out=self._wrapped)
        own[:, own_slice("cpg_phase")].copy_(self._wrapped)
        for name, row in (("cpg_magnitude", 1), ("retraction", 2), ("stumbling", 3)):
            own[:, own_slice(name)].copy_(self.state[:, row])
