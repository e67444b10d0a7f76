"""flycuda.env.wrappers (gymnasium's usual vector wrappers on the device) against the same
statistics computed by hand, and gymnasium's own ClipAction/RescaleAction on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.wrappers.vector import ClipAction
from gymnasium.wrappers.vector import RescaleAction as GymRescaleAction

import flycuda.env as fe
from flycuda.env.wrappers import EpisodeStatistics, NormalizeObservation, NormalizeReward, RescaleAction

pytestmark = pytest.mark.needs_warp


def _actions(steps: int, W: int = 3):
    g = torch.Generator().manual_seed(7)
    return [torch.randn(W, 42, generator=g) * 0.3 for _ in range(steps)]


def test_episode_statistics_report_each_ended_episode():
    env = EpisodeStatistics(fe.make("walk", worlds=3, device="cpu", max_episode_steps=4))
    env.reset(seed=0)
    sums, n, seen = torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.int64), 0
    for a in _actions(9):
        _, r, term, trunc, info = env.step(a)
        sums += r.double()
        n += 1
        done = term | trunc
        assert torch.equal(info["_episode"], done)
        if done.any():
            assert torch.allclose(info["episode"]["r"][done].double(), sums[done], atol=1e-5)
            assert torch.equal(info["episode"]["l"][done], n[done]) and (info["episode"]["l"][~done] == 0).all()
            seen += int(done.sum())
            sums[done], n[done] = 0.0, 0
    assert seen == 6  # two truncations per world in 9 steps of 4


def test_normalize_observation_and_reward_match_running_statistics():
    base = fe.make("walk", worlds=3, device="cpu", max_episode_steps=5)
    env = NormalizeReward(NormalizeObservation(base), gamma=0.9)
    obs, _ = env.reset(seed=0)
    raw = [base.obs.clone().double()]
    G = torch.zeros(3, dtype=torch.float64)
    returns = []
    for a in _actions(8):
        obs, r, term, trunc, info = env.step(a)
        raw.append(base.obs.clone().double())
        G = 0.9 * G + base.rewards.double()
        returns.append(G.clone())
        G[term | trunc] = 0.0
        # the observation: scaled by every observation so far (a count of 1e-4 to start, as gymnasium's)
        allobs = torch.cat(raw)
        cnt = allobs.shape[0] + 1e-4
        mean = allobs.sum(0) / cnt
        var = (1e-4 * (mean ** 2 + 1.0) + ((allobs - mean) ** 2).sum(0) + 0.0) / cnt  # the prior's mass at 0, 1
        assert torch.allclose(obs.double(), (base.obs.double() - mean) / torch.sqrt(var + 1e-8), atol=2e-3)
        allret = torch.cat(returns)
        rm = allret.sum() / (allret.numel() + 1e-4)
        rv = (1e-4 * (rm ** 2 + 1.0) + ((allret - rm) ** 2).sum()) / (allret.numel() + 1e-4)
        assert torch.allclose(r.double(), base.rewards.double() / torch.sqrt(rv + 1e-8), rtol=1e-4, atol=1e-6)
    assert "final_obs" in info


def test_rescale_action_on_the_device_and_gymnasiums_on_the_cpu():
    env = fe.make("walk", worlds=2, device="cpu")
    lo, hi = (torch.as_tensor(b) for b in (env.single_action_space.low, env.single_action_space.high))
    ours = RescaleAction(env)
    ours.reset(seed=0)
    ours.step(torch.stack([torch.full((42,), -1.0), torch.ones(42)]))
    assert torch.allclose(env.actions[0], lo) and torch.allclose(env.actions[1], hi)
    theirs = GymRescaleAction(env, -1.0, 1.0)
    theirs.step(np.zeros((2, 42), dtype=np.float32))
    assert torch.allclose(env.actions, ((lo + hi) / 2).expand(2, -1), atol=1e-6)
    clipped = ClipAction(env)
    clipped.step(torch.full((2, 42), 100.0))
    assert torch.allclose(env.actions, hi.expand(2, -1))
    with pytest.raises(ValueError, match="low < high"):
        RescaleAction(env, 1.0, -1.0)


def test_gymnasiums_numpy_wrappers_behind_array_conversion():
    """On the CPU, gymnasium's own numpy wrappers run behind ArrayConversion (torch -> numpy)."""
    pytest.importorskip("array_api_compat")
    from gymnasium.wrappers.vector import ArrayConversion, DictInfoToList, RecordEpisodeStatistics
    from gymnasium.wrappers.vector import NormalizeReward as GymNormalizeReward

    env = RecordEpisodeStatistics(GymNormalizeReward(ArrayConversion(
        fe.make("walk", worlds=2, device="cpu", max_episode_steps=3), env_xp=torch, target_xp=np)))
    env.reset(seed=0)
    for _ in range(3):
        obs, r, term, trunc, info = env.step(np.zeros((2, 42), dtype=np.float32))
    assert isinstance(obs, np.ndarray) and trunc.all() and info["_episode"].all() and (info["episode"]["l"] == 3).all()
    listed = DictInfoToList(ArrayConversion(fe.make("walk", worlds=2, device="cpu"), env_xp=torch, target_xp=np))
    listed.reset(seed=0)
    *_, infos = listed.step(np.zeros((2, 42), dtype=np.float32))
    assert isinstance(infos, list) and len(infos) == 2 and "reward/forward" in infos[0]  # (masked keys where set)
