"""Descending actions (``make(..., action="descending")``): a policy sends two descending
drives per world (left, right), as the NeuroMechFly v2 paper's RL agent did, and FlyGym's
``HybridTurningController`` turns them into the 42 joint targets and six adhesions at every
physics step, inside the environment's captured step.

Per physics step, for every world: one controller step (:func:`flycuda.ops.hybrid_step`,
FlyGym's turning controller: each side's oscillator amplitude ``|drive|``, running backwards where
it is negative; the retraction and stumbling rules), which writes the fly's ctrl; the physics
step; then the controller's sensory inputs from MuJoCo Warp's Data for the next one
(:func:`flycuda.ops.hybrid_senses`: thorax and tarsus5 heights, heading, the ground's force on
each leg's tibia, tarsus1 and tarsus2), as FlyGym's loop reads them before its next step. A reset
world's controller restarts from its own initial phases (FlyGym's, drawn from ``seed + w``, the
environment's seed), magnitudes and corrections 0; it senses its new pose with no ground force
until its first step (FlyGym's loop would first warm up: the environment's settled starts stand in).

The fly is FlyGym's locomotion fly (``make_locomotion_fly``, with ``model="neuromechfly"``; the
capsule-fitted model keeps the GPU tutorial's fly, as FlyGym has no capsule locomotion fly).
Deviations from FlyGym's own loop, by construction: the physics is MuJoCo Warp's (float32, no
noslip solver), so the senses are float32 values widened to float64; on a complex terrain the
fly's mesh-box contact pairs have no margin (:mod:`flycuda.flygym.terrain`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..control.cpg import tripod_params
from ..control.steps import load_steps, locomotion_dof_names
from ..errors import BridgeError, EnvError, FlyGymError
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
    except BridgeError as e:  # what did not match
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
        except (FlyGymError, ValueError) as e:  # not FlyGym's NeuroMechFly (its names, its geoms)
            raise EnvError(f"action='descending': {e}") from None
        table, cpg = load_steps(dev), tripod_params().to(dev)
        self.params = hybrid_params(table.knots, table.coeffs, table.neutral, table.swing_end, cpg.freqs, cpg.amps,
                                    cpg.weights, cpg.biases, cpg.convergence, timestep=sim.timestep, device=dev)
        self.init_state = torch.zeros(W, 5, 6, dtype=torch.float64, device=dev)
        self.reseed(seed)
        self.state = self.init_state.clone()
        self.persistence = torch.zeros(W, 6, dtype=torch.int64, device=dev)
        self._zero = torch.zeros((), dtype=torch.int64, device=dev)
        self._zero64 = torch.zeros((), dtype=torch.float64, device=dev)
        self.drive = torch.zeros(W, 2, dtype=torch.float64, device=dev)
        self._wrapped = torch.zeros(W, 6, dtype=torch.float64, device=dev)
        self.senses.read(sim)  # allocates its outputs, on the sim's device
        self._kept = [torch.empty_like(t) for t in self.senses.inputs()]

    def reseed(self, seed: int) -> None:
        """Each world's initial phases, as FlyGym's network seeded with ``seed + w`` draws them
        (host; in place, so a captured reset reads the new ones)."""
        W = self.init_state.shape[0]
        phases = np.stack([np.random.RandomState(seed + w).random(6) * 2 * np.pi for w in range(W)])
        self.init_state[:, 0].copy_(torch.from_numpy(phases))

    def act(self, actions: torch.Tensor) -> None:
        """One physics step's controls, from the senses read after the last physics step (what
        FlyGym's loop reads before its step): the controller writes the fly's ctrl. A drive
        outside [-1, 1] is clamped to it; a non-finite one (let through by
        ``check_actions=False``; its world ends) is applied as -1, the range's low end."""
        self.drive.copy_(actions).nan_to_num_(nan=-DRIVE_BOUND, posinf=DRIVE_BOUND, neginf=-DRIVE_BOUND)
        self.drive.clamp_(-DRIVE_BOUND, DRIVE_BOUND)
        hybrid_step(self.drive, *self.senses.inputs(), self.params, self.state, self.persistence, self.ids,
                    self.sim.view("ctrl"))

    def sense(self) -> None:
        """The senses after a physics step (read then: MuJoCo Warp's reset of a world zeroes the
        contact count that every world shares, so a later read could lose the others' contacts)."""
        self.senses.read(self.sim)

    def reset(self, done: torch.Tensor) -> None:
        """The worlds ``done`` marks (bool [W]) restart their controller, and their senses are
        their new pose's (kinematics) with no ground force yet; the other worlds keep what they
        sensed after their last step."""
        torch.where(done.view(-1, 1, 1), self.init_state, self.state, out=self.state)
        torch.where(done.view(-1, 1), self._zero, self.persistence, out=self.persistence)
        for kept, now in zip(self._kept, self.senses.inputs()):
            kept.copy_(now)
        self.sim.kinematics()
        self.senses.read(self.sim)
        thorax_z, tarsus5_z, forces, heading = self.senses.inputs()
        k_thorax, k_tarsi, k_forces, k_heading = self._kept
        torch.where(done, thorax_z, k_thorax, out=thorax_z)
        torch.where(done.view(-1, 1), tarsus5_z, k_tarsi, out=tarsus5_z)
        torch.where(done.view(-1, 1), heading, k_heading, out=heading)
        torch.where(done.view(-1, 1, 1, 1), self._zero64, k_forces, out=forces)

    def observe(self, own: torch.Tensor) -> None:
        """The controller's observation columns into the environment's own float32 buffer:
        the drives, the oscillators' phases (in [0, 2 pi)) and magnitudes, the retraction and
        stumbling corrections."""
        own[:, own_slice("drive")].copy_(self.drive)
        torch.remainder(self.state[:, 0], 2 * math.pi, out=self._wrapped)
        own[:, own_slice("cpg_phase")].copy_(self._wrapped)
        for name, row in (("cpg_magnitude", 1), ("retraction", 2), ("stumbling", 3)):
            own[:, own_slice(name)].copy_(self.state[:, row])
