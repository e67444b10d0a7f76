"""connectome_step (flycuda.ops.connectome: one step of flyvis's connectome-constrained network,
issue 40) against its reference (flycuda.reference.connectome, flyvis 1.2.0's own step on the
same edges: gather, scatter_add_ by target), on the CPU and on CUDA when present: odd sizes,
nodes without inputs, time constants below dt, voltages of both signs, strided and node-major
layouts, poisoned outputs, many steps. On the CPU the op equals the reference bit for bit (the
rows keep flyvis's per-node order of the sums); CUDA's kernel runs the same float32 operations
with the build's --fmad=false and is held equal too. Held against flyvis itself:
tests/flygym_lane/test_connectome_flyvis.py. Bad input is refused in one line naming the argument,
and nothing is written."""

from __future__ import annotations

import pytest
import torch
from helpers.cases import args_to, assert_refused_untouched, clone_args
from helpers.connectome import CONNECTOME_LAYOUTS, connectome_args
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.errors import FlycudaError
from flycuda.reference import connectome as ref

M = r"flycuda.connectome_step: argument "


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("layout", CONNECTOME_LAYOUTS)
@pytest.mark.parametrize("B,N,C,inputs", [(1, 1, 1, 1), (2, 37, 5, 3), (5, 301, 7, 8), (3, 64, 64, 0)])
def test_matches_reference(device, layout, B, N, C, inputs):
    a = connectome_args(B, N, C, inputs, layout, seed=B * 100 + N)
    want = clone_args(a)
    ref.connectome_step(**want)
    got = args_to(clone_args(a), device)
    ops.connectome_step(**got)
    out = got["out"].cpu()
    assert out.isfinite().all(), "every node written"
    assert torch.equal(out, want["out"])


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_many_steps_stay_equal(device):
    """200 steps at flyvis's training dt, each from the last (two buffers, swapped): bit for bit."""
    a = connectome_args(4, 211, 13, 8, "node_major", degree=12, seed=7)
    v_ref = a["v"].clone()
    got = args_to(clone_args(a), device)
    v, out = got["v"], got["out"]
    for _ in range(200):
        nxt = torch.empty_like(v_ref)
        ref.connectome_step(**dict(a, v=v_ref, out=nxt))
        v_ref = nxt
        ops.connectome_step(**dict(got, v=v, out=out))
        v, out = out, v
    assert torch.equal(v.cpu(), v_ref) and v_ref.isfinite().all()
    assert (v_ref < 0).any() and (v_ref > 0).any(), "both signs: the ReLU matters"


def test_the_terms_are_flyvis():
    """One node by hand: its inputs' weights times their positive voltages, the leak to its bias,
    the stimulus only on the input nodes, the time constant floored at dt."""
    a = connectome_args(1, 9, 3, 1, seed=3)
    ops.connectome_step(**a)
    v, dt = a["v"][0].double(), torch.tensor(a["dt"]).float().double()
    for n in range(9):
        lo, hi = int(a["rowptr"][n]), int(a["rowptr"][n + 1])
        s = sum(float(a["weight"][e]) * max(float(v[int(a["src"][e])]), 0.0) for e in range(lo, hi))
        x = float(a["stimulus"][0, n % 3]) if n < 3 else 0.0
        tau = max(float(a["tau"][n]), float(dt))
        want = float(v[n]) + (-float(v[n]) + float(a["bias"][n]) + s + x) / tau * float(dt)
        assert abs(float(a["out"][0, n]) - want) < 1e-5 * (1 + abs(want)), n


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_nan_reaches_only_its_targets_and_empty_is_fine(device):
    a = args_to(connectome_args(2, 40, 4, 2, seed=5), device)
    a["v"][1, 7] = float("nan")
    ops.connectome_step(**a)
    src, rowptr = a["src"].cpu().long(), a["rowptr"].cpu().long()
    fed = {n for n in range(40) if (src[rowptr[n]:rowptr[n + 1]] == 7).any()} | {7}
    nan = set(torch.nonzero(a["out"][1].isnan().cpu()).flatten().tolist())
    assert nan == fed and not a["out"][0].isnan().any()
    empty = args_to(connectome_args(0, 5, 1, 1, seed=6), device)
    ops.connectome_step(**empty)
    assert empty["out"].numel() == 0


BAD = [
    ("out float64", lambda a: dict(a, out=a["out"].double()), M + r"'out' must have dtype Float"),
    ("out 3-D", lambda a: dict(a, out=a["out"][None]), M + r"'out' must be a 2-D tensor \[B, N\], got shape \[1, 3, 37\]"),
    ("out expanded", lambda a: dict(a, out=a["out"][:1].expand(3, 37)), M + r"'out' must not have overlapping memory"),
    ("v shape", lambda a: dict(a, v=a["v"][:, :36]), M + r"'v' must have shape \[B, N\] with B = out.size\(0\) = 3 "
     r"and N = out.size\(1\) = 37, got \[3, 36\]"),
    ("out is v", lambda a: dict(a, out=a["v"]), M + r"'out' must not share memory with argument 'v'"),
    ("stimulus batch", lambda a: dict(a, stimulus=a["stimulus"][:2]), M + r"'stimulus' must have shape \[B, C\] with B"),
    ("stimulus int", lambda a: dict(a, stimulus=a["stimulus"].int()), M + r"'stimulus' must have dtype Float"),
    ("rowptr int64", lambda a: dict(a, rowptr=a["rowptr"].long()), M + r"'rowptr' must have dtype Int, got Long"),
    ("rowptr short", lambda a: dict(a, rowptr=a["rowptr"][:-1]), M + r"'rowptr' must be a 1-D tensor \[N \+ 1\] of 38"),
    ("src strided", lambda a: dict(a, src=a["src"].repeat_interleave(2)[::2]), M + r"'src' must be contiguous"),
    ("weight short", lambda a: dict(a, weight=a["weight"][1:]), M + r"'weight' must be a 1-D tensor \[E = src.size\(0\)\]"),
    ("bias float64", lambda a: dict(a, bias=a["bias"].double()), M + r"'bias' must have dtype Float"),
    ("tau meta", lambda a: dict(a, tau=torch.empty(37, device="meta")), M + r"'tau' must be on cpu \(the device of 'out'\)"),
    ("rowptr start", lambda a: dict(a, rowptr=a["rowptr"] + 1), M + r"'rowptr' must start at 0, got rowptr\[0\] = 1"),
    ("rowptr down", lambda a: dict(a, rowptr=_swap(a["rowptr"], 5, 20)), M + r"'rowptr' must be non-decreasing"),
    ("rowptr end", lambda a: dict(a, rowptr=_end(a["rowptr"])), M + r"'rowptr' must end at E = src.size\(0\)"),
    ("src range", lambda a: dict(a, src=_poke(a["src"], 3, 37)), M + r"'src' must hold indices in \[0, 37\) "
     r"\(N = out.size\(1\) = 37\), got src\[3\] = 37"),
    ("input_nodes", lambda a: dict(a, input_nodes=7), M + r"'input_nodes' must be a multiple of C = stimulus.size\(1\) = 5"),
    ("input_nodes past N", lambda a: dict(a, input_nodes=40), M + r"'input_nodes' must be a multiple of C"),
]


def _swap(t, i, j):
    t = t.clone()
    t[i], t[j] = t[j].clone(), t[i].clone()
    return t


def _end(t):
    t = t.clone()
    t[-1] += 1
    return t


def _poke(t, i, value):
    t = t.clone()
    t[i] = value
    return t


@pytest.mark.parametrize("name,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_and_nothing_written(name, change, match):
    a = change(connectome_args(3, 37, 5, 2, seed=8))
    if name in ("input_nodes", "input_nodes past N"):
        before = a["out"].clone()
        with pytest.raises((ValueError, RuntimeError), match=match):
            ops.connectome_step(**a)
        assert torch.equal(a["out"].nan_to_num(), before.nan_to_num())
        return
    assert_refused_untouched(ops.connectome_step, a, ["out"], match)


@pytest.mark.needs_cuda
@pytest.mark.parametrize("name", ["v", "stimulus", "rowptr", "src", "weight", "bias", "tau"])
def test_inputs_on_another_device_are_refused(name):
    a = args_to(connectome_args(3, 37, 5, 2, seed=9), "cuda")
    a[name] = a[name].cpu()
    assert_refused_untouched(ops.connectome_step, a, ["out"], M + rf"'{name}' must be on cuda:0 \(the device of 'out'\), got cpu")


@pytest.mark.needs_cuda
@pytest.mark.parametrize("name,change,match", [b for b in BAD if b[0] in ("rowptr start", "rowptr down", "rowptr end",
                                                                       "src range")])
def test_bad_maps_on_cuda_are_refused(name, change, match):
    a = args_to(change(connectome_args(3, 37, 5, 2, seed=10)), "cuda")
    assert_refused_untouched(ops.connectome_step, a, ["out"], match)


@pytest.mark.parametrize("dt", [0.0, -0.01, float("nan"), float("inf"), 1e-50, 1e40])  # the last two: 0 and inf in float32
def test_bad_dt_is_a_value_error_and_nothing_written(dt):
    a = dict(connectome_args(3, 37, 5, 2, seed=11), dt=dt)
    before = a["out"].clone()
    with pytest.raises(FlycudaError, match=r"flycuda.connectome_step: argument 'dt' must be finite and > 0 in float32"):
        ops.connectome_step(**a)
    with pytest.raises((ValueError, RuntimeError), match=r"flycuda.connectome_step: argument 'dt' must be finite"):
        torch.ops.flycuda.connectome_step.default(*a.values())
    assert torch.equal(a["out"].nan_to_num(), before.nan_to_num())


def test_opcheck():
    a = connectome_args(3, 37, 5, 2, "strided", seed=12)
    torch.library.opcheck(torch.ops.flycuda.connectome_step.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_call():
    """Inside a CUDA graph: the replay equals an eager call bit for bit, and a changed stimulus is
    read anew without a new capture."""
    a = args_to(connectome_args(256, 1000, 100, 8, "node_major", seed=13), "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.connectome_step(**a)
    for _ in range(2):
        a["stimulus"].mul_(0.5)
        eager = clone_args(a)
        ops.connectome_step(**eager)
        a["out"].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(a["out"], eager["out"])
