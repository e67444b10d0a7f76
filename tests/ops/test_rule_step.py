"""rule_step (flycuda.ops.walking: FlyGym's rule-based controller, one world per thread) against
its reference (flycuda.reference.walking.rule_step: FlyGym's step with NumPy's own RandomState),
on the CPU and on CUDA when present: odd numbers of worlds, both index dtypes, strided and
poisoned controls, mid-walk states (legs stepping, scores of every sign, streams about to
regenerate their key, first steps), over many steps, bit for bit; bad input leaves every output
untouched. FlyGym itself: tests/control."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.cases import assert_graph_replays_eager, assert_refused_untouched
from helpers.cases import hybrid_controls as controls
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.control import STEP_DURATION, load_steps, tripod_params
from flycuda.ops.launch_plan import RULE_RNG_COLS
from flycuda.reference import walking as ref

MANY_BLOCKS = 300  # worlds: 19 blocks of 16 worlds on CUDA (37 worlds: 3 blocks, the last partial)


def _params() -> torch.Tensor:
    t, c = load_steps(), tripod_params()
    return ops.hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, c.freqs, c.amps, c.weights, c.biases,
                             c.convergence, timestep=1e-4, rules=False, turning=False, swing_extension=0.0)


def _state(W: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A mid-walk state and streams: some legs stepping at random phases, scores of every sign,
    each world's stream at a random position (some a few words before the key regenerates),
    a few worlds about to take their first step."""
    g = np.random.default_rng(seed)
    state = np.zeros((W, 5, 6))
    stepping = g.random((W, 6)) < 0.3
    state[:, 0] = np.where(stepping, g.random((W, 6)) * 2 * np.pi, 0.0)
    state[:, 1] = stepping
    state[:, 2] = np.where(g.random((W, 6)) < 0.3, -10.0, 0.0)
    state[:, 3:] = g.random((W, 2, 6)) * 3 * (g.random((W, 2, 6)) < 0.6)
    rows = []
    for w in range(W):
        rs = np.random.RandomState(int(g.integers(2**31)))
        rs.randint(0, 2**31, size=int(g.choice([0, 5, 300, 615, 622])))  # positions near the key's end too
        _, key, pos, *_ = rs.get_state()
        rows.append(np.concatenate([key.astype(np.int64), [pos, 0 if w % 7 == 0 else int(g.integers(1, 99))]]))
    return torch.from_numpy(state), torch.from_numpy(np.array(rows, dtype=np.int64))


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("W", [1, 5, 37, MANY_BLOCKS])
@pytest.mark.parametrize("kind,index_dtype", [("contiguous", torch.int64), ("strided", torch.int32),
                                              ("transposed", torch.int64)])
def test_matches_reference(device, W, kind, index_dtype):
    if W == MANY_BLOCKS and device == "cpu":
        pytest.skip("the GPU's many blocks; on the CPU 37 worlds run the same per-world loop (and the emulator's cases the blocks)")
    par, rules = _params(), ops.rule_params(1e-3, STEP_DURATION)  # 135 steps a leg's step: many complete
    state, rng = _state(W, W)
    ids, ctrl = controls(W, kind, index_dtype, W)
    got = dict(state=state.clone().to(device), rng=rng.clone().to(device), ctrl=ctrl.clone().to(device))
    seen = {"chosen": 0, "completed": 0, "first": 0, "regenerated": 0}
    for step in range(300):
        before = state.clone(), rng.clone()
        ref.rule_step(par, rules, state, rng, ids, ctrl)
        ops.rule_step(par.to(device), rules.to(device), got["state"], got["rng"], ids.to(device), got["ctrl"])
        assert torch.equal(got["state"].cpu(), state), step
        assert torch.equal(got["rng"].cpu(), rng), step
        assert torch.equal(got["ctrl"].cpu().nan_to_num(), ctrl.nan_to_num()), step
        seen["chosen"] += int(((state[:, 1] != 0) & (before[0][:, 1] == 0)).sum())
        seen["completed"] += int(((state[:, 1] == 0) & (before[0][:, 1] != 0)).sum())
        seen["first"] += int((before[1][:, -1] == 0).sum())
        seen["regenerated"] += int((rng[:, 624] < before[1][:, 624]).sum())
    others = torch.ones(ctrl.shape[1], dtype=torch.bool)
    others[ids.long()] = False
    assert got["ctrl"].cpu()[:, others].isnan().all(), "columns outside act_ids stay untouched"
    assert seen["chosen"] and seen["completed"] and seen["first"] and (W < 37 or seen["regenerated"]), seen


def test_rule_rng_is_numpys_stream_and_params_are_flygyms():
    rng = ops.rule_rng([0, 7])
    assert rng.shape == (2, RULE_RNG_COLS) and rng.dtype == torch.int64
    _, key, pos, *_ = np.random.RandomState(7).get_state()
    assert np.array_equal(rng[1, :624].numpy(), key.astype(np.int64)) and rng[1, 624] == pos and rng[1, 625] == 0
    rules = ops.rule_params(1e-4, 0.135)
    assert rules.tolist() == [-10.0, 2.5, 1.0, 3.0, 2.0, 0.001, 2 * np.pi * (1e-4 / 0.135)]
    assert ops.rule_params(1e-4, 0.135, weights={"rule1": -5})[0] == -5.0
    with pytest.raises(ValueError, match=r"unknown weight\(s\) \['rule4'\]"):
        ops.rule_params(1e-4, 0.135, weights={"rule4": 1.0})
    with pytest.raises(ValueError, match=r"duration must be > 0 seconds, got 0"):
        ops.rule_params(1e-4, 0)
    with pytest.raises(ValueError, match=r"must be finite"):
        ops.rule_params(1e-4, 0.135, margin=float("nan"))


def _args(W=3):
    state, rng = _state(W, 0)
    ids, ctrl = controls(W, "contiguous", torch.int64, 0)
    return dict(params=_params(), rules=ops.rule_params(1e-4, STEP_DURATION), state=state, rng=rng, act_ids=ids,
                ctrl=ctrl)


@pytest.mark.parametrize("change,match", [
    (dict(rules=torch.zeros(6, dtype=torch.float64)), r"argument 'rules' must have shape \[7\], got \[6\]"),
    (dict(params=torch.zeros(10, dtype=torch.float64)), r"argument 'params' must have shape \[\d+\], got \[10\]"),
    (dict(state=torch.zeros(3, 5, 6)), r"argument 'state' must have dtype Double, got Float"),
    (dict(rng=torch.zeros(3, 626, dtype=torch.int32)), r"argument 'rng' must have dtype Long, got Int"),
    (dict(rng=torch.zeros(3, 625, dtype=torch.int64)), r"argument 'rng' must have shape \[3, 626\], got \[3, 625\]"),
    (dict(act_ids=torch.arange(47)), r"argument 'act_ids' must be a contiguous int32/int64 \[48\]"),
    (dict(act_ids=torch.cat([torch.arange(47), torch.tensor([60])])),
     r"argument 'act_ids' must hold indices in \[0, 60\).*act_ids\[47\] = 60"),
    (dict(ctrl=torch.zeros(1, 60).expand(3, 60)), r"argument 'ctrl' must not have overlapping memory"),
])
def test_bad_input_is_refused_and_nothing_written(change, match):
    assert_refused_untouched(ops.rule_step, dict(_args(), **change), ("state", "rng", "ctrl"), match)


def test_outputs_must_not_alias_inputs():
    a = _args()
    a["state"] = a["params"][:90].view(3, 5, 6)
    with pytest.raises(RuntimeError, match=r"argument 'state' must not share memory with argument 'params'"):
        ops.rule_step(**a)


def test_opcheck():
    a = _args(W=5)
    torch.library.opcheck(torch.ops.flycuda.rule_step.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_steps():
    """rule_step inside a CUDA graph: 300 replays equal 300 eager launches bit for bit (each
    world's stream advances on the device)."""
    a = {k: v.cuda() for k, v in _args(W=1000).items()}
    assert_graph_replays_eager(ops.rule_step, a, ("state", "rng", "ctrl"), 300)


def test_a_position_outside_the_key_regenerates_it():
    """rng[w, 624] outside [0, 624) (a corrupted stream; negative too) reads no word outside the
    world's row: the key regenerates first, as at 624."""
    a = _args(W=3)
    a["state"][:, 1:] = 0.0
    a["rng"][:, 625] = 0  # first steps: each world draws
    odd = {k: v.clone() for k, v in a.items()}
    a["rng"][:, 624] = 624
    odd["rng"][:, 624] = torch.tensor([-5, -(2 ** 62), 10 ** 6])
    ops.rule_step(**a)
    ops.rule_step(**odd)
    for name in ("state", "rng", "ctrl"):
        assert torch.equal(a[name].nan_to_num(), odd[name].nan_to_num()), name
