"""flycuda.control.RuleBasedController: FlyGym's rule-based controller for W worlds.

* FlyGym lane: equal to FlyGym's own ``RuleBasedController`` (flygym_demo.complex_terrain),
  world w seeded with seed + w, bit for bit over thousands of steps: phases, stepping legs,
  the three rules' scores, the random draws (NumPy's RandomState, word for word), the joint
  angles and adhesion; after a reset with and without a seed too.
* Every lane: world w is a controller of its own, a masked reset, bad settings, CUDA as the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.cases import ulps32

from flycuda.control import STEP_DURATION, ControlError, RuleBasedController

needs_flygym = pytest.mark.needs_flygym
DT = 1e-4


def _same_as_flygym(ours: RuleBasedController, theirs: list, angles, adhesion, step: int) -> None:
    for w, c in enumerate(theirs):
        action = c.step()
        assert np.array_equal(ours.phases[w].numpy(), c.leg_phases), (step, w)
        assert np.array_equal(ours.stepping[w].numpy(), c.mask_is_stepping), (step, w)
        for k, scores in enumerate((c.rule1_scores, c.rule2_scores, c.rule3_scores)):
            assert np.array_equal(ours.scores[w, k].numpy(), scores), (step, w, f"rule{k + 1}")
        assert ulps32(angles[w], action.joint_angles) == 0, (step, w)
        assert np.array_equal(adhesion[w].numpy(), action.adhesion_onoff), (step, w)


@needs_flygym
def test_the_rule_based_controller_is_flygyms_world_by_world():
    from flygym_demo.complex_terrain import PreprogrammedSteps
    from flygym_demo.complex_terrain.rule_based_controller import RuleBasedController as FlyGymRules

    assert PreprogrammedSteps().duration == STEP_DURATION
    W, steps = 3, 6000
    ours = RuleBasedController(W, DT, seed=11)
    theirs = [FlyGymRules(timestep=DT, seed=11 + w) for w in range(W)]
    chosen = 0
    for step in range(steps):
        was = ours.stepping.clone()
        angles, adhesion = ours.step()
        chosen += int((ours.stepping & ~was).sum())
        _same_as_flygym(ours, theirs, angles, adhesion, step)
    assert chosen > 40, chosen  # legs chosen by the rules, many times over
    ours.reset(seed=3, worlds=torch.tensor([True, False, True]))  # FlyGym's reset, with and without a seed
    for w, c in enumerate(theirs):
        c.reset(seed=3 + w if w % 2 == 0 else None)
    ours.reset(worlds=torch.tensor([False, True, False]))
    for step in range(2000):
        angles, adhesion = ours.step()
        _same_as_flygym(ours, theirs, angles, adhesion, steps + step)


# --- every lane ---------------------------------------------------------------------------

def test_world_w_is_a_controller_of_its_own():
    many = RuleBasedController(5, DT, seed=20)
    one = RuleBasedController(1, DT, seed=23)
    for _ in range(3000):
        a, h = many.step()
        b, g = one.step()
        assert torch.equal(a[3], b[0]) and torch.equal(h[3], g[0])
    assert torch.equal(many.state[3], one.state[0]) and torch.equal(many.rng[3], one.rng[0])


def test_a_masked_reset_leaves_the_other_worlds_alone():
    c = RuleBasedController(3, DT, seed=1)
    for _ in range(500):
        c.step()
    state, rng = c.state.clone(), c.rng.clone()
    c.reset(seed=9, worlds=torch.tensor([False, True, False]))
    assert torch.equal(c.state[[0, 2]], state[[0, 2]]) and torch.equal(c.rng[[0, 2]], rng[[0, 2]])
    assert (c.state[1] == 0).all() and torch.equal(c.rng[1], RuleBasedController(3, DT, seed=9).rng[1])  # seed + w
    c.reset()
    assert (c.state == 0).all() and (c.rng[:, -1] == 0).all()


def test_bad_settings_are_refused():
    with pytest.raises(ControlError, match=r"worlds must be a positive integer, got 0"):
        RuleBasedController(0, DT)
    with pytest.raises(ControlError, match=r"timestep must be > 0 seconds, got -1"):
        RuleBasedController(2, -1)
    with pytest.raises(ControlError, match=r"unknown weight\(s\) \['rule9'\]"):
        RuleBasedController(2, DT, weights={"rule9": 1.0})
    c = RuleBasedController(2, DT)
    with pytest.raises(ControlError, match=r"worlds must be a bool mask \[2\]"):
        c.reset(worlds=torch.tensor([1, 0]))


@pytest.mark.needs_cuda
def test_on_cuda_it_steps_as_on_the_cpu():
    cpu, gpu = RuleBasedController(64, DT, seed=2), RuleBasedController(64, DT, device="cuda", seed=2)
    for step in range(2000):
        a_c, h_c = cpu.step()
        a_g, h_g = gpu.step()
        assert torch.equal(a_c, a_g.cpu()) and torch.equal(h_c, h_g.cpu()), step
    assert torch.equal(cpu.state, gpu.state.cpu()) and torch.equal(cpu.rng, gpu.rng.cpu())
