"""FlyGym's rule-based walking controller for every world at once: Walknet's three
leg-coordination rules choosing which leg steps next, each step FlyGym's preprogrammed step.

Each world is one of FlyGym's ``RuleBasedController`` instances
(``flygym_demo.complex_terrain``), its state a row of tensors (its random stream too), every
step one launch of :func:`flycuda.ops.rule_step` (tests/control holds them equal to FlyGym's
world by world). A step, in FlyGym's order:

1. the leg to start stepping: on the first step one of the four non-hind legs at random;
   later, at random, one of the legs not stepping whose combined score is positive and
   within ``margin`` (relative) of the best; none when no leg qualifies;
2. every stepping leg's phase advances by 2 pi timestep / (the step's duration); a leg that
   completes its step (phase >= 2 pi) returns to 0 and stops;
3. the scores from the new phases: rule 1, a swinging leg sets the leg in front of it to
   ``rule1`` (-10: wait); rule 2, a leg in stance adds ``rule2_*`` times the stance left to
   its neighbours (early stance); rule 3 adds ``rule3_*`` times the stance done (late stance);
   ``ipsi`` weights for a neighbour on the same side, ``contra`` across;
4. the angles: each leg's preprogrammed step at its phase; adhesion off during the swing.
"""

from __future__ import annotations

import torch

from ..errors import ControlError
from ..ops.walking import hybrid_params, rule_params, rule_rng, rule_step
from .cpg import tripod_params
from .steps import STEP_DURATION, load_steps

__all__ = ["RuleBasedController"]


class RuleBasedController:
    """FlyGym's ``RuleBasedController`` in ``worlds`` worlds, world w seeded with ``seed + w``;
    ``weights`` (FlyGym's names, :data:`flycuda.ops.walking.RULE_WEIGHTS` by default) and
    ``margin`` as FlyGym's.

    State: ``state`` float64 [W, 5, 6] (rows ``phases``, ``stepping`` (0/1) and the three
    rules' scores) and ``rng`` int64 [W, 626] (each world's MT19937 stream and steps taken)."""

    def __init__(self, worlds: int, timestep: float, *, device=None, seed: int = 0, weights: dict | None = None,
                 margin: float = 0.001):
        if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0:
            raise ControlError(f"worlds must be a positive integer, got {worlds!r}")
        if not (isinstance(timestep, (int, float)) and timestep > 0):
            raise ControlError(f"timestep must be > 0 seconds, got {timestep!r}")
        self.worlds, self.timestep, self.seed = worlds, float(timestep), int(seed)
        self.device = torch.empty(0, device=device or "cpu").device  # "cuda" -> cuda:N, as the tensors say
        try:
            self.rules = rule_params(self.timestep, STEP_DURATION, weights=weights, margin=margin, device=self.device)
        except ValueError as e:
            raise ControlError(str(e)) from None
        t, p = load_steps(self.device), tripod_params()  # the CPG entries are not read
        self.op_params = hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, p.freqs, p.amps, p.weights,
                                       p.biases, p.convergence, timestep=self.timestep, rules=False, turning=False,
                                       swing_extension=0.0, device=self.device)
        self.state = torch.zeros(worlds, 5, 6, dtype=torch.float64, device=self.device)
        self.rng = rule_rng(range(self.seed, self.seed + worlds), self.device)
        self._out = torch.empty(worlds, 48, dtype=torch.float32, device=self.device)  # angles, then adhesion
        self._ids = torch.arange(48, dtype=torch.int32, device=self.device)

    phases = property(lambda self: self.state[:, 0], doc="float64 [W, 6]: the legs' phases, in [0, 2 pi)")
    stepping = property(lambda self: self.state[:, 1] != 0, doc="bool [W, 6]: the legs stepping now")
    scores = property(lambda self: self.state[:, 2:], doc="float64 [W, 3, 6]: the scores of rules 1, 2 and 3")

    def reset(self, *, seed: int | None = None, worlds=None) -> None:
        """FlyGym's ``reset``: phases, stepping and scores 0, the first step's draw again; each
        world's stream restarts from ``seed + w`` when ``seed`` is given, else continues.
        ``worlds``: a bool mask [W] of the worlds to reset (default all)."""
        if worlds is None:
            mask = torch.ones(self.worlds, dtype=torch.bool, device=self.device)
        else:
            mask = torch.as_tensor(worlds, device=self.device)
            if mask.dtype != torch.bool or tuple(mask.shape) != (self.worlds,):
                raise ControlError(f"worlds must be a bool mask [{self.worlds}], got {mask.dtype} {tuple(mask.shape)}")
        if seed is not None:
            self.rng[mask] = rule_rng(range(seed, seed + self.worlds), self.device)[mask]
        self.state[mask] = 0.0
        self.rng[:, -1][mask] = 0  # steps taken: the next step is a first step

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (joint angles float32 [W, 42] in FlyGym's default locomotion DOF order,
        adhesion bool [W, 6])."""
        rule_step(self.op_params, self.rules, self.state, self.rng, self._ids, self._out)
        return self._out[:, :42].clone(), self._out[:, 42:] > 0.5
