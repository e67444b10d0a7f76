"""The determinism contract (docs/design.md, Determinism), held on Warp's CPU device: the same
run repeats bit for bit; a world's trajectory depends on the number of worlds beside it through
MuJoCo Warp's sparse-Jacobian solver (not on what they do, and not through flycuda), and not with
a dense Jacobian."""

from __future__ import annotations

import mujoco
import pytest
import torch

pytestmark = pytest.mark.needs_warp

STEPS = 1000  # 0.5 s; the hexapod lands after ~40 steps (contacts, constraint rows), W drifts apart later


def _world0(worlds: int, *, dense: bool = False, neighbours_moved: bool = False) -> torch.Tensor:
    """qpos of world 0 after STEPS steps of the same controls, with ``worlds`` worlds."""
    from flycuda.sim import Sim
    from flycuda.sim.hexapod import fly_model

    mjm = fly_model()
    if dense:
        mjm.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    sim = Sim.build(mjm, worlds, device="cpu")
    if neighbours_moved and worlds > 1:
        sim.view("qvel")[1:] += torch.randn_like(sim.view("qvel")[1:], generator=torch.Generator().manual_seed(0))
    ctrl = sim.view("ctrl")
    phase = torch.arange(ctrl.shape[1], dtype=torch.float32) * 0.7
    for k in range(STEPS):
        ctrl.copy_((0.4 * torch.sin(2 * torch.pi * 8 * k * sim.timestep + phase)).expand_as(ctrl))
        sim.step()
    return sim.view("qpos")[0].clone()


def test_the_same_run_repeats_and_the_neighbours_deeds_do_not_matter():
    three = _world0(3)
    assert torch.equal(three, _world0(3)) and torch.equal(three, _world0(3, neighbours_moved=True))


def test_how_many_neighbours_matters_with_sparse_jacobians_only():
    """MuJoCo Warp's sparse Newton solver accumulates each world's Hessian in a number of
    thread groups that depends on nworld (float32 atomics in another order): W = 1 and W = 3
    drift apart by float32 roundoff; a dense Jacobian removes the dependence."""
    sparse = (_world0(1) - _world0(3)).abs().max().item()
    assert 0 < sparse < 1e-3, sparse
    assert torch.equal(_world0(1, dense=True), _world0(3, dense=True))
