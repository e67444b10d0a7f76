"""hybrid_senses (flycuda.ops.senses: the hybrid controllers' sensory inputs from MuJoCo Warp's
Data) against its reference (flycuda.reference.senses: FlyGym's observation and MuJoCo Warp's
contact_force, in contact order), on the CPU and on CUDA when present: odd numbers of worlds,
both index dtypes, both cones, contact pools with slots that must not count, poisoned outputs.
The CPU op adds in contact order (bit for bit); CUDA adds with atomics (to 1e-12). Bad input
leaves every output untouched. Against FlyGym's own get_bodysegment_contact_forces on a real
NeuroMechFly: tests/control/test_senses.py."""

from __future__ import annotations

import pytest
import torch
from helpers.cases import SENSE_OUTPUTS, args_to, assert_refused_untouched, clone_args
from helpers.cases import senses_args as _args
from helpers.devices import cpu_and_cuda

from flycuda import ops
from flycuda.reference import senses as ref


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("W,slots,used", [(1, 7, 7), (5, 64, 50), (37, 1000, 777), (300, 5000, 4999)])
@pytest.mark.parametrize("cone,index_dtype", [(0, torch.int64), (0, torch.int32), (1, torch.int64)])
def test_matches_reference(device, W, slots, used, cone, index_dtype):
    a = _args(W, slots, used, seed=W, cone=cone, index_dtype=index_dtype)
    want = clone_args(a)
    ref.hybrid_senses(**want)
    got = args_to(clone_args(a), device)
    ops.hybrid_senses(**got)
    for name in ("thorax_z", "tarsus5_z", "heading"):
        assert torch.equal(got[name].cpu().nan_to_num(), want[name].nan_to_num()), name
    forces = got["stumbling_forces"].cpu()
    if device == "cpu":  # contact order, as the reference
        assert torch.equal(forces, want["stumbling_forces"])
    else:  # atomics: any order
        torch.testing.assert_close(forces, want["stumbling_forces"], rtol=1e-12, atol=1e-12)
    assert (want["stumbling_forces"] != 0).sum() >= min(W * 18, used // 4), "enough segments touched"


def test_counts_exactly_the_segment_ground_contacts_in_use():
    """The forces come from the segment-ground contacts below nacon whose constraint is in the
    solver, and only those: zeroing every other contact's force rows changes nothing."""
    a = _args(4, 400, 300, seed=1)
    full = clone_args(a)
    ops.hybrid_senses(**full)
    names = dict(zip(ops.CONTACT_FIELDS, a["contacts"]))
    seg = a["geom_segment"]
    g1, g2 = names["geom"][:, 0].long().clamp(0, 39), names["geom"][:, 1].long().clamp(0, 39)
    counts = ((seg[g1] >= 0) & (seg[g2] == -2)) | ((seg[g2] >= 0) & (seg[g1] == -2))
    counts &= (names["efc_address"][:, 0] >= 0) & (torch.arange(400) < 300)
    counts &= (names["worldid"] < 4) & (names["geom"] < 40).all(dim=1)
    assert 100 < int(counts.sum()) < 300
    kept = clone_args(a)
    k = dict(zip(ops.CONTACT_FIELDS, kept["contacts"]))
    k["efc_address"][~counts, 0] = -1  # every contact that must not count: out of the solver
    ops.hybrid_senses(**kept)
    assert torch.equal(kept["stumbling_forces"], full["stumbling_forces"])
    none = clone_args(a)
    dict(zip(ops.CONTACT_FIELDS, none["contacts"]))["nacon"][0] = 0
    ops.hybrid_senses(**none)
    assert none["stumbling_forces"].eq(0).all() and torch.equal(none["heading"], full["heading"])


def test_geom_segments_table():
    t = ops.geom_segments(30, range(18), [20, 25])
    assert t.dtype == torch.int32 and t[:18].tolist() == list(range(18)) and t[[20, 25]].tolist() == [-2, -2]
    assert t[[18, 19, 21, 29]].eq(-1).all()
    with pytest.raises(ValueError, match=r"expected 18 geom ids .*got 17"):
        ops.geom_segments(30, range(17), [20])
    with pytest.raises(ValueError, match=r"ground_geoms: geom ids must be in \[0, 30\), got 30"):
        ops.geom_segments(30, range(18), [30])
    with pytest.raises(ValueError, match=r"geom 3 is both a leg segment and ground"):
        ops.geom_segments(30, range(18), [3])


def _contact(a: dict, name: str, value) -> dict:
    contacts = list(a["contacts"])
    contacts[ops.CONTACT_FIELDS.index(name)] = value
    return dict(a, contacts=contacts)


@pytest.mark.parametrize("change,match", [
    (lambda a: dict(a, xpos=a["xpos"].double()), r"argument 'xpos' must be a float32 \[W, nbody, 3\]"),
    (lambda a: dict(a, xmat=a["xmat"][:, :10]), r"argument 'xmat' must have shape \[3, 11, 3, 3\]"),
    (lambda a: dict(a, body_ids=a["body_ids"][:6]), r"argument 'body_ids' must have shape \[7\]"),
    (lambda a: dict(a, body_ids=a["body_ids"].float()), r"argument 'body_ids' must have dtype Int or Long, got Float"),
    (lambda a: dict(a, body_ids=torch.tensor([0, 1, 2, 3, 4, 5, 11])),
     r"argument 'body_ids' must hold indices in \[0, 11\).*body_ids\[6\] = 11"),
    (lambda a: dict(a, contacts=a["contacts"][:8]), r"argument 'contacts' must hold 9 tensors"),
    (lambda a: _contact(a, "frame", a["contacts"][2][:, :2]),
     r"argument 'contacts\[2\] \(frame\)' must have shape \[20, 3, 3\]"),
    (lambda a: _contact(a, "worldid", a["contacts"][1].long()),
     r"argument 'contacts\[1\] \(worldid\)' must have dtype Int, got Long"),
    (lambda a: _contact(a, "efc_force", a["contacts"][7][:2]),
     r"argument 'contacts\[7\] \(efc_force\)' must have shape \[3, 64\]"),
    (lambda a: _contact(a, "nacon", a["contacts"][8].repeat(2)), r"'contacts\[8\] \(nacon\)' must have shape \[1\]"),
    (lambda a: dict(a, geom_segment=a["geom_segment"].long()), r"argument 'geom_segment' must have dtype Int"),
    (lambda a: dict(a, cone=2), r"argument 'cone' must be MuJoCo's opt.cone, 0 \(pyramidal\) or 1 \(elliptic\)"),
    (lambda a: dict(a, heading=a["heading"].float()), r"argument 'heading' must have dtype Double, got Float"),
    (lambda a: dict(a, stumbling_forces=a["stumbling_forces"].transpose(1, 2)),
     r"argument 'stumbling_forces' must have shape \[3, 6, 3, 3\]|must be contiguous"),
    (lambda a: dict(a, tarsus5_z=torch.full((6, 3), float("nan"), dtype=torch.float64).t()),
     r"argument 'tarsus5_z' must be contiguous"),
])
def test_bad_input_is_refused_and_nothing_written(change, match):
    assert_refused_untouched(ops.hybrid_senses, change(_args(3, 20, 15, seed=2)), SENSE_OUTPUTS, match)


def test_outputs_must_not_alias_inputs_or_each_other():
    a = _args(3, 20, 15, seed=3)
    buf = torch.zeros(3 * 6 + 3 * 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"argument 'tarsus5_z' must not share memory with argument 'heading'"):
        ops.hybrid_senses(**dict(a, tarsus5_z=buf[:18].view(3, 6), heading=buf[9:18].view(3, 3)))


def test_opcheck():
    a = _args(5, 40, 33, seed=4)
    torch.library.opcheck(torch.ops.flycuda.hybrid_senses.default, tuple(a.values()),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


@pytest.mark.needs_cuda
def test_a_captured_graph_replays_the_eager_call():
    """Inside a CUDA graph, nacon read on the device: the replays equal an eager call (to the
    atomics' rounding), and a changed nacon is seen without a new capture."""
    a = args_to(_args(1000, 20000, 15000, seed=5), "cuda")
    eager = clone_args(a)
    ops.hybrid_senses(**eager)
    graph = torch.cuda.CUDAGraph()
    ops.hybrid_senses(**a)  # the ids checked once, outside the capture
    with torch.cuda.graph(graph):
        ops.hybrid_senses(**a)
    for name in SENSE_OUTPUTS:
        a[name].fill_(float("nan"))
    graph.replay()
    for name in SENSE_OUTPUTS:
        torch.testing.assert_close(a[name], eager[name], rtol=1e-12, atol=1e-12)
    dict(zip(ops.CONTACT_FIELDS, a["contacts"]))["nacon"].fill_(0)
    graph.replay()
    assert a["stumbling_forces"].eq(0).all()
