"""Bad input: each op raises an error naming the argument, expected vs got, and
leaves its outputs untouched."""

import pytest
import torch
from helpers.devices import cpu_and_cuda, poison_like

import flycuda

W, M, T, D, NU, NQ, R = 4, 4, 10, 3, 6, 8, 5


def good(device):
    return dict(
        motion=torch.randn(M, T, D).to(device),
        step=flycuda.new_step_counter(device, 2),
        ctrl=poison_like(torch.empty(W, NU)).to(device),
        act_ids=torch.tensor([5, 0, 2]).to(device),
        offsets=torch.rand(W).to(device),
        qpos=torch.randn(W, NQ).to(device),
        adrs=torch.tensor([7, 1, 1]).to(device),
        history=poison_like(torch.empty(W, R, D)).to(device),
    )


def call_motion(a, **kw):
    flycuda.motion_to_ctrl(a["motion"], a["step"], a["ctrl"], a["act_ids"],
                           offsets=a["offsets"], advance=1, **kw)


def call_record(a, **kw):
    flycuda.record_qpos(a["qpos"], a["adrs"], a["history"], a["step"], **kw)


# (op, name, change to the good args, kwargs, error type, message regex)
MOTION_CASES = [
    ("ctrl float64", {"ctrl": lambda a: a["ctrl"].double()}, {}, RuntimeError, r"'ctrl' must have dtype Float, got Double"),
    ("ctrl 1-D", {"ctrl": lambda a: a["ctrl"][0]}, {}, RuntimeError, r"'ctrl' must be a 2-D tensor, got 1-D"),
    ("motion float64", {"motion": lambda a: a["motion"].double()}, {}, RuntimeError, r"'motion' must have dtype Float, got Double"),
    ("motion 2-D", {"motion": lambda a: a["motion"][0]}, {}, RuntimeError, r"'motion' must be a 3-D tensor, got 2-D"),
    ("motion M mismatch", {"motion": lambda a: torch.randn(2, T, D, device=a["ctrl"].device)}, {}, RuntimeError, r"'motion' must have size 1 or W = ctrl.size\(0\) = 4 in dim 0, got shape \[2, 10, 3\]"),
    ("motion no frames", {"motion": lambda a: torch.randn(M, 0, D, device=a["ctrl"].device)}, {}, RuntimeError, r"'motion' must hold at least one frame"),
    ("motion non-contiguous", {"motion": lambda a: torch.randn(M, D, T, device=a["ctrl"].device).transpose(1, 2)}, {}, RuntimeError, r"'motion' must be contiguous"),
    ("act_ids float", {"act_ids": lambda a: a["act_ids"].float()}, {}, RuntimeError, r"'act_ids' must have dtype Int or Long, got Float"),
    ("act_ids wrong length", {"act_ids": lambda a: a["act_ids"][:2]}, {}, RuntimeError, r"'act_ids' must have size 3 in dim 0, got shape \[2\]"),
    ("act_ids out of range", {"act_ids": lambda a: torch.tensor([5, 6, 2], device=a["ctrl"].device)}, {}, RuntimeError, r"'act_ids' must hold indices in \[0, 6\) .*got act_ids\[1\] = 6"),
    ("act_ids negative", {"act_ids": lambda a: torch.tensor([5, -1, 2], device=a["ctrl"].device)}, {}, RuntimeError, r"'act_ids' must hold indices in \[0, 6\) \(nu = ctrl.size\(1\) = 6\), got act_ids\[1\] = -1"),
    ("act_ids duplicated", {"act_ids": lambda a: torch.tensor([5, 2, 5], device=a["ctrl"].device)}, {}, RuntimeError, r"'act_ids' must not repeat an index, got 5 at positions 0 and 2"),
    ("step int32", {"step": lambda a: a["step"].int()}, {}, RuntimeError, r"'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] \(see flycuda.new_step_counter\), got Int of shape \[2\]"),
    ("step shape", {"step": lambda a: torch.zeros(3, dtype=torch.long, device=a["ctrl"].device)}, {}, RuntimeError, r"'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] .*, got Long of shape \[3\]"),
    ("step strided", {"step": lambda a: torch.zeros(4, dtype=torch.long, device=a["ctrl"].device)[::2]}, {}, RuntimeError, r"'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] .*, got Long of shape \[2\]"),
    ("offsets int", {"offsets": lambda a: a["offsets"].long()}, {}, RuntimeError, r"'offsets' must have dtype Float or Double, got Long"),
    ("offsets length", {"offsets": lambda a: a["offsets"][:3]}, {}, RuntimeError, r"'offsets' must have size 4 in dim 0, got shape \[3\]"),
    ("ctrl overlapping", {"ctrl": lambda a: torch.randn(1, NU, device=a["ctrl"].device).expand(W, NU)}, {}, RuntimeError, r"'ctrl' must not have overlapping memory"),
    ("bad mode", {}, {"mode": "wrap"}, ValueError, r"'mode' must be 'clamp' or 'loop', got 'wrap'"),
    ("nan fps", {}, {"frames_per_step": float("nan")}, ValueError, r"'frames_per_step' must be finite, got nan"),
]

RECORD_CASES = [
    ("history float64", {"history": lambda a: a["history"].double()}, {}, RuntimeError, r"'history' must have dtype Float, got Double"),
    ("history 2-D", {"history": lambda a: a["history"][:, 0]}, {}, RuntimeError, r"'history' must be a 3-D tensor, got 2-D"),
    ("qpos worlds", {"qpos": lambda a: a["qpos"][:3]}, {}, RuntimeError, r"'qpos' must have size 4 \(worlds\) in dim 0, got shape \[3, 8\]"),
    ("qpos int", {"qpos": lambda a: a["qpos"].int()}, {}, RuntimeError, r"'qpos' must have dtype Float, got Int"),
    ("adrs out of range", {"adrs": lambda a: torch.tensor([7, 8, 1], device=a["history"].device)}, {}, RuntimeError, r"'adrs' must hold indices in \[0, 8\) .*got adrs\[1\] = 8"),
    ("adrs wrong length", {"adrs": lambda a: a["adrs"][:1]}, {}, RuntimeError, r"'adrs' must have shape \[3\], got \[1\]"),
    ("step 0-D", {"step": lambda a: a["step"][0]}, {}, RuntimeError, r"'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] .*, got Long of shape \[\]"),
    ("every 0", {}, {"every": 0}, ValueError, r"'every' must be >= 1, got 0"),
]


def _apply(a, change):
    for k, f in change.items():
        a[k] = f(a)
    return a


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("name,change,kw,exc,msg", MOTION_CASES, ids=[c[0] for c in MOTION_CASES])
def test_motion_to_ctrl_bad_input(device, name, change, kw, exc, msg):
    a = _apply(good(device), change)
    ctrl_before, step_before = a["ctrl"].clone(), a["step"].clone()
    with pytest.raises(exc, match=r"flycuda\.motion_to_ctrl: (argument )?" + msg):
        call_motion(a, **kw)
    assert torch.equal(a["ctrl"], ctrl_before) and torch.equal(a["step"], step_before)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("name,change,kw,exc,msg", RECORD_CASES, ids=[c[0] for c in RECORD_CASES])
def test_record_qpos_bad_input(device, name, change, kw, exc, msg):
    a = _apply(good(device), change)
    before = a["history"].clone()
    with pytest.raises(exc, match=r"flycuda\.record_qpos: argument " + msg):
        call_record(a, **kw)
    assert torch.equal(a["history"], before)


@pytest.mark.parametrize("which", ["step", "advance_float"])
def test_advance_step_bad_input(which):
    step = torch.zeros(1, dtype=torch.float32) if which == "step" else flycuda.new_step_counter()
    if which == "step":
        with pytest.raises(RuntimeError, match=r"flycuda\.advance_step: argument 'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] .*, got Float of shape \[1\]"):
            flycuda.advance_step(step)
        assert int(step[0]) == 0
    else:
        with pytest.raises(ValueError, match=r"'advance' must be >= 0, got -1"):
            flycuda.motion_to_ctrl(torch.randn(1, 2, 1), step, torch.randn(1, 1),
                                   torch.tensor([0]), advance=-1)
        assert int(step[0]) == 0


@pytest.mark.needs_cuda
@pytest.mark.parametrize("arg", ["motion", "step", "act_ids", "offsets"])
def test_motion_to_ctrl_mismatched_devices(arg):
    a = good("cuda")
    a[arg] = a[arg].cpu()
    ctrl_before, step_before = a["ctrl"].clone(), a["step"].clone().cpu()
    with pytest.raises(RuntimeError, match=rf"argument '{arg}' must be on cuda:0 \(the device of 'ctrl'\), got cpu"):
        call_motion(a)
    assert torch.equal(a["ctrl"], ctrl_before) and torch.equal(a["step"].cpu(), step_before)


@pytest.mark.needs_cuda
@pytest.mark.parametrize("arg", ["qpos", "step", "adrs"])
def test_record_qpos_mismatched_devices(arg):
    a = good("cuda")
    a[arg] = a[arg].cpu()
    before = a["history"].clone()
    with pytest.raises(RuntimeError, match=rf"argument '{arg}' must be on cuda:0 \(the device of 'history'\), got cpu"):
        call_record(a)
    assert torch.equal(a["history"], before)


@pytest.mark.parametrize("arg", ["qpos", "adrs", "step"])
def test_record_qpos_device_message_names_history(arg):
    """Mismatched devices without a GPU (a meta input, CPU history): the message names the
    output by its argument name (a GPU run once read "the device of 'out'")."""
    a = good("cpu")
    a[arg] = torch.empty(a[arg].shape, dtype=a[arg].dtype, device="meta")
    before = a["history"].clone()
    with pytest.raises(RuntimeError, match=rf"argument '{arg}' must be on cpu \(the device of 'history'\), got meta"):
        call_record(a)
    assert torch.equal(a["history"], before)


def test_motion_to_ctrl_cpu_ctrl_with_meta_motion():
    """Mismatched devices without a GPU: a meta motion with a CPU ctrl."""
    a = good("cpu")
    a["motion"] = torch.empty(M, T, D, device="meta")
    before = a["ctrl"].clone()
    with pytest.raises(RuntimeError, match=r"argument .motion. must be on cpu \(the device of .ctrl.\), got meta"):
        call_motion(a)
    assert torch.equal(a["ctrl"], before)


@pytest.mark.parametrize("op", ["motion_to_ctrl", "record_qpos"])
def test_cpu_index_values_checked_on_every_call(op):
    """On the CPU the op checks index values on every call (the stable ABI has no version
    counter to cache on; a scan costs no copy), so even a write that bypasses the version
    counter (here through .data, as a Warp alias would) is caught, and the output stays
    untouched. (CUDA's once-per-version check in the wrappers: tests/ops/test_values.py.)"""
    a = good("cpu")
    ids, out, call = ((a["act_ids"], a["ctrl"], call_motion) if op == "motion_to_ctrl"
                      else (a["adrs"], a["history"], call_record))
    call(a)
    ids.data[1] = 99  # no version bump
    out.copy_(poison_like(out))
    before = out.clone()
    with pytest.raises(RuntimeError, match=rf"'{'act_ids' if op == 'motion_to_ctrl' else 'adrs'}' must hold "
                                           r"indices in \[0, \d+\) .*\[1\] = 99"):
        call(a)
    assert torch.equal(out, before)


def test_index_tensors_made_in_inference_mode():
    """Inference tensors have no version counter: they are validated on every call."""
    a = good("cpu")
    with torch.inference_mode():
        ids = torch.tensor([5, 0, 2])
        bad = torch.tensor([5, 6, 2])
    flycuda.motion_to_ctrl(a["motion"], a["step"], a["ctrl"], ids, offsets=a["offsets"])
    flycuda.motion_to_ctrl(a["motion"], a["step"], a["ctrl"], ids, offsets=a["offsets"])
    with pytest.raises(RuntimeError, match=r"'act_ids' must hold indices in \[0, 6\)"):
        flycuda.motion_to_ctrl(a["motion"], a["step"], a["ctrl"], bad, offsets=a["offsets"])


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_outputs_must_not_alias_inputs(device):
    """Kernels mark outputs and inputs __restrict__: an output sharing memory with an
    input is an error naming both; disjoint views of one buffer are fine."""
    store = torch.randn(4, 12).to(device)
    ids, step = torch.tensor([0, 1, 2]).to(device), flycuda.new_step_counter(device)
    before = store.clone()
    with pytest.raises(RuntimeError, match=r"argument 'ctrl' must not share memory with argument 'motion'"):
        # motion: row 0, elements 0..8; ctrl: [4, 6] view from row 0, element 6
        flycuda.motion_to_ctrl(store[0, :9].view(1, 3, 3), step, store[:, 6:12], ids)
    assert torch.equal(store, before)
    hist = torch.randn(4, 2, 3).to(device)
    with pytest.raises(RuntimeError, match=r"argument 'history' must not share memory with argument 'qpos'"):
        flycuda.record_qpos(hist[:, 0, :], ids, hist, step)
    # motion in row 3, ctrl in rows 0-2, columns 9-11: disjoint
    flycuda.motion_to_ctrl(store[3, :9].view(1, 3, 3), step, store[:3, 9:12], ids)
    assert torch.equal(store[:3, 9:12], store[3, :9].view(3, 3)[0].expand(3, 3))
