"""Settled starts (issue 37): every task on every model starts at rest on the ground (FlyGym's
0.05 s warm-up of each initial state, flycuda.env.settle), so that a policy holding the pose
stands: no termination, the thorax within 20% of its start height, and no reward spike at the
start of an episode beyond the task's steady range (the falls of unsettled starts)."""

from __future__ import annotations

import pytest
import torch

import flycuda.env as fe
from flycuda.env.settle import settle
from flycuda.errors import EnvError

pytestmark = pytest.mark.needs_warp

MODELS = ["hexapod", pytest.param("neuromechfly", marks=pytest.mark.needs_flygym)]
STEPS = 40  # the first 10 steps against the steady 30 after them


def _hold(task: str, model: str, **kw) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(rewards [STEPS, W], thorax height / its start [STEPS, W], episodes ended) of a policy
    that holds each world's pose at reset."""
    env = fe.make(task, worlds=2, model=model, device="cpu", max_episode_steps=0, **kw)
    env.reset(seed=0)
    hold = env.angles.clone()
    z = lambda: env.sim.view("qpos")[:, env.layout.root_adr + 2].clone()  # noqa: E731
    z0, rewards, heights, ended = z(), [], [], 0
    for _ in range(STEPS):
        _, r, term, trunc, _ = env.step(hold)
        rewards.append(r.clone())
        heights.append(z() / z0)
        ended += int((term | trunc).sum())
    return torch.stack(rewards), torch.stack(heights), ended


def _spiky(rewards: torch.Tensor) -> bool:
    """Do the first 10 steps' rewards leave the steady range (steps 10..40) widened by its width,
    at least 0.5 (body lengths per second for walk and approach: an unsettled NeuroMechFly's
    fall gave -7 and +12)?"""
    steady = rewards[10:]
    lo, hi = steady.min().item(), steady.max().item()
    w = max(hi - lo, 0.5)
    return bool((rewards[:10] < lo - w).any() or (rewards[:10] > hi + w).any())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("task", ["imitate", "walk", "approach"])
def test_a_held_pose_stands_from_a_settled_start(task, model):
    _, heights, ended = _hold(task, model)  # with the reset's noise (0.02 rad on the joints)
    assert ended == 0
    assert ((heights > 0.8) & (heights < 1.2)).all(), (heights.min().item(), heights.max().item())
    rewards, _, _ = _hold(task, model, noise=0.0)  # the settled state itself
    assert not _spiky(rewards), (rewards[:10].min().item(), rewards[:10].max().item())


@pytest.mark.parametrize("model", MODELS)
def test_an_unsettled_start_falls(model):
    """What the settling prevents (so that the test above can fail): the unsettled starts fall."""
    _, heights, _ = _hold("walk", model, settle=0.0, noise=0.0)
    assert heights.min() < 0.85


def test_settle_is_physics_held_and_cached():
    from flycuda.sim.hexapod import fly_model

    mjm = fly_model()
    q = torch.tensor(mjm.qpos0, dtype=torch.float32).repeat(2, 1)
    v = torch.zeros(2, mjm.nv)
    c = torch.zeros(2, mjm.nu)
    q1, v1 = settle(mjm, q, v, c, 0.05)
    assert q1[0, 2] < q[0, 2] - 1e-3  # it fell onto the floor
    q2, v2 = settle(mjm, q, v, c, 0.05)  # from the cache, the same
    assert torch.equal(q1, q2) and torch.equal(v1, v2) and q1 is not q2
    assert settle(mjm, q, v, c, 0.0)[0] is q  # no settling: as given
    with pytest.raises(EnvError, match="settle must be a finite number of seconds >= 0"):
        fe.make("walk", worlds=1, device="cpu", settle=-1.0)
