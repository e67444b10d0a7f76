"""FlyGym's walking controllers as one device op (csrc/kernels/hybrid_step.cuh): the CPG
controller, the hybrid controller and the hybrid turning controller of
``flygym_demo.complex_terrain`` for every world, one step per call, inside a captured
control step (no host sync). :class:`flycuda.control.HybridTurningController` and its
siblings hold the state and call it; :mod:`flycuda.reference.walking` is its torch reference.

* :func:`hybrid_params`: the controller's constants packed once into the float64 tensor the
  op reads (FlyGym's splines, its tripod CPG, its rules' thresholds and rates);
* :func:`hybrid_step`: one step of every world;
* :func:`rule_params`, :func:`rule_step`, :func:`rule_rng`: FlyGym's rule-based controller
  (``RuleBasedController``, csrc/kernels/rule_step.cuh): its weights, one step of every
  world, each world's random stream (NumPy's MT19937 state as FlyGym seeds it).
"""

from __future__ import annotations

import numpy as np
import torch

from ._values import check_index
from .checks import check_same_device
from .launch_plan import HYBRID_COLUMNS, HYBRID_PARAMS, HYBRID_SCALARS, RULE_RNG_COLS, RULES, named_slice

__all__ = ["hybrid_step", "hybrid_params", "rule_step", "rule_params", "rule_rng", "RULE_WEIGHTS", "params_slice", "LEGS", "DOF_ORDER", "CORRECTION_VECTORS", "RIGHT_LEG_SIGN",
           "GAIN_VALUES"]

LEGS = ("lf", "lm", "lh", "rf", "rm", "rh")
"""FlyGym's legs (``flygym.anatomy.LEGS``): left front, middle, hind, right front, middle, hind."""
DOF_ORDER = (2, 0, 1, 3, 4, 5, 6)
"""Output slot m of a leg (FlyGym's default locomotion order: coxa yaw, pitch, roll, ...) reads
the leg's angle DOF_ORDER[m] of the step data's order (coxa pitch, roll, yaw, ...: the
kernel's ``dof_order``)."""

CORRECTION_VECTORS = {"f": (-0.03, 0.0, 0.0, -0.03, 0.0, 0.03, 0.03),
                      "m": (-0.015, 0.001, 0.025, -0.02, 0.0, -0.02, 0.0),
                      "h": (0.0, 0.0, 0.0, -0.02, 0.0, 0.01, -0.02)}
"""FlyGym's correction vector of a front, middle and hind leg (rad per unit of correction,
in the step data's angle order); a right leg's is flipped in roll and yaw (``RIGHT_LEG_SIGN``)."""
RIGHT_LEG_SIGN = (1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0)
"""The signs a right leg's correction vector is multiplied by (FlyGym's)."""
RULE_WEIGHTS = {"rule1": -10.0, "rule2_ipsi": 2.5, "rule2_contra": 1.0, "rule3_ipsi": 3.0, "rule3_contra": 2.0}
"""FlyGym's ``RuleBasedController`` weights (its defaults)."""
GAIN_VALUES = (0.0, 0.8, 0.0, -0.1, 0.0)
"""The phase gain at FlyGym's five points: swing start, mid-swing, swing end + extension, mid-stance, 2 pi."""


def params_slice(name: str) -> slice:
    """Where ``name`` (one of launch_plan.HYBRID_PARAMS) lies in the params tensor."""
    return named_slice(HYBRID_PARAMS, name)


def _gain_points(swing_end: float, extension: float) -> np.ndarray:
    """FlyGym's five phase-gain points of a leg (``_step_phase_gain``), computed as it computes them."""
    swing_start, swing_end = np.array([0.0, swing_end])
    return np.array([swing_start, np.mean([swing_start, swing_end]), swing_end + extension,
                     np.mean([swing_end, 2 * np.pi]), 2 * np.pi])


def hybrid_params(knots, coeffs, neutral, swing_end, freqs, amps, weights, biases, convergence, *, timestep: float,
                  rules: bool = True, turning: bool = True, adhesion: bool = True, swing_extension: float = np.pi / 4,
                  stumbling_force_threshold: float = -1.0, retraction_height_threshold: float = 0.05,
                  retraction_rates=(800.0, 700.0), stumbling_rates=(2200.0, 1800.0), max_correction: float = 80.0,
                  retraction_persistence_steps: int = 20, retraction_persistence_initiation_threshold: float = 20.0,
                  device=None) -> torch.Tensor:
    """The params tensor of :func:`hybrid_step`: float64 [len] in launch_plan.HYBRID_PARAMS' order.

    Args:
        knots, coeffs, neutral, swing_end: FlyGym's preprogrammed steps
            (:func:`flycuda.control.load_steps`): [45], [6, 4, 44, 7], [6, 7], [6].
        freqs, amps, weights, biases, convergence: the CPG ([6], [6], [6, 6], [6, 6], [6]).
        timestep: seconds per call (FlyGym's controller ``timestep``).
        rules: the hybrid controller's retraction and stumbling rules (False: the CPG controller).
        turning: amplitudes and frequency signs from the drives (False: ``amps`` and ``freqs``).
        adhesion: switch adhesion with the swing (False: always off, FlyGym's ``enable_adhesion``).
        swing_extension: how far past the swing adhesion stays off and the gain returns to 0
            (the CPG controller: 0).
        stumbling_force_threshold, retraction_height_threshold: the rules' thresholds (FlyGym's
            ``HybridController`` fields of those names, with its defaults; so are the next).
        retraction_rates, stumbling_rates: (increase, decrease) per second of each correction.
        max_correction: the largest net correction applied.
        retraction_persistence_steps, retraction_persistence_initiation_threshold: the persistence
            counters' length and the retraction correction they start above.
        device: where the tensor goes.

    Raises:
        ValueError: a table of the wrong shape, or a non-positive timestep.
    """
    if not (isinstance(timestep, (int, float)) and timestep > 0):
        raise ValueError(f"flycuda.hybrid_params: timestep must be > 0 seconds, got {timestep!r}")
    parts = {}
    for name, value, shape in (("knots", knots, (45,)), ("coeffs", coeffs, (6, 4, 44, 7)), ("neutral", neutral, (6, 7)),
                               ("swing_end", swing_end, (6,)), ("freqs", freqs, (6,)), ("amps", amps, (6,)),
                               ("weights", weights, (6, 6)), ("biases", biases, (6, 6)),
                               ("convergence", convergence, (6,))):
        a = torch.as_tensor(value, dtype=torch.float64).cpu()
        if tuple(a.shape) != shape:
            raise ValueError(f"flycuda.hybrid_params: {name} must have shape {list(shape)}, got {tuple(a.shape)}")
        parts[name] = a.numpy()
    ext, ends = float(swing_extension), parts.pop("swing_end")
    parts["adhesion_end"] = ends + ext  # numpy's float64 add, as FlyGym's swing_end += extension
    parts["gain_points"] = np.stack([_gain_points(float(e), ext) for e in ends])
    parts["gain_values"] = np.array(GAIN_VALUES)
    parts["vectors"] = np.array([[c * (RIGHT_LEG_SIGN[k] if leg[0] == "r" else 1.0)
                                  for k, c in enumerate(CORRECTION_VECTORS[leg[1]])] for leg in LEGS])
    dt = float(timestep)
    scalars = dict(timestep=dt, stumble_force=stumbling_force_threshold, retract_height=retraction_height_threshold,
                   retract_up=retraction_rates[0] * dt, retract_down=retraction_rates[1] * dt,
                   stumble_up=stumbling_rates[0] * dt, stumble_down=stumbling_rates[1] * dt,
                   max_correction=max_correction, persist_steps=retraction_persistence_steps,
                   persist_from=retraction_persistence_initiation_threshold, rules=float(bool(rules)),
                   adhesion=float(bool(adhesion)), turning=float(bool(turning)))
    parts["scalars"] = np.array([float(scalars[k]) for k in HYBRID_SCALARS])
    flat = [np.asarray(parts[name], dtype=np.float64).reshape(-1) for name, _ in HYBRID_PARAMS]
    return torch.from_numpy(np.concatenate(flat)).to(device)


def hybrid_step(drive: torch.Tensor, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor, stumbling_forces: torch.Tensor,
                heading: torch.Tensor, params: torch.Tensor, state: torch.Tensor, persistence: torch.Tensor,
                act_ids: torch.Tensor, ctrl: torch.Tensor) -> None:
    """One step of FlyGym's walking controller in every world, in place.

    For world w, in FlyGym's order (``flygym_demo.complex_terrain``; flycuda/control/hybrid.py
    says it in words): with ``turning`` each side's oscillators take amplitude ``|drive[w, side]|``
    and run backwards where it is negative; with ``rules`` the retraction leg, the persistence
    counters and the stumbling legs come from the sensory inputs; one Euler step of the CPG;
    the corrections; then::

        ctrl[w, act_ids[7 leg + m]] = float32(angle of leg's slot m)   (FlyGym's default DOF order)
        ctrl[w, act_ids[42 + leg]]  = 1.0 if adhesion on else 0.0

    every float64 operation rounded on its own, in FlyGym's order (the same bits on the CPU
    and CUDA but for ``sin``'s last bit).

    Args:
        drive: float32/float64 [W, 2] (left, right); read only with ``turning``.
        thorax_z, tarsus5_z, stumbling_forces, heading: the sensory inputs, drive's dtype,
            contiguous: [W], [W, 6], [W, 6, 3, 3] (the ground's force on each leg's tibia,
            tarsus1 and tarsus2, world frame), [W, 3] (the thorax's x axis); read only with ``rules``.
        params: float64 from :func:`hybrid_params`.
        state: float64 [W, 5, 6], contiguous: phases, magnitudes, retraction and stumbling
            corrections, the last net corrections (updated).
        persistence: int64 [W, 6], contiguous: the retraction persistence counters (updated).
        act_ids: int32/int64 [48], distinct, each in [0, nu) (checked once per tensor, never while a
            CUDA graph is captured; ids that escape the check are skipped).
        ctrl: float32 [W, nu], any strides (e.g. ``sim.view("ctrl")``).

    Raises:
        RuntimeError: a wrong dtype, shape, device, aliasing or id (every output untouched).
    """
    if ctrl.dim() == 2:
        check_index("hybrid_step", "act_ids", act_ids, ctrl.shape[1], "nu = ctrl.size(1)", unique=True, ref=ctrl)
    torch.ops.flycuda.hybrid_step.default(drive, thorax_z, tarsus5_z, stumbling_forces, heading, params, state,
                                          persistence, act_ids, ctrl)


@torch.library.register_fake("flycuda::hybrid_step")
def _hybrid_step_fake(drive, thorax_z, tarsus5_z, stumbling_forces, heading, params, state, persistence, act_ids,
                      ctrl):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.hybrid_step: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} "
                         f"{tuple(ctrl.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == HYBRID_COLUMNS,
                 lambda: f"flycuda.hybrid_step: argument 'act_ids' must be [{HYBRID_COLUMNS}], got "
                         f"{tuple(act_ids.shape)}")
    torch._check(state.dim() == 3 and state.shape[0] == ctrl.shape[0],
                 lambda: f"flycuda.hybrid_step: argument 'state' must be [W, 5, 6], got {tuple(state.shape)}")
    check_same_device("hybrid_step", "ctrl", ctrl, drive=drive, thorax_z=thorax_z, tarsus5_z=tarsus5_z,
                      stumbling_forces=stumbling_forces, heading=heading, params=params, state=state,
                      persistence=persistence, act_ids=act_ids)


def rule_params(timestep: float, duration: float, *, weights: dict | None = None, margin: float = 0.001,
                device=None) -> torch.Tensor:
    """The rules tensor of :func:`rule_step`: float64 [7] in launch_plan.RULES' order.

    Args:
        timestep: seconds per call (FlyGym's controller ``timestep``).
        duration: seconds of one preprogrammed step (FlyGym's ``PreprogrammedSteps.duration``,
            :data:`flycuda.control.steps.STEP_DURATION`); a stepping leg's phase advances by
            ``2 pi timestep / duration`` per call, computed as FlyGym computes it.
        weights: FlyGym's weights by name (:data:`RULE_WEIGHTS` by default; missing names keep
            theirs).
        margin: how far (relative) below the best combined score a leg may still be chosen.
        device: where the tensor goes.

    Raises:
        ValueError: a non-positive timestep or duration, an unknown weight, a non-finite value.
    """
    for name, v in (("timestep", timestep), ("duration", duration)):
        if not (isinstance(v, (int, float)) and v > 0):
            raise ValueError(f"flycuda.rule_params: {name} must be > 0 seconds, got {v!r}")
    w = dict(RULE_WEIGHTS)
    unknown = sorted(set(weights or {}) - set(w))
    if unknown:
        raise ValueError(f"flycuda.rule_params: unknown weight(s) {unknown}; expected some of {sorted(w)}")
    w.update({k: float(v) for k, v in (weights or {}).items()})
    values = dict(w, margin=float(margin), increment=2 * np.pi * (timestep / duration))
    out = torch.tensor([values[k] for k in RULES], dtype=torch.float64)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"flycuda.rule_params: every weight, the margin and the increment must be finite, got "
                         f"{dict(zip(RULES, out.tolist()))}")
    return out.to(device)


def rule_rng(seeds, device=None) -> torch.Tensor:
    """Each world's random stream for :func:`rule_step`: int64 [W, 626], row w NumPy's
    ``RandomState(seeds[w])`` (the MT19937 key, its position) and 0 steps taken, as FlyGym's
    ``RuleBasedController(seed=...)`` starts."""
    rows = []
    for s in seeds:
        _, key, pos, *_ = np.random.RandomState(int(s)).get_state()
        rows.append(np.concatenate([key.astype(np.int64), [pos, 0]]))
    return torch.from_numpy(np.array(rows, dtype=np.int64).reshape(-1, RULE_RNG_COLS)).to(device)


def rule_step(params: torch.Tensor, rules: torch.Tensor, state: torch.Tensor, rng: torch.Tensor,
              act_ids: torch.Tensor, ctrl: torch.Tensor) -> None:
    """One step of FlyGym's rule-based controller (``RuleBasedController.step``) in every
    world, in place (csrc/kernels/rule_step.cuh says it step by step; flycuda/control/rules.py
    in words)::

        ctrl[w, act_ids[7 leg + m]] = float32(angle of leg's slot m)   (FlyGym's default DOF order)
        ctrl[w, act_ids[42 + leg]]  = 1.0 if adhesion on else 0.0

    The random draws are NumPy's ``RandomState.choice`` on each world's own stream, word for
    word; every float64 operation is rounded on its own, in FlyGym's order (the same bits on
    the CPU and CUDA).

    Args:
        params: float64 from :func:`hybrid_params` with ``swing_extension=0`` (the steps and
            the swing ends, read from its adhesion ends: with an extension the rules would
            see the extended swing; its CPG and rule entries are not read).
        rules: float64 [7] from :func:`rule_params`.
        state: float64 [W, 5, 6], contiguous: phases, stepping (0/1), the scores of rules 1,
            2 and 3 (updated).
        rng: int64 [W, 626], contiguous: from :func:`rule_rng` (updated; a position outside
            [0, 624) regenerates the key first, never a read outside the row).
        act_ids: int32/int64 [48], distinct, each in [0, nu) (checked once per tensor, never
            while a CUDA graph is captured; ids that escape the check are skipped).
        ctrl: float32 [W, nu], any strides (e.g. ``sim.view("ctrl")``).

    Raises:
        RuntimeError: a wrong dtype, shape, device, aliasing or id (every output untouched).
    """
    if ctrl.dim() == 2:
        check_index("rule_step", "act_ids", act_ids, ctrl.shape[1], "nu = ctrl.size(1)", unique=True, ref=ctrl)
    torch.ops.flycuda.rule_step.default(params, rules, state, rng, act_ids, ctrl)


@torch.library.register_fake("flycuda::rule_step")
def _rule_step_fake(params, rules, state, rng, act_ids, ctrl):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.rule_step: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} "
                         f"{tuple(ctrl.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == HYBRID_COLUMNS,
                 lambda: f"flycuda.rule_step: argument 'act_ids' must be [{HYBRID_COLUMNS}], got {tuple(act_ids.shape)}")
    torch._check(state.dim() == 3 and tuple(state.shape) == (ctrl.shape[0], 5, 6),
                 lambda: f"flycuda.rule_step: argument 'state' must be [W, 5, 6], got {tuple(state.shape)}")
    torch._check(rng.dim() == 2 and tuple(rng.shape) == (ctrl.shape[0], RULE_RNG_COLS),
                 lambda: f"flycuda.rule_step: argument 'rng' must be [W, {RULE_RNG_COLS}], got {tuple(rng.shape)}")
    check_same_device("rule_step", "ctrl", ctrl, params=params, rules=rules, state=state, rng=rng, act_ids=act_ids)
