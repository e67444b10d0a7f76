"""Pure-PyTorch reference of ``flycuda.ops.hybrid_step`` (FlyGym's walking controllers),
same name and arguments, written from FlyGym's own code (``flygym_demo.complex_terrain``:
``CPGNetwork.step``, ``PreprogrammedSteps.get_joint_angles``, ``HybridController.step``,
``HybridTurningController.step``) rather than from the kernel: vectorized over worlds and
legs, in float64, each operation in FlyGym's order (the coupling summed over j in order,
scipy's spline evaluation, NumPy's modulo and interp). ``sin`` is torch's (its vector and
scalar paths may differ from the C library's in the last bit). For checking.

``rule_step`` (FlyGym's ``RuleBasedController``) is written from its ``step`` world by world
with NumPy, each world's draws from a ``numpy.random.RandomState`` set to the world's stream
(not from the kernel's own MT19937)."""

from __future__ import annotations

import numpy as np
import torch

from ..ops.launch_plan import HYBRID_SCALARS, RULES
from ..ops.walking import DOF_ORDER, LEGS, params_slice

__all__ = ["hybrid_step", "rule_step", "py_mod", "psi", "TWO_PI", "RULES_GRAPH"]

TWO_PI = 6.283185307179586  # 2 * np.pi


def py_mod(a: torch.Tensor, b: float) -> torch.Tensor:
    """``a % b`` as Python and NumPy compute it for floats (C's fmod, then the sign of
    ``b``; a zero is +0.0): bit for bit, unlike ``a - b * floor(a / b)``."""
    m = torch.fmod(a, b)
    m = torch.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)
    return torch.where(m == 0, torch.zeros_like(m), m)


def psi(knots: torch.Tensor, coeffs: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
    """Each leg's seven angles at ``phases`` [..., 6]: scipy's evaluation of the periodic
    splines ``coeffs`` [6, 4, 44, 7] on ``knots`` [45] (PPoly ``c`` and ``x``), float64 [..., 6, 7]."""
    n = knots.numel() - 1
    xv = py_mod(phases - float(knots[0]), float(knots[n] - knots[0])) + float(knots[0])
    i = (torch.searchsorted(knots, xv.contiguous(), right=True) - 1).clamp(0, n - 1)  # 2 pi: the last piece
    s = (xv - knots[i]).unsqueeze(-1)
    legs = torch.arange(6, device=phases.device).expand_as(i)
    c = coeffs[legs.unsqueeze(-1), torch.arange(4, device=phases.device), i.unsqueeze(-1)]  # [..., 6, 4, 7]
    res = c[..., 3, :] + 0.0
    res = res + c[..., 2, :] * s
    res = res + c[..., 1, :] * (s * s)
    return res + c[..., 0, :] * ((s * s) * s)


def _interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """``np.interp(x[w, l], xp[l], fp)`` for x in [0, xp[-1]], as NumPy computes it."""
    pts = xp.expand(x.shape[0], *xp.shape).contiguous()
    j = (torch.searchsorted(pts, x[..., None].contiguous(), right=True) - 1).squeeze(-1).clamp(0, xp.shape[-1] - 1)
    j1 = (j + 1).clamp(max=xp.shape[-1] - 1)
    x0, x1 = pts.gather(-1, j[..., None])[..., 0], pts.gather(-1, j1[..., None])[..., 0]
    y0, y1 = fp[j], fp[j1]
    inside = (j < xp.shape[-1] - 1) & (x0 != x)
    slope = (y1 - y0) / torch.where(inside, x1 - x0, 1.0)
    return torch.where(inside, slope * (x - x0) + y0, y0)


def _cpg_step(th, r, freqs, amps, weights, biases, convergence, dt) -> tuple[torch.Tensor, torch.Tensor]:
    """FlyGym's ``calculate_ddt`` and Euler step, [W, 6] each."""
    coupling = torch.zeros_like(th)  # NumPy's sum: from +0.0, j = 0 .. 5 in order
    for j in range(6):
        coupling = coupling + (r[:, j:j + 1] * weights[:, j]) * torch.sin((th[:, j:j + 1] - th) - biases[:, j])
    dth = TWO_PI * freqs + coupling
    dr = convergence * (amps - r)
    return th + dth * dt, r + dr * dt


def hybrid_step(drive: torch.Tensor, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor, stumbling_forces: torch.Tensor,
                heading: torch.Tensor, params: torch.Tensor, state: torch.Tensor, persistence: torch.Tensor,
                act_ids: torch.Tensor, ctrl: torch.Tensor) -> None:
    """Reference for ``flycuda.ops.hybrid_step``: one step of every world, in place."""
    P = {name: params[params_slice(name)] for name in ("knots", "coeffs", "neutral", "adhesion_end", "gain_points",
                                                        "gain_values", "vectors", "freqs", "amps", "convergence",
                                                        "weights", "biases", "scalars")}
    sc = dict(zip(HYBRID_SCALARS, P["scalars"].tolist()))
    W = state.shape[0]
    th, r, rc, sg = (state[:, k].clone() for k in range(4))
    cnt = persistence.clone()
    base_f, base_a = P["freqs"].expand(W, 6), P["amps"].expand(W, 6)
    if sc["turning"]:
        d = drive.double().repeat_interleave(3, dim=1)
        amps, freqs = d.abs(), base_f * torch.where(d >= 0, 1.0, -1.0)
    else:
        amps, freqs = base_a, base_f
    dev = state.device
    net = torch.zeros(W, 6, dtype=torch.float64, device=dev)
    if sc["rules"]:
        below = thorax_z.double()[:, None] - tarsus5_z.double()
        top = below.topk(3, dim=1).values  # a NaN ranks first: its comparison fails, as after NumPy's argsort
        chosen = 5 - below.flip(1).argmax(1)  # of equal farthest legs, the last
        sel = torch.where(top[:, 0] > top[:, 2] + sc["retract_height"], chosen, -1)
        picked = torch.arange(6, device=dev) == sel[:, None]
        cnt[picked & (rc > sc["persist_from"])] = 1
        cnt[cnt > 0] += 1
        cnt[cnt > sc["persist_steps"]] = 0
        f, h = stumbling_forces.double(), heading.double()
        along = (f[..., 0] * h[:, None, None, 0] + f[..., 1] * h[:, None, None, 1]) + f[..., 2] * h[:, None, None, 2]
        stumbling = (along < sc["stumble_force"]).any(-1)
    th, r = _cpg_step(th, r, freqs, amps, P["weights"].view(6, 6), P["biases"].view(6, 6), P["convergence"],
                      sc["timestep"])
    neutral = P["neutral"].view(6, 7)
    angles = neutral + r.unsqueeze(-1) * (psi(P["knots"], P["coeffs"].view(6, 4, 44, 7), th) - neutral)
    reduced = py_mod(th, TWO_PI)
    if sc["rules"]:
        decayed = rc - sc["retract_down"]
        rc = torch.where(picked | (cnt > 0), rc + sc["retract_up"], torch.where(decayed > 0, decayed, 0.0))
        decayed = sg - sc["stumble_down"]
        sg = torch.where(stumbling, sg + sc["stumble_up"], torch.where(decayed > 0, decayed, 0.0))
        net = torch.where(rc > 0, rc, sg)
        sg = torch.where(rc > 0, 0.0, sg)
        net = net.clamp(0.0, sc["max_correction"]) * _interp(reduced, P["gain_points"].view(6, 5), P["gain_values"])
        angles = angles + net[..., None] * P["vectors"].view(6, 7)
    adhesion = ~((reduced > 0.0) & (reduced < P["adhesion_end"])) if sc["adhesion"] else torch.zeros(W, 6, dtype=torch.bool, device=dev)
    state.copy_(torch.stack([th, r, rc, sg, net], dim=1))
    persistence.copy_(cnt)
    out = torch.cat([angles[..., list(DOF_ORDER)].flatten(1).float(), adhesion.float()], dim=1)  # [W, 48]
    ids = act_ids.long()
    keep = (ids >= 0) & (ids < ctrl.shape[1])
    ctrl[:, ids[keep]] = out[:, keep]


RULES_GRAPH = {
    "rule1": {"lm": ("lf",), "lh": ("lm",), "rm": ("rf",), "rh": ("rm",)},
    "rule2": {"lf": ("rf",), "lm": ("rm", "lf"), "lh": ("rh", "lm"), "rf": ("lf",), "rm": ("lm", "rf"),
              "rh": ("lh", "rm")},
    "rule3": {"lf": ("rf", "lm"), "lm": ("rm", "lh"), "lh": ("rh",), "rf": ("lf", "rm"), "rm": ("lm", "rh"),
              "rh": ("lh",)},
}
"""FlyGym's ``construct_rules_graph()``: each source leg's targets."""


def _rule_world(st: np.ndarray, key: np.ndarray, swing_end: np.ndarray, w8: dict, rs: np.random.RandomState) -> None:
    """One ``RuleBasedController.step`` of one world, in place: ``st`` [5, 6] (phases, stepping,
    rule1..3 scores), ``key`` [626] (MT19937 key, position, steps taken); ``rs`` is any
    RandomState, set to the world's stream here (one for all worlds: building one costs
    more than the step)."""
    rs.set_state(("MT19937", key[:624].astype(np.uint32), int(key[624])))
    phases, stepping = st[0], st[1] != 0
    if key[625] == 0:
        sel = rs.choice(np.array([0, 1, 3, 4]))
    else:
        combined = st[2] + st[3] + st[4]
        thr = combined.max()
        thr = max(0, thr - np.abs(thr) * w8["margin"])
        eligible = np.where((combined >= thr) & (combined > 0) & ~stepping)[0]
        sel = None if len(eligible) == 0 else int(rs.choice(eligible))
    if sel is not None:
        stepping[sel] = True
    phases[stepping] += w8["increment"]
    done = phases >= 2 * np.pi
    phases[done] = 0
    stepping[done] = False
    st[2:] = 0
    for i, leg in enumerate(LEGS):
        swinging = 0 < phases[i] < swing_end[i]
        for tgt in RULES_GRAPH["rule1"].get(leg, ()):
            st[2, LEGS.index(tgt)] = w8["rule1"] if swinging else 0
    for row, rule in ((3, "rule2"), (4, "rule3")):
        for i, leg in enumerate(LEGS):
            ratio = max(0, phases[i] - swing_end[i]) / (2 * np.pi - swing_end[i])
            if ratio == 0:
                continue
            for tgt in RULES_GRAPH[rule].get(leg, ()):
                weight = w8[f"{rule}_{'ipsi' if leg[0] == tgt[0] else 'contra'}"]
                st[row, LEGS.index(tgt)] += weight * ((1 - ratio) if rule == "rule2" else ratio)
    st[1] = stepping
    _, k, pos, *_ = rs.get_state()
    key[:624], key[624], key[625] = k, pos, key[625] + 1


def rule_step(params: torch.Tensor, rules: torch.Tensor, state: torch.Tensor, rng: torch.Tensor,
              act_ids: torch.Tensor, ctrl: torch.Tensor) -> None:
    """Reference for ``flycuda.ops.rule_step``: one step of every world, in place."""
    swing_end = params[params_slice("adhesion_end")].cpu().numpy()
    w8 = dict(zip(RULES, rules.tolist()))
    st, keys = state.cpu().numpy().copy(), rng.cpu().numpy().copy()
    rs = np.random.RandomState(0)
    for w in range(st.shape[0]):
        _rule_world(st[w], keys[w], swing_end, w8, rs)
    state.copy_(torch.from_numpy(st))
    rng.copy_(torch.from_numpy(keys))
    th = state[:, 0]
    neutral = params[params_slice("neutral")].view(6, 7)
    angles = neutral + 1.0 * (psi(params[params_slice("knots")], params[params_slice("coeffs")].view(6, 4, 44, 7), th)
                              - neutral)
    reduced = py_mod(th, TWO_PI)
    adhesion = ~((reduced > 0.0) & (reduced < params[params_slice("adhesion_end")]))
    out = torch.cat([angles[..., list(DOF_ORDER)].flatten(1).float(), adhesion.float()], dim=1)  # [W, 48]
    ids = act_ids.long()
    keep = (ids >= 0) & (ids < ctrl.shape[1])
    ctrl[:, ids[keep]] = out[:, keep]
