"""odor_intensity (flycuda.ops.odor: every world's odor at its sensors, issue 41) against its
reference (flycuda.reference.odor.odor_intensity, itself held to FlyGym 1.x's get_olfaction and
the course's closed form in test_odor_reference.py), on the CPU and on CUDA when present: both
fields, odd sizes, n > 1 and k > 1, strided, shared (stride 0) and per-world inputs, poisoned
outputs. The float64 values may differ from torch's in their last bits (its pow, norm and k0e are
vectorized; CUDA's pow, exp and log are within 2 ulps), so the float32 outputs are held within 1
float32 ulp on the CPU (in practice equal) and 2 on CUDA; the emulator equals the CPU op bit for
bit (tests/csrc/test_emu.py: the same per-element function).
Bad input is refused in one line naming the argument, and nothing is written."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.cases import ODOR_LAYOUTS, args_to, assert_refused_untouched, clone_args, odor_args, ulps32
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.errors import FlycudaError
from flycuda.reference import odor as ref


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("field", ops.ODOR_FIELDS)
@pytest.mark.parametrize("layout", ODOR_LAYOUTS)
@pytest.mark.parametrize("W,n,k,s", [(1, 1, 1, 4), (5, 3, 2, 4), (37, 7, 3, 5), (300, 2, 1, 4)])
def test_matches_reference(device, field, layout, W, n, k, s):
    a = odor_args(W, n, k, s, field, layout, seed=W * 10 + n)
    want = clone_args(a)
    ref.odor_intensity(**want)
    got = args_to(clone_args(a), device)
    ops.odor_intensity(**got)
    out = got["out"].cpu()
    assert out.isfinite().all() and (out > 0).all(), "every element written, none on a source"
    assert ulps32(out, want["out"]) <= (1 if device == "cpu" else 2)


@pytest.mark.parametrize("exponent", [0.0, 0.5, 1.0, 2.0, 3.7])
def test_power_exponents(exponent):
    a = odor_args(9, 4, 2, 4, "power", seed=int(exponent * 10), exponent=exponent)
    want = clone_args(a)
    ref.odor_intensity(**want)
    ops.odor_intensity(**a)
    assert ulps32(a["out"], want["out"]) <= 1
    if exponent == 0.0:  # f = 1: the peaks' sums
        torch.testing.assert_close(a["out"], a["peaks"].sum(0).view(1, -1, 1).expand_as(a["out"]), rtol=1e-6, atol=0)


def test_both_branches_of_k0e_are_reached():
    """The advection-diffusion cases span kappa |r| on both sides of Cephes' split at 2."""
    a = odor_args(37, 7, 3, 5, "advection_diffusion", seed=377)
    u = a["wind"].double()
    kappa = torch.sqrt((u * u).sum(1) / (4 * a["diffusivity"] ** 2) + a["decay"] / a["diffusivity"])
    r = (a["sensors"][:, None, :, :2] - a["sources"][:, :, None, :2]).double().norm(dim=3)
    kr = kappa.view(-1, 1, 1) * r
    assert (kr < 2).sum() > 100 and (kr > 2).sum() > 100


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_edges_inf_on_a_source_no_sources_and_empty(device):
    a = args_to(odor_args(3, 2, 2, 4, "power", seed=1), device)
    a["sensors"][1, 2] = a["sources"][1, 0]
    ops.odor_intensity(**a)
    assert a["out"][1, :, 2].eq(math.inf).all() and a["out"].isinf().sum() == 2
    a = args_to(odor_args(3, 2, 2, 4, "advection_diffusion", seed=2), device)
    a["sensors"][0, 1, :2] = a["sources"][0, 1, :2]  # z apart: the plane's distance is 0
    ops.odor_intensity(**a)
    assert a["out"][0, :, 1].eq(math.inf).all() and a["out"].isinf().sum() == 2
    none = args_to(odor_args(4, 0, 2, 4, seed=3), device)
    ops.odor_intensity(**none)
    assert none["out"].eq(0).all()
    for W, k, s in ((0, 2, 4), (3, 0, 4), (3, 2, 0)):  # nothing to write: no launch, no error
        empty = args_to(odor_args(W, 2, k, s, seed=4), device)
        ops.odor_intensity(**empty)
        assert empty["out"].numel() == 0


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_out_at_a_storage_offset_leaves_its_neighbours(device):
    """out a view in the middle of a larger poisoned buffer, dims permuted: exactly its own
    elements are written."""
    a = odor_args(5, 3, 2, 4, "advection_diffusion", seed=11)
    want = clone_args(a)
    ref.odor_intensity(**want)
    buf = torch.full((7 + 5 * 2 * 4 + 9,), -7.0)
    a["out"] = buf[7:7 + 40].view(4, 2, 5).permute(2, 1, 0)
    a = args_to(a, device)
    ops.odor_intensity(**a)
    whole = a["out"].untyped_storage()
    got = torch.empty(0, device=device).set_(whole, 0, (buf.numel(),), (1,)).cpu()
    assert got[:7].eq(-7).all() and got[47:].eq(-7).all()
    assert ulps32(a["out"].cpu(), want["out"]) <= 2


def test_nan_inputs_read_nan_only_where_they_reach():
    a = odor_args(4, 3, 2, 4, "power", seed=5)
    a["sources"][2, 1, 0] = float("nan")
    ops.odor_intensity(**a)
    assert a["out"][2].isnan().all() and not a["out"][[0, 1, 3]].isnan().any()


M = r"flycuda\.odor_intensity: argument "
BAD = [
    ("out float64", lambda a: dict(a, out=a["out"].double()), M + r"'out' must have dtype Float, got Double"),
    ("out 2-D", lambda a: dict(a, out=a["out"][0]), M + r"'out' must be a 3-D tensor \[W, k, s\], got shape \[2, 4\]"),
    ("out overlapping", lambda a: dict(a, out=torch.zeros(3, 1, 1).expand(3, 2, 4)), M + r"'out' must not have overlapping"),
    ("out as_strided overlap", lambda a: dict(a, out=torch.full((24,), float("nan")).as_strided((3, 2, 4), (8, 1, 1))),
     M + r"'out' must not have overlapping memory .* strides \[8, 1, 1\]"),
    ("sources worlds", lambda a: dict(a, sources=a["sources"][:2]),
     M + r"'sources' must have shape \[W, n, 3\] with W = out.size\(0\) = 3, got \[2, 2, 3\]"),
    ("sources xy", lambda a: dict(a, sources=a["sources"][..., :2]), M + r"'sources' must have shape \[W, n, 3\]"),
    ("sources int", lambda a: dict(a, sources=a["sources"].long()), M + r"'sources' must have dtype Float, got Long"),
    ("peaks n", lambda a: dict(a, peaks=a["peaks"][:1]),
     M + r"'peaks' must have shape \[n, k\] with W = 3, n = sources.size\(1\) = 2 and k = out.size\(1\) = 2, got \[1, 2\]"),
    ("peaks k", lambda a: dict(a, peaks=a["peaks"][:, :1]), M + r"'peaks' must have shape \[n, k\]"),
    ("peaks 1-D", lambda a: dict(a, peaks=a["peaks"][0]), M + r"'peaks' must be a 2-D tensor \[n, k\] or a 3-D"),
    ("peaks worlds", lambda a: dict(a, peaks=a["peaks"].expand(4, 2, 2)), M + r"'peaks' must have shape \[W, n, k\]"),
    ("sensors s", lambda a: dict(a, sensors=a["sensors"][:, :3]),
     M + r"'sensors' must have shape \[W, s, 3\] with W = out.size\(0\) = 3 and s = out.size\(2\) = 4, got \[3, 3, 3\]"),
    ("sensors float64", lambda a: dict(a, sensors=a["sensors"].double()), M + r"'sensors' must have dtype Float"),
    ("sensors meta", lambda a: dict(a, sensors=torch.empty(3, 4, 3, device="meta")),
     M + r"'sensors' must be on cpu \(the device of 'out'\), got meta"),
    ("out aliases sensors", lambda a: dict(a, out=a["sensors"].view(-1)[:24].view(3, 2, 4)),
     M + r"'out' must not share memory with argument 'sensors'"),
]


@pytest.mark.parametrize("name,change,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_and_nothing_written(name, change, match):
    a = change(odor_args(3, 2, 2, 4, seed=6))
    assert_refused_untouched(ops.odor_intensity, a, ["out"], match)


@pytest.mark.needs_cuda
@pytest.mark.parametrize("name", ["sources", "peaks", "sensors", "wind"])
def test_inputs_on_another_device_are_refused(name):
    a = args_to(odor_args(3, 2, 2, 4, "advection_diffusion", seed=12), "cuda")
    a[name] = a[name].cpu()
    assert_refused_untouched(ops.odor_intensity, a, ["out"], M + rf"'{name}' must be on cuda:0 \(the device of 'out'\), got cpu")


WIND_BAD = [
    ("wind worlds", lambda a: dict(a, wind=a["wind"][:2]), M + r"'wind' must have shape \[W, 2\] with W = out.size\(0\) = 3"),
    ("wind 3-D", lambda a: dict(a, wind=a["wind"][None]), M + r"'wind' must be a 2-D tensor \[W, 2\]"),
    ("wind float64", lambda a: dict(a, wind=a["wind"].double()), M + r"'wind' must have dtype Float"),
    ("out aliases wind", lambda a: dict(a, wind=a["out"].view(-1)[:6].view(3, 2)),
     M + r"'out' must not share memory with argument 'wind'"),
]


@pytest.mark.parametrize("name,change,match", WIND_BAD, ids=[b[0] for b in WIND_BAD])
def test_bad_wind_is_refused_and_nothing_written(name, change, match):
    assert_refused_untouched(ops.odor_intensity, change(odor_args(3, 2, 2, 4, "advection_diffusion", seed=7)), ["out"],
                             match)


OPTIONS = [
    ("field", dict(field="plume"), r"argument 'field' must be 'power' or 'advection_diffusion', got 'plume'"),
    ("exponent", dict(exponent=-1.0), r"argument 'exponent' must be finite and >= 0, got -1.0"),
    ("exponent nan", dict(exponent=float("nan")), r"argument 'exponent' must be finite and >= 0, got nan"),
    ("wind with power", dict(wind=torch.zeros(3, 2)), r"argument 'wind' must be None with field 'power'"),
    ("diffusivity", dict(field="advection_diffusion", diffusivity=0.0), r"argument 'diffusivity' must be finite and > 0"),
    ("decay", dict(field="advection_diffusion", decay=-2.0), r"argument 'decay' must be finite and > 0, got -2.0"),
]


@pytest.mark.parametrize("name,change,match", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_bad_options_are_value_errors_and_nothing_written(name, change, match):
    """The wrapper's ValueError (FlycudaError) on every torch; the op's own check (a direct
    torch.ops call) says the same."""
    a = dict(odor_args(3, 2, 2, 4, seed=8), **change)
    before = a["out"].clone()
    with pytest.raises(FlycudaError, match="flycuda.odor_intensity: " + match):
        ops.odor_intensity(**a)
    with pytest.raises((ValueError, RuntimeError), match="flycuda.odor_intensity: " + match.split(", got")[0]):
        torch.ops.flycuda.odor_intensity.default(*a.values())
    assert torch.equal(a["out"].nan_to_num(), before.nan_to_num())


@pytest.mark.parametrize("field", ops.ODOR_FIELDS)
def test_opcheck(field):
    a = odor_args(5, 3, 2, 4, field, "strided", seed=9)
    torch.library.opcheck(torch.ops.flycuda.odor_intensity.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
@pytest.mark.parametrize("field", ops.ODOR_FIELDS)
def test_a_captured_graph_replays_the_eager_call(field):
    """Inside a CUDA graph: the replay equals an eager call bit for bit, and moved sensors and
    a changed wind are read anew without a new capture."""
    a = args_to(odor_args(4096, 3, 2, 4, field, "strided", seed=10), "cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.odor_intensity(**a)
    for _ in range(2):
        a["sensors"].add_(0.25)
        if a["wind"] is not None:
            a["wind"].mul_(-1)
        eager = clone_args(a)
        ops.odor_intensity(**eager)
        a["out"].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(a["out"], eager["out"])
