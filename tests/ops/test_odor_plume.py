"""odor_plume (flycuda.ops.odor: a replayed odor plume at every world's sensors, issue 41) against its
reference (flycuda.reference.plume, itself held to closed forms here), on the CPU and on CUDA when
present: 2-D and 3-D grids, both time modes, sensors inside and outside the grid, times before and
after the recording, strided inputs, poisoned outputs. Every operation is an IEEE +, -, *, / or
floor in float64 (no FMA: the build's flags), so the op equals the reference bit for bit on both.
Bad input is refused in one line naming the argument, and nothing is written."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.cases import args_to, assert_refused_untouched, clone_args, plume_args
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.errors import FlycudaError
from flycuda.reference.plume import odor_plume as ref


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("time_mode", ops.PLUME_TIME_MODES)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("W,s", [(1, 4), (37, 4), (300, 3)])
def test_matches_reference(device, dims, time_mode, layout, W, s):
    a = plume_args(W, s, dims, layout=layout, seed=W + dims, time_mode=time_mode)
    want = clone_args(a)
    ref(**want)
    got = args_to(clone_args(a), device)
    ops.odor_plume(**got)
    out = got["out"].cpu()
    assert _same(out, want["out"])
    if W > 1:
        assert 0 < out.isnan().float().mean() < 0.7, "some sensors outside the grid, most inside"


@pytest.mark.parametrize("dims", [2, 3])
def test_reference_is_exact_on_a_field_linear_in_space_and_time(dims):
    """Multilinear interpolation reproduces a field linear in x, y, z and t; NaN outside."""
    T, shape, origin, spacing, fps = 5, (6, 5, 4)[:dims], [0.3, -1.0, 2.0][:dims], [0.5, 0.2, 0.25][:dims], 10.0
    coef = [1.5, -2.0, 0.75][:dims]
    axes = [origin[d] + spacing[d] * torch.arange(n, dtype=torch.float64) for d, n in enumerate(shape)]
    grid = sum(c * x.view([-1 if i == d else 1 for i in range(dims)]) for d, (c, x) in enumerate(zip(coef, axes)))
    grid = grid.unsqueeze(0) + 3.0 * torch.arange(T, dtype=torch.float64).view(-1, *[1] * dims) / fps
    W = 50
    g = torch.Generator().manual_seed(0)
    lo, hi = torch.tensor(origin + [0.0] * (3 - dims)), torch.tensor([o + s_ * (n - 1) for o, s_, n in
                                                                      zip(origin, spacing, shape)] + [1.0] * (3 - dims))
    sensors = (lo + torch.rand(W, 2, 3, generator=g, dtype=torch.float64) * (hi - lo))
    sensors[0, 1, 0] = hi[0] + 0.01  # just past the last node: outside
    sensors[1, 1, 0] = hi[0]  # exactly on it: inside
    time = torch.rand(W, generator=g, dtype=torch.float64) * (T - 1) / fps
    out = torch.full((W, 2), math.nan, dtype=torch.float64)
    ref(grid, sensors, time, out, origin=origin, spacing=spacing, fps=fps)
    want = sum(c * sensors[..., d] for d, c in enumerate(coef)) + 3.0 * time[:, None]
    assert out[0, 1].isnan() and not out[1].isnan().any()
    keep = ~out.isnan()
    torch.testing.assert_close(out[keep], want[keep], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_time_clamps_or_loops(device):
    """A plume whose frames are 0, 1, .. T-1 everywhere: a world's reading is its frame position,
    held at the ends ("clamp") or wrapped, the last frame interpolating into the first ("loop")."""
    T, fps = 4, 2.0
    grid = torch.arange(T, dtype=torch.float32).view(T, 1, 1).expand(T, 3, 3).contiguous()
    time = torch.tensor([-1.0, 0.0, 0.25, 1.5, 1.75, 2.0, 3.1, float("nan")])  # frames -2, 0, .5, 3, 3.5, 4, 6.2
    sensors = torch.full((8, 1, 3), 0.5)
    for mode, want in (("clamp", [0, 0, 0.5, 3, 3, 3, 3, math.nan]), ("loop", [2, 0, 0.5, 3, 1.5, 0, 2.2, math.nan])):
        out = torch.full((8, 1), -7.0, device=device)
        ops.odor_plume(grid.to(device), sensors.to(device), time.to(device), out, origin=[0, 0], spacing=[0.5, 0.5],
                       fps=fps, time_mode=mode)
        torch.testing.assert_close(out.cpu()[:, 0], torch.tensor(want, dtype=torch.float32), equal_nan=True,
                                   rtol=1e-6, atol=1e-6)


def test_single_node_axes_and_one_frame():
    """An axis of one node is inside only at its node; one frame is the whole recording."""
    grid = torch.full((1, 1, 3), 5.0)
    sensors = torch.tensor([[[0.0, 0.0, 9.0], [0.0, 1.0, 9.0], [0.1, 0.5, 9.0]]])
    out = torch.full((1, 3), -1.0)
    ops.odor_plume(grid, sensors, torch.tensor([3.0]), out, origin=[0, 0], spacing=[1, 0.5], fps=30.0)
    assert out[0, :2].eq(5.0).all() and out[0, 2].isnan()


M = r"flycuda\.odor_plume: argument "
BAD = [
    ("out 3-D", lambda a: dict(a, out=a["out"][None]), M + r"'out' must be a 2-D tensor \[W, s\]"),
    ("out float64", lambda a: dict(a, out=a["out"].double()), M + r"'out' must have dtype Float, got Double"),
    ("out overlapping", lambda a: dict(a, out=torch.zeros(3, 1).expand(3, 4)), M + r"'out' must not have overlapping"),
    ("plume 2-D", lambda a: dict(a, plume=a["plume"][0]), M + r"'plume' must be a 3-D \[T, X, Y\] or 4-D"),
    ("plume empty", lambda a: dict(a, plume=a["plume"][:0]), M + r"'plume' must hold at least one frame"),
    ("plume strided", lambda a: dict(a, plume=a["plume"].transpose(1, 2)), M + r"'plume' must be contiguous"),
    ("plume float64", lambda a: dict(a, plume=a["plume"].double()), M + r"'plume' must have dtype Float"),
    ("sensors s", lambda a: dict(a, sensors=a["sensors"][:, :3]),
     M + r"'sensors' must have shape \[W, s, 3\] with W = out.size\(0\) = 3 and s = out.size\(1\) = 4, got \[3, 3, 3\]"),
    ("time worlds", lambda a: dict(a, time=a["time"][:2]), M + r"'time' must have shape \[W\] with W = out.size\(0\) = 3"),
    ("time float64", lambda a: dict(a, time=a["time"].double()), M + r"'time' must have dtype Float, got Double"),
    ("time meta", lambda a: dict(a, time=torch.empty(3, device="meta")),
     M + r"'time' must be on cpu \(the device of 'out'\), got meta"),
    ("out aliases time", lambda a: dict(a, time=a["out"].view(-1)[:3]), M + r"'out' must not share memory with argument 'time'"),
]


@pytest.mark.parametrize("name,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_and_nothing_written(name, change, match):
    assert_refused_untouched(ops.odor_plume, change(plume_args(3, 4, seed=6)), ["out"], match)


OPTIONS = [
    ("origin length", dict(origin=[0.0, 0.0, 0.0]), r"argument 'origin' must be 2 finite values"),
    ("origin nan", dict(origin=[0.0, float("nan")]), r"argument 'origin' must be 2 finite values"),
    ("spacing zero", dict(spacing=[0.5, 0.0]), r"argument 'spacing' must be 2 finite values > 0"),
    ("no spacing", dict(spacing=[]), r"argument 'spacing' must be 2 finite values > 0"),
    ("fps", dict(fps=0.0), r"argument 'fps' must be finite and > 0"),
    ("time_mode", dict(time_mode="wrap"), r"argument 'time_mode' must be 'clamp' or 'loop', got 'wrap'"),
]


@pytest.mark.parametrize("name,change,match", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_bad_options_are_value_errors_and_nothing_written(name, change, match):
    a = dict(plume_args(3, 4, seed=8), **change)
    before = a["out"].clone()
    with pytest.raises(FlycudaError, match="flycuda.odor_plume: " + match):
        ops.odor_plume(**a)
    with pytest.raises((ValueError, RuntimeError), match="flycuda.odor_plume: argument"):
        torch.ops.flycuda.odor_plume.default(*a.values())
    assert _same(a["out"], before)


@pytest.mark.parametrize("dims", [2, 3])
def test_opcheck(dims):
    a = plume_args(5, 4, dims, layout="strided", seed=9)
    torch.library.opcheck(torch.ops.flycuda.odor_plume.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_call():
    """Inside a CUDA graph: moved sensors and advanced times are read anew at each replay."""
    a = args_to(plume_args(4096, 4, 3, layout="strided", seed=10, time_mode="loop"), "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.odor_plume(**a)
    for _ in range(2):
        a["sensors"].add_(0.05)
        a["time"].add_(0.013)
        eager = clone_args(a)
        ops.odor_plume(**eager)
        a["out"].fill_(-1.0)
        graph.replay()
        torch.cuda.synchronize()
        assert _same(a["out"], eager["out"])


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("time_mode", ops.PLUME_TIME_MODES)
def test_huge_times_stay_in_the_recording(device, time_mode):
    """A time in the wrong unit (epoch microseconds, 1e30 s): its frame is still one of the
    recording's, never an index past the grid (a reviewer found floor(f / T) off by frames there)."""
    a = plume_args(6, 4, 2, T=3, seed=12, time_mode=time_mode)
    a["time"] = torch.tensor([1.7e15, -1.7e15, 1e30, -1e30, 3.0e38, 5.0])
    want = clone_args(a)
    ref(**want)
    got = args_to(clone_args(a), device)
    ops.odor_plume(**got)
    assert _same(got["out"].cpu(), want["out"])
    inside = ~want["out"].isnan()
    lo, hi = a["plume"].amin(), a["plume"].amax()
    assert inside.any() and (want["out"][inside] >= lo).all() and (want["out"][inside] <= hi).all()


def test_the_fake_refuses_what_the_op_refuses():
    """Traced (fake tensors), the op refuses a transposed or empty plume and bad options as it does
    when it runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    a = plume_args(3, 4, seed=13)
    with FakeTensorMode() as mode:
        fa = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in a.items()}
        for change in (dict(plume=fa["plume"].transpose(1, 2)), dict(plume=fa["plume"][:0]), dict(spacing=[0.5]),
                       dict(fps=0.0), dict(time_mode="wrap")):
            with pytest.raises(RuntimeError, match="flycuda.odor_plume: argument"):
                torch.ops.flycuda.odor_plume.default(*dict(fa, **change).values())
