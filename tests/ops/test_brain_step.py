"""brain_step (flycuda.ops.brain: the FlyWire whole-brain LIF model for B brains, issue 55) against
its reference (flycuda.reference.brain), on the CPU and on CUDA when present: random states (neurons
at rest, refractory, near threshold, with pending input), odd sizes, silenced neurons, Poisson input,
many steps each from the last, a log that overflows. Bit for bit: float64 with no FMA, and the
synaptic input summed as integers (the atomics' order cannot show). Held against Brian2 itself:
tests/brain/test_brian2.py. Bad input is refused in one line naming the argument, nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.brain import brain_args
from helpers.cases import args_to, assert_refused_untouched, clone_args
from helpers.devices import cpu_and_cuda

from flycuda import brain, ops
from flycuda.errors import FlycudaError
from flycuda.reference import brain as ref

M = r"flycuda.brain_step: argument "
STATE = ("v", "g", "last", "acc", "ring", "log", "log_count")


def _assert_same(got: dict, want: dict) -> None:
    for k in STATE:
        if k == "log":  # the entries past the count stay as they were; the rest in any order
            n = min(int(want["log_count"][0]), len(want["log"]))
            assert torch.equal(got[k][n:].cpu(), want[k][n:]), k
            assert torch.equal(got[k][:n].cpu().sort().values, want[k][:n].sort().values), k
        else:
            assert torch.equal(got[k].cpu(), want[k]), (k, (got[k].cpu() != want[k]).sum())


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("B,N", [(1, 1), (1, 2), (3, 37), (2, 301), (5, 257)])
def test_matches_reference(device, B, N):
    a = brain_args(B, N, seed=B * 1000 + N)
    want = clone_args(a)
    ref.brain_step(**want)
    got = args_to(clone_args(a), device)
    ops.brain_step(**got)
    _assert_same(got, want)
    assert int(want["log_count"][0]) > 3 or N < 10, "spikes were logged"


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_many_steps_stay_equal(device):
    """300 steps from one state, the step counter advanced between them: bit for bit, with spikes
    delivered through every ring slot, refractory periods ending and Poisson events."""
    want = brain_args(3, 211, degree=20, seed=5, log=1 << 16)
    got = args_to(clone_args(want), device)
    spikes = 0
    for _ in range(300):
        ref.brain_step(**want)
        ops.brain_step(**got)
        want["step"] += 1
        got["step"] += 1
    _assert_same(got, want)
    spikes = int(want["log_count"][0])
    assert spikes > 300 and (want["g"] != 0).any()


def test_a_neuron_at_rest_stays_there_bit_for_bit():
    """No input, no event: v_0 and g = 0 are a fixed point (the kernels skip such a neuron)."""
    a = brain_args(2, 50, seed=3)
    a.update(v=torch.full((2, 50), brain.Model().v_0, dtype=torch.float64), g=torch.zeros(2, 50, dtype=torch.float64),
             ring=torch.zeros_like(a["ring"]), rate=torch.zeros(2, 50, dtype=torch.float64))
    before = clone_args(a)
    ops.brain_step(**a)
    for k in ("v", "g", "last", "acc", "ring", "log_count"):
        assert torch.equal(a[k], before[k]), k
    assert brain.Model().rest_is_fixed()


def test_the_log_counts_past_its_capacity():
    a = brain_args(4, 301, seed=9, log=5)
    want = clone_args(a)
    ref.brain_step(**want)
    ops.brain_step(**a)
    assert int(a["log_count"][0]) == int(want["log_count"][0]) > 5
    assert set(a["log"][3:].tolist()) <= set(want["log"].tolist()) | {-7}


def test_the_poisson_stream_is_the_reference():
    """The events the op adds are brain_uniform's: a rate of 1/dt fires every step, 0 never, and
    poisson_events lists exactly the neurons whose v jumped."""
    model = brain.Model()
    c = brain.synthetic(40, 0, seed=1)
    b = brain.Brains(c, 2, seeds=[11, -12])
    b.set_rates(np.arange(0, 40, 2), 2000.0)
    b.set_rates([4], 1 / model.dt)
    v0 = b.v.clone()
    b.step()
    jumped = (b.v != v0).nonzero().numpy()
    events = ref.poisson_events(b.seeds.numpy(), b.rate.numpy(), 1, model.dt)
    assert sorted(map(tuple, jumped)) == sorted(map(tuple, events[:, 1:]))
    assert {4} <= set(events[events[:, 1] == 0, 2]) and {4} <= set(events[events[:, 1] == 1, 2])
    u = ref.brain_uniform(np.array([11, 11, -12]), np.array([0, 1, 0]), np.array([3, 3, 3]))
    assert len(set(u.tolist())) == 3 and ((u >= 0) & (u < 1)).all()


def _poke(t, i, value):
    t = t.clone()
    t[i] = value
    return t


BAD = [
    ("v dtype", lambda a: dict(a, v=a["v"].float()), M + r"'v' must have dtype Double"),
    ("g shape", lambda a: dict(a, g=a["g"][:, :-1].contiguous()), M + r"'g' must have shape \[3, 37\]"),
    ("last dtype", lambda a: dict(a, last=a["last"].long()), M + r"'last' must have dtype Int"),
    ("ring slots", lambda a: dict(a, ring=a["ring"][:-1].contiguous()), M + r"'ring' must have shape \[19, 3, 37\]"),
    ("rate strided", lambda a: dict(a, rate=a["rate"].t().contiguous().t()), M + r"'rate' must be contiguous"),
    ("seeds", lambda a: dict(a, seeds=a["seeds"][:2].clone()), M + r"'seeds' must have shape \[3\]"),
    ("rowptr start", lambda a: dict(a, rowptr=_poke(a["rowptr"], 0, 1)), M + r"'rowptr' must start at 0"),
    ("post range", lambda a: dict(a, post=_poke(a["post"], 2, 37)), M + r"'post'.*\[0, 37\)"),
    ("count length", lambda a: dict(a, count=a["count"][:-1].clone()), M + r"'count' must have shape"),
    ("aliased", lambda a: dict(a, g=a["v"]), M + r"'(g|v)' must not share memory"),
]


@pytest.mark.parametrize("name,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_and_nothing_written(name, change, match):
    a = change(brain_args(3, 37, seed=8))
    outputs = [k for k in STATE if not (name == "aliased" and k == "g")]
    assert_refused_untouched(ops.brain_step, a, outputs, match)


@pytest.mark.parametrize("kw,match", [(dict(delay=0), "'delay' must be in"), (dict(refractory=-1), "'refractory'"),
                                      (dict(consts=[1.0] * 9), "'consts' must be 10"),
                                      (dict(consts=brain.Model().consts()[:-1] + [0.0]), "'consts' must be 10")])
def test_bad_options_are_value_errors_and_nothing_written(kw, match):
    a = dict(brain_args(3, 37, seed=11), **kw)
    before = clone_args(a)
    with pytest.raises(FlycudaError, match=r"flycuda.brain_step: argument " + match):
        ops.brain_step(**a)
    for k in STATE:
        assert torch.equal(a[k], before[k]), k


def test_opcheck():
    a = brain_args(3, 37, seed=12)
    torch.library.opcheck(torch.ops.flycuda.brain_step.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_steps():
    """Ten steps captured once, the counter advanced inside the graph: two replays equal twenty
    eager steps bit for bit."""
    a = args_to(brain_args(8, 2000, degree=30, seed=13, log=1 << 18), "cuda")
    eager = clone_args(a)
    graph = torch.cuda.CUDAGraph()
    ops.brain_step(**a)  # checks the tables once, outside the capture
    a["step"] += 1
    with torch.cuda.graph(graph):
        for _ in range(10):
            ops.brain_step(**a)
            a["step"] += 1
    captured = clone_args(a)
    ops.brain_step(**eager)
    eager["step"] += 1
    for _ in range(20):
        ops.brain_step(**eager)
        eager["step"] += 1
    for k, v in captured.items():
        if isinstance(v, torch.Tensor):
            a[k].copy_(v)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    _assert_same(a, {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in eager.items()})
