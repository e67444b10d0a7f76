"""hybrid_step (flycuda.ops.walking: FlyGym's walking controllers, one world per thread)
against its reference (flycuda.reference.walking), on the CPU and on CUDA when present: odd
numbers of worlds, both sensory dtypes and index dtypes, strided and poisoned controls, the
three controllers (CPG; hybrid; turning), inputs that fire every rule, negative drives, over
many steps; bad input leaves every output untouched. FlyGym itself: tests/control."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.cases import HYBRID_MODES as MODES
from helpers.cases import assert_graph_replays_eager, assert_refused_untouched, ulps32
from helpers.cases import hybrid_controls as controls
from helpers.cases import hybrid_params as params
from helpers.cases import hybrid_senses as senses
from helpers.cases import hybrid_state as initial_state
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.control import load_steps, tripod_params
from flycuda.ops.launch_plan import HYBRID_PARAMS
from flycuda.reference import walking as ref

MANY_BLOCKS = 300  # worlds: 19 blocks of 16 worlds on CUDA (37 worlds: 3 blocks, the last partial)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("W", [1, 5, 37, MANY_BLOCKS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind,index_dtype", [("contiguous", torch.int64), ("strided", torch.int32),
                                              ("transposed", torch.int64)])
def test_matches_reference(device, mode, W, dtype, kind, index_dtype):
    if W == MANY_BLOCKS and device == "cpu":
        pytest.skip("the GPU's many blocks; on the CPU 37 worlds run the same per-world loop (and the emulator's cases the blocks)")
    rng = np.random.default_rng(W)
    par = params(mode)
    state, cnt = initial_state(W, W)
    ids, ctrl = controls(W, kind, index_dtype, W)
    got = dict(state=state.clone().to(device), cnt=cnt.clone().to(device), ctrl=ctrl.clone().to(device))
    par_d, ids_d = par.to(device), ids.to(device)
    fired = torch.zeros(3, dtype=torch.long)
    for step in range(120):
        inputs = senses(rng, W, dtype, step)
        ref.hybrid_step(*inputs, par, state, cnt, ids, ctrl)
        ops.hybrid_step(*(t.to(device) for t in inputs), par_d, got["state"], got["cnt"], ids_d, got["ctrl"])
        s = got["state"].cpu()
        assert (s[:, :2] - state[:, :2]).abs().max() <= 1e-11, (step, "phases, magnitudes")  # sin's last bit
        assert torch.equal(s[:, 2:4], state[:, 2:4]) and torch.equal(got["cnt"].cpu(), cnt), (step, "rules")
        assert (s[:, 4] - state[:, 4]).abs().max() <= 1e-9, (step, "net corrections")
        c = got["ctrl"].cpu()
        cols = ids.long()
        assert ulps32(c[:, cols[:42]], ctrl[:, cols[:42]]) <= 1, (step, "angles")
        assert torch.equal(c[:, cols[42:]], ctrl[:, cols[42:]]), (step, "adhesion")
        others = torch.ones(ctrl.shape[1], dtype=torch.bool)
        others[cols] = False
        assert c[:, others].isnan().all(), "columns outside act_ids stay untouched"
        fired += torch.stack([state[:, 2].gt(0).any(), state[:, 3].gt(0).any(), cnt.gt(0).any()]).long()
    if mode != "cpg":
        assert fired.all(), f"retraction, stumbling, persistence fired on {fired.tolist()} steps"


def test_the_cpg_and_the_hybrid_controller_without_drive():
    """Without turning the drive is never read (NaN changes nothing); the hybrid controller
    with drives of 1.0 is the turning controller at drives of 1.0 (FlyGym's equivalence)."""
    W, runs = 4, {}
    for mode, drive_value in (("hybrid", float("nan")), ("turning", 1.0)):
        state, cnt = initial_state(W, 3)
        ids, ctrl = controls(W, "contiguous", torch.int64, 3)
        par = params(mode)
        for step in range(50):
            drive, *rest = senses(np.random.default_rng(step), W, torch.float64, step)
            ops.hybrid_step(torch.full_like(drive, drive_value), *rest, par, state, cnt, ids, ctrl)
        runs[mode] = (state, ctrl)
    assert torch.equal(runs["hybrid"][0], runs["turning"][0])
    assert torch.equal(runs["hybrid"][1].nan_to_num(), runs["turning"][1].nan_to_num())


def _args(W=3, dtype=torch.float64):
    state, cnt = initial_state(W, 0)
    ids, ctrl = controls(W, "contiguous", torch.int64, 0)
    return dict(zip(("drive", "thorax_z", "tarsus5_z", "stumbling_forces", "heading"),
                    senses(np.random.default_rng(0), W, dtype, 0)),
                params=params("turning"), state=state, persistence=cnt, act_ids=ids, ctrl=ctrl)


@pytest.mark.parametrize("change,match", [
    (dict(drive=torch.zeros(3, 3, dtype=torch.float64)), r"argument 'drive' must have shape \[3, 2\], got \[3, 3\]"),
    (dict(heading=torch.zeros(3, 3)), r"argument 'heading' must have dtype Double, got Float"),
    (dict(tarsus5_z=torch.zeros(6, 3, dtype=torch.float64).t()), r"argument 'tarsus5_z' must be contiguous"),
    (dict(params=torch.zeros(10, dtype=torch.float64)),
     rf"argument 'params' must have shape \[{sum(n for _, n in HYBRID_PARAMS)}\], got \[10\]"),
    (dict(state=torch.zeros(3, 5, 6)), r"argument 'state' must have dtype Double, got Float"),
    (dict(persistence=torch.zeros(3, 6, dtype=torch.int32)), r"argument 'persistence' must have dtype Long"),
    (dict(act_ids=torch.arange(47)), r"argument 'act_ids' must be a contiguous int32/int64 \[48\]"),
    (dict(act_ids=torch.cat([torch.arange(47), torch.tensor([60])])),
     r"argument 'act_ids' must hold indices in \[0, 60\).*act_ids\[47\] = 60"),
    (dict(act_ids=torch.cat([torch.arange(47), torch.tensor([3])])), r"argument 'act_ids' must not repeat an index"),
    (dict(ctrl=torch.zeros(3, 60, dtype=torch.float64)), r"argument 'ctrl' must be a float32 \[W, nu\]"),
    (dict(ctrl=torch.zeros(1, 60).expand(3, 60)), r"argument 'ctrl' must not have overlapping memory"),
])
def test_bad_input_is_refused_and_nothing_written(change, match):
    assert_refused_untouched(ops.hybrid_step, dict(_args(), **change), ("state", "persistence", "ctrl"), match)


def test_outputs_must_not_alias_inputs():
    a = _args()
    a["state"] = a["params"][:90].view(3, 5, 6)
    with pytest.raises(RuntimeError, match=r"argument 'state' must not share memory with argument 'params'"):
        ops.hybrid_step(**a)


def test_hybrid_params_checks_its_tables():
    t, c = load_steps(), tripod_params()
    with pytest.raises(ValueError, match=r"coeffs must have shape \[6, 4, 44, 7\], got \(4, 44, 7\)"):
        ops.hybrid_params(t.knots, t.coeffs[0], t.neutral, t.swing_end, c.freqs, c.amps, c.weights, c.biases,
                          c.convergence, timestep=1e-4)
    with pytest.raises(ValueError, match=r"timestep must be > 0 seconds, got 0"):
        ops.hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, c.freqs, c.amps, c.weights, c.biases,
                          c.convergence, timestep=0)


def test_opcheck():
    a = _args(W=5)
    torch.library.opcheck(torch.ops.flycuda.hybrid_step.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_steps():
    """hybrid_step inside a CUDA graph (as the env's control step runs it): 200 replays equal
    200 eager launches bit for bit (the inputs are read on the device at every replay)."""
    a = {k: v.cuda() for k, v in _args(W=1000, dtype=torch.float32).items()}
    assert_graph_replays_eager(ops.hybrid_step, a, ("state", "persistence", "ctrl"), 200)
