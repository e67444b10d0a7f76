"""FlyVecEnv.state_dict / load_state_dict: a fresh environment loaded with the state of one
mid-episode (autoresets on either side) steps on bit for bit as the one never stopped, through
a file (torch.save, weights_only), with the wrappers' statistics; what does not fit is refused
in one line, changing nothing."""

from __future__ import annotations

import pytest
import torch

import flycuda.env as fe
from flycuda.env.wrappers import EpisodeStatistics, NormalizeObservation, NormalizeReward

pytestmark = pytest.mark.needs_warp


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu().contiguous()
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int64) if t.dtype == torch.float64 else t


def _run(env, actions) -> list:
    out = []
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append([_bits(x).clone() for x in (obs, r, term, trunc, info["final_obs"])])
    return out


def _actions(env, steps, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = (torch.as_tensor(b) for b in (env.single_action_space.low, env.single_action_space.high))
    return [lo + (hi - lo) * torch.rand(env.num_envs, lo.numel(), generator=g) for _ in range(steps)]


def _stack(base, wrapped):
    return EpisodeStatistics(NormalizeReward(NormalizeObservation(base), gamma=0.9)) if wrapped else base


@pytest.mark.parametrize("task,wrapped", [("walk", False), ("walk", True), ("approach", False), ("odor_taxis", False)])
def test_a_loaded_state_steps_on_bit_for_bit(tmp_path, task, wrapped):
    kw = dict(worlds=3, device="cpu", max_episode_steps=5, spawn_jitter=0.002)
    first = _stack(fe.make(task, **kw), wrapped)
    first.reset(seed=3)
    acts = _actions(first, 13, seed=1)
    _run(first, acts[:7])  # one autoreset behind (episodes of 5)
    path = tmp_path / "env.pt"
    torch.save(first.state_dict(), path)
    sample = first.action_space.sample()
    want = _run(first, acts[7:])  # another autoreset ahead
    second = _stack(fe.make(task, **kw), wrapped)
    second.reset(seed=11)  # another seed, other episodes: all replaced by the state
    _run(second, acts[:2])
    second.load_state_dict(torch.load(path, weights_only=True))
    assert (second.action_space.sample() == sample).all()  # the action space's generator too
    got = _run(second, acts[7:])
    for k, (g, w) in enumerate(zip(got, want)):
        for name, a, b in zip(("obs", "reward", "terminated", "truncated", "final_obs"), g, w):
            assert torch.equal(a, b), (k, name)
    assert any(bool(w[2].any() or w[3].any()) for w in want)  # an episode ended after the load


def test_what_does_not_fit_is_refused_and_changes_nothing():
    from flycuda.errors import EnvError

    env = fe.make("walk", worlds=3, device="cpu", max_episode_steps=5)
    env.reset(seed=0)
    state = env.state_dict()
    other = fe.make("walk", worlds=2, device="cpu", max_episode_steps=5)
    other.reset(seed=0)
    before = other.state_dict()
    with pytest.raises(EnvError, match=r"^state_dict: the state is of worlds=3, this environment's is 2$"):
        other.load_state_dict(state)
    bad = dict(state, tensors={k: v for k, v in state["tensors"].items() if k != "world_steps"})
    with pytest.raises(EnvError, match=r"the state does not fit: it lacks \['world_steps'\]"):
        env.load_state_dict(bad)
    with pytest.raises(EnvError, match="expected a 'flycuda.env_state/1' state"):
        env.load_state_dict({"tensors": {}})
    after = other.state_dict()
    assert all(torch.equal(_bits(before["tensors"][k]), _bits(after["tensors"][k])) for k in before["tensors"])
    assert all(torch.equal(_bits(before["sim"][k]), _bits(after["sim"][k])) for k in before["sim"])
