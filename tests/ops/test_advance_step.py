"""flycuda.advance_step vs its references."""

import pytest
import torch
from helpers.devices import cpu_and_cuda

import flycuda
from flycuda import reference


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("start,n", [(0, 1), (17, 5), (10 ** 9, 1), (-3, 2), (5, 0), (2 ** 40, -7)])
def test_matches_reference(device, start, n):
    step = flycuda.new_step_counter(device, start)
    ref, grid = flycuda.new_step_counter("cpu", start), flycuda.new_step_counter("cpu", start)
    flycuda.advance_step(step, n)
    reference.advance_step(ref, n)
    reference.grid.advance_step(grid, n)
    assert int(step[0]) == int(ref[0]) == int(grid[0]) == start + n


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_many_advances_stay_on_device(device):
    step = flycuda.new_step_counter(device, 0)
    for _ in range(1000):
        flycuda.advance_step(step)
    assert step.device.type == device and int(step[0]) == 1000


def test_opcheck():
    torch.library.opcheck(torch.ops.flycuda.advance_step.default,
                          (flycuda.new_step_counter("cpu", 3), 4))
