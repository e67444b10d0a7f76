"""flycuda.record_qpos vs flycuda.reference (vectorized) and reference.grid (emulated)."""

import pytest
import torch
from helpers.devices import cpu_and_cuda, poison_like, strided_view

import flycuda
from flycuda import reference

SHAPES = [(1, 1, 1, 1), (3, 8, 7, 5), (33, 49, 42, 10), (1000, 69, 42, 3)]  # (W, nq, D, R)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("step_value", [-1, 0, 1, 2, 3, 6, 8, 9, 10 ** 9])
@pytest.mark.parametrize("adrs_dtype", [torch.int32, torch.int64])
def test_matches_reference(device, shape, every, step_value, adrs_dtype):
    W, nq, D, R = shape
    qpos = torch.randn(W, nq).to(device)
    adrs = torch.randint(0, nq, (D,)).to(device=device, dtype=adrs_dtype)
    history = poison_like(torch.empty(W, R, D)).to(device)
    expected = history.cpu().clone()
    reference.record_qpos(qpos.cpu(), adrs.cpu(), expected,
                          flycuda.new_step_counter("cpu", step_value), every=every)
    flycuda.record_qpos(qpos, adrs, history, flycuda.new_step_counter(device, step_value),
                        every=every)
    assert torch.equal(history.cpu(), expected)  # a pure copy: bit for bit
    k = step_value // every
    recorded = step_value >= 0 and step_value % every == 0 and k < R
    if recorded:
        assert torch.equal(history.cpu()[:, k], qpos.cpu()[:, adrs.long().cpu()])
    if W * D <= 64:  # tiny: the grid emulator too
        grid = poison_like(torch.empty(W, R, D))
        grid_expected = grid.clone()
        reference.record_qpos(qpos.cpu(), adrs.cpu(), grid_expected,
                              flycuda.new_step_counter("cpu", step_value), every=every)
        reference.grid.record_qpos(qpos.cpu(), adrs.cpu(), grid,
                                   flycuda.new_step_counter("cpu", step_value), every=every,
                                   threads=4)
        assert torch.equal(grid, grid_expected)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("kind", ["row_stride", "transposed"])
def test_strided_qpos_and_history(device, kind):
    W, nq, D, R = 21, 30, 11, 4
    qpos, _ = strided_view(W, nq, kind, device)
    qpos.copy_(torch.randn(W, nq))
    adrs = torch.randint(0, nq, (D,)).to(device)
    parent = poison_like(torch.empty(R, D, W + 3)).to(device)
    history = parent[:, :, 1:1 + W].permute(2, 0, 1)  # [W, R, D], non-contiguous
    before = parent.cpu().clone()
    flycuda.record_qpos(qpos, adrs, history, flycuda.new_step_counter(device, 2))
    expected = before.clone()
    reference.record_qpos(qpos.cpu(), adrs.cpu(), expected[:, :, 1:1 + W].permute(2, 0, 1),
                          flycuda.new_step_counter("cpu", 2))
    assert torch.equal(parent.cpu(), expected)
    assert not torch.equal(parent.cpu(), before)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_recording_over_a_replay(device):
    """every=2 over 10 steps fills rows 0..4 with the qpos of steps 0, 2, .., 8."""
    W, nq, D, R = 4, 9, 6, 5
    adrs = torch.tensor([8, 0, 3, 3, 1, 5]).to(device)
    history = poison_like(torch.empty(W, R, D)).to(device)
    step = flycuda.new_step_counter(device, 0)
    seen = []
    for _ in range(10):
        qpos = torch.randn(W, nq).to(device)
        seen.append(qpos.cpu()[:, adrs.cpu()])
        flycuda.record_qpos(qpos, adrs, history, step, every=2)
        flycuda.advance_step(step)
    assert torch.equal(history.cpu(), torch.stack(seen[0::2], dim=1))


def test_opcheck():
    args = (torch.randn(5, 9), torch.tensor([1, 4, 4, 0]), torch.randn(5, 3, 4),
            flycuda.new_step_counter("cpu", 2), 1)
    torch.library.opcheck(torch.ops.flycuda.record_qpos.default, args)
