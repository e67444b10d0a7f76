"""FlyGym's walking controllers for every world at once: the CPG controller, the hybrid
controller (CPG-clocked preprogrammed steps corrected by the retraction and stumbling
rules, adhesion switched with each leg's swing) and the hybrid turning controller (two
descending drives, left and right, into the oscillators' amplitudes and directions).

Each world is one of FlyGym's instances (``flygym_demo.complex_terrain``:
``CPGController``, ``HybridController``, ``HybridTurningController``), its state a row of
tensors, every step one launch of :func:`flycuda.ops.hybrid_step` (tests/control holds them
equal to FlyGym's world by world). FlyGym's rules, in the order a step runs them:

1. the leg to retract: the tarsus5 farthest below the thorax, if it is more than
   ``retraction_height_threshold`` below the third farthest (from this step's inputs; none
   when a height is NaN; of exactly equal farthest legs the last, where FlyGym's unstable
   sort may pick another); its persistence counter starts when its retraction
   correction already exceeds ``retraction_persistence_initiation_threshold``; counters
   that run count up and stop after ``retraction_persistence_steps``;
2. stumbling legs: a ground force on the tibia, tarsus1 or tarsus2 whose component along
   the heading is below ``stumbling_force_threshold``;
3. one Euler step of the CPG (:mod:`flycuda.control.cpg`);
4. per leg, the corrections grow at their rate while the rule holds and decay otherwise
   (never below 0); a retraction correction overrides (and clears) the stumbling one;
5. the angles: the preprogrammed step at the new phase and magnitude, plus the correction
   (clipped to ``max_correction``) times the phase gain (0.8 mid-swing, -0.1 mid-stance)
   times the leg's correction vector; adhesion on outside the swing (extended by
   ``swing_extension``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import ControlError
from ..ops.walking import hybrid_params, hybrid_step
from .cpg import CPGParams, tripod_params
from .steps import load_steps

__all__ = ["CPGController", "HybridController", "HybridTurningController"]


class CPGController:
    """FlyGym's ``CPGController`` in ``worlds`` worlds: the tripod CPG (``params``, default
    :func:`flycuda.control.cpg.tripod_params`) clocking the preprogrammed steps; adhesion on
    outside each leg's swing. World w draws its initial phases as FlyGym's network seeded
    with ``seed + w``.

    State: ``state`` float64 [W, 5, 6] (rows: ``phases``, ``magnitudes``, ``retraction``,
    ``stumbling``, ``net_corrections``, each a [W, 6] view) and ``persistence`` int64 [W, 6]."""

    _rules = False
    _turning = False

    def __init__(self, worlds: int, timestep: float, *, device=None, seed: int = 0, params: CPGParams | None = None,
                 **rules):
        if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0:
            raise ControlError(f"worlds must be a positive integer, got {worlds!r}")
        if not (isinstance(timestep, (int, float)) and timestep > 0):
            raise ControlError(f"timestep must be > 0 seconds, got {timestep!r}")
        self.worlds, self.timestep = worlds, float(timestep)
        self.device = torch.empty(0, device=device or "cpu").device  # "cuda" -> cuda:N, as the tensors say
        self.params = (params or tripod_params()).to(self.device)
        table = load_steps(self.device)
        p = self.params
        rules.setdefault("swing_extension", np.pi / 4 if self._rules else 0.0)
        self.op_params = hybrid_params(table.knots, table.coeffs, table.neutral, table.swing_end, p.freqs, p.amps,
                                       p.weights, p.biases, p.convergence, timestep=self.timestep, rules=self._rules,
                                       turning=self._turning, device=self.device, **rules)
        self._rngs = [np.random.RandomState(seed + w) for w in range(worlds)]
        self.state = torch.zeros(worlds, 5, 6, dtype=torch.float64, device=self.device)
        self.persistence = torch.zeros(worlds, 6, dtype=torch.int64, device=self.device)
        self._out = torch.empty(worlds, 48, dtype=torch.float32, device=self.device)  # angles, then adhesion
        self._ids = torch.arange(48, dtype=torch.int32, device=self.device)
        f64 = dict(dtype=torch.float64, device=self.device)
        self._still = (torch.ones(worlds, 2, **f64), torch.zeros(worlds, **f64), torch.zeros(worlds, 6, **f64),
                       torch.zeros(worlds, 6, 3, 3, **f64), torch.zeros(worlds, 3, **f64))  # no drive, no senses
        self.reset()

    phases = property(lambda self: self.state[:, 0], doc="float64 [W, 6]: the oscillators' phases (never wrapped)")
    magnitudes = property(lambda self: self.state[:, 1], doc="float64 [W, 6]: the oscillators' magnitudes")
    retraction = property(lambda self: self.state[:, 2], doc="float64 [W, 6]: the retraction corrections")
    stumbling = property(lambda self: self.state[:, 3], doc="float64 [W, 6]: the stumbling corrections")
    net_corrections = property(lambda self: self.state[:, 4], doc="float64 [W, 6]: the last step's net corrections")

    def reset(self, *, seed: int | None = None, init_phases=None, init_magnitudes=None, worlds=None) -> None:
        """FlyGym's ``reset``: each world's phases drawn afresh (from ``seed + w`` when a
        ``seed`` is given, else continuing its stream) or ``init_phases`` [W, 6]; magnitudes
        0 or ``init_magnitudes``; corrections and counters 0. ``worlds``: a bool mask [W] of
        the worlds to reset (default all)."""
        mask = self._mask(worlds)  # every input checked before anything changes
        phases = None if init_phases is None else self._state_input("init_phases", init_phases)
        magnitudes = None if init_magnitudes is None else self._state_input("init_magnitudes", init_magnitudes)
        idx = torch.nonzero(mask.cpu()).flatten().tolist()
        if seed is not None:
            for w in idx:
                self._rngs[w] = np.random.RandomState(seed + w)
        if phases is None:
            draws = [self._rngs[w].random(6) * 2 * np.pi for w in idx]
            phases = torch.zeros(self.worlds, 6, dtype=torch.float64, device=self.device)
            phases[mask] = torch.tensor(np.array(draws).reshape(-1, 6), dtype=torch.float64, device=self.device)
        self.state[mask] = 0.0
        self.persistence[mask] = 0
        self.state[:, 0][mask] = phases[mask]
        if magnitudes is not None:
            self.state[:, 1][mask] = magnitudes[mask]

    def _mask(self, worlds) -> torch.Tensor:
        if worlds is None:
            return torch.ones(self.worlds, dtype=torch.bool, device=self.device)
        mask = torch.as_tensor(worlds, device=self.device)
        if mask.dtype != torch.bool or tuple(mask.shape) != (self.worlds,):
            raise ControlError(f"worlds must be a bool mask [{self.worlds}], got {mask.dtype} {tuple(mask.shape)}")
        return mask

    def _state_input(self, name: str, value) -> torch.Tensor:
        t = torch.as_tensor(value, dtype=torch.float64, device=self.device)
        if tuple(t.shape) != (self.worlds, 6):
            raise ControlError(f"{name} must have shape [{self.worlds}, 6], got {tuple(t.shape)}")
        return t

    def _checked(self, name: str, t, shape: tuple) -> torch.Tensor:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or tuple(t.shape) != shape \
                or t.device != self.device:
            got = f"{t.dtype} {tuple(t.shape)} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ControlError(f"{name} must be a floating tensor {list(shape)} on {self.device}, got {got}")
        return t.to(torch.float64).contiguous()

    def _step(self, drive, thorax_z, tarsus5_z, forces, heading) -> tuple[torch.Tensor, torch.Tensor]:
        hybrid_step(drive, thorax_z, tarsus5_z, forces, heading, self.op_params, self.state, self.persistence,
                    self._ids, self._out)
        return self._out[:, :42].clone(), self._out[:, 42:] > 0.5

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (joint angles float32 [W, 42] in FlyGym's default locomotion DOF order,
        adhesion bool [W, 6])."""
        return self._step(*self._still)


class HybridController(CPGController):
    """FlyGym's ``HybridController`` in ``worlds`` worlds (the module's text says what a step
    does); the keyword arguments are FlyGym's (``stumbling_force_threshold``,
    ``retraction_height_threshold``, ``retraction_rates``, ``stumbling_rates``,
    ``max_correction``, ``swing_extension``, ``retraction_persistence_steps``,
    ``retraction_persistence_initiation_threshold``, ``adhesion`` for its
    ``enable_adhesion``), with its defaults."""

    _rules = True

    def step(self, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor, stumbling_forces: torch.Tensor,
             heading: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step from the worlds' sensory inputs (floating tensors; world frame, mm and the
        model's force unit): ``thorax_z`` [W], ``tarsus5_z`` [W, 6], ``stumbling_forces``
        [W, 6, 3, 3] (leg; tibia, tarsus1, tarsus2; xyz: the ground's force on each), ``heading``
        [W, 3] (the thorax's x axis). Returns (joint angles float32 [W, 42] in FlyGym's default
        locomotion DOF order, adhesion bool [W, 6])."""
        return self._step(self._still[0], *self._senses(thorax_z, tarsus5_z, stumbling_forces, heading))

    def _senses(self, thorax_z, tarsus5_z, forces, heading) -> list:
        W = self.worlds
        return [self._checked(name, t, shape) for name, t, shape in (
            ("thorax_z", thorax_z, (W,)), ("tarsus5_z", tarsus5_z, (W, 6)),
            ("stumbling_forces", forces, (W, 6, 3, 3)), ("heading", heading, (W, 3)))]


class HybridTurningController(HybridController):
    """FlyGym's ``HybridTurningController`` in ``worlds`` worlds: the hybrid controller whose
    oscillators on each side take their amplitude from that side's drive (``|drive|``) and
    run backwards where it is negative."""

    _turning = True

    def step(self, drive: torch.Tensor, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor,
             stumbling_forces: torch.Tensor, heading: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step with descending drives ``drive`` [W, 2] (left, right); the other inputs and
        the outputs as :meth:`HybridController.step`."""
        d = self._checked("drive", drive, (self.worlds, 2))
        return self._step(d, *self._senses(thorax_z, tarsus5_z, stumbling_forces, heading))
