"""gymnasium's usual vector wrappers, on the device: episode statistics and running
normalization of observations and rewards for :class:`flycuda.env.FlyVecEnv`.

gymnasium 1.4's own ``RecordEpisodeStatistics``, ``NormalizeObservation``,
``NormalizeReward`` and ``DictInfoToList`` expect numpy arrays (or refuse the SAME_STEP
autoreset these environments use); these keep the environment's torch tensors on its
device, with no host sync. Stack them as gymnasium's: ``EpisodeStatistics(NormalizeReward(
NormalizeObservation(RescaleAction(env))))``. gymnasium's own ``ClipAction`` and
``RescaleAction`` work on the environment as it is on the CPU (numpy functions on CPU tensors;
the action space is bounded), not on CUDA tensors: use :class:`RescaleAction` there (the
environment clamps to the actuators' ranges by itself). tests/env/test_env_wrappers.py runs them all.
"""

from __future__ import annotations

import torch
from gymnasium.vector import VectorWrapper

from ..errors import EnvError
from .state import check_walked, host_copies, load_walked, walk

__all__ = ["EpisodeStatistics", "NormalizeObservation", "NormalizeReward", "RescaleAction", "RunningMeanStd", "Stateful"]


class RunningMeanStd:
    """Mean and variance of a stream of batches [B, ...] (Chan et al.'s parallel update, as
    gymnasium's), in float64 on ``device``."""

    def __init__(self, shape=(), device=None, epsilon: float = 1e-4):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = torch.full((), epsilon, dtype=torch.float64, device=device)

    def update(self, x: torch.Tensor) -> None:
        x = x.double()
        n = x.shape[0]
        mean, var = x.mean(0), x.var(0, unbiased=False)
        delta, total = mean - self.mean, self.count + n
        m2 = self.var * self.count + var * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)


class Stateful(VectorWrapper):
    """A wrapper whose state (its running statistics, its episodes' sums) joins the wrapped
    environment's in :meth:`state_dict` (:mod:`flycuda.env.state`): a checkpoint of the stack."""

    def state_dict(self) -> dict:
        """``{"env": the wrapped environment's state_dict(), "own": this wrapper's tensors}``."""
        tensors, _ = walk(self)
        return {"env": self.env.state_dict(), "own": host_copies(tensors)}

    def load_state_dict(self, state: dict) -> None:
        """The stack as :meth:`state_dict` found it (checked whole before anything changes)."""
        what = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state, dict) or set(state) != {"env", "own"}:
            raise EnvError(f"{what}: expected a wrapper's state_dict() ({{'env', 'own'}}), got "
                           f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")
        check_walked(self, state["own"], what)
        self.env.load_state_dict(state["env"])
        load_walked(self, state["own"], {}, what)


class EpisodeStatistics(Stateful):
    """Each world's episode return and length, as gymnasium's ``RecordEpisodeStatistics``
    reports them: in the step where a world's episode ends, ``info["episode"]`` holds
    ``{"r": returns [W], "l": lengths [W]}`` (the ended worlds' values, 0 elsewhere) and
    ``info["_episode"]`` the ended worlds (bool [W]); torch tensors on the device."""

    def __init__(self, env):
        super().__init__(env)
        W, dev = env.num_envs, env.unwrapped.device
        self.returns = torch.zeros(W, dtype=torch.float64, device=dev)
        self.lengths = torch.zeros(W, dtype=torch.int64, device=dev)

    def reset(self, **kwargs):
        self.returns.zero_()
        self.lengths.zero_()
        return self.env.reset(**kwargs)

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.returns += rewards
        self.lengths += 1
        done = terminated | truncated
        info = dict(info)
        info["episode"] = {"r": torch.where(done, self.returns, 0.0).float(),
                           "l": torch.where(done, self.lengths, 0)}
        info["_episode"] = done
        self.returns.masked_fill_(done, 0.0)
        self.lengths.masked_fill_(done, 0)
        return obs, rewards, terminated, truncated, info


class NormalizeObservation(Stateful):
    """Observations scaled to zero mean and unit variance by running statistics of every
    observation seen (gymnasium's ``NormalizeObservation``; SAME_STEP autoreset is fine here:
    a reset world's observation is its new episode's first, and ``info["final_obs"]`` is
    scaled alike but not counted). ``update=False`` freezes the statistics (evaluation)."""

    def __init__(self, env, epsilon: float = 1e-8, update: bool = True):
        super().__init__(env)
        self.rms = RunningMeanStd(env.single_observation_space.shape, env.unwrapped.device)
        self.epsilon, self.update = epsilon, update

    def _scale(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs.double() - self.rms.mean) / torch.sqrt(self.rms.var + self.epsilon)).float()

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if self.update:
            self.rms.update(obs)
        return self._scale(obs), info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        if self.update:
            self.rms.update(obs)
        info = dict(info)
        if "final_obs" in info:
            info["final_obs"] = self._scale(info["final_obs"])
        return self._scale(obs), rewards, terminated, truncated, info


class NormalizeReward(Stateful):
    """Rewards divided by the running standard deviation of each world's discounted return
    (gymnasium's ``NormalizeReward``): ``G = gamma * G + r``, restarted after a world's episode
    ends (gymnasium decays by the ended step's flag before adding its reward)."""

    def __init__(self, env, gamma: float = 0.99, epsilon: float = 1e-8, update: bool = True):
        super().__init__(env)
        dev = env.unwrapped.device
        self.rms = RunningMeanStd((), dev)
        self.discounted = torch.zeros(env.num_envs, dtype=torch.float64, device=dev)
        self.gamma, self.epsilon, self.update = gamma, epsilon, update

    def reset(self, **kwargs):
        self.discounted.zero_()
        return self.env.reset(**kwargs)

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.discounted.mul_(self.gamma).add_(rewards)
        if self.update:
            self.rms.update(self.discounted)
        self.discounted.masked_fill_(terminated | truncated, 0.0)
        scaled = (rewards.double() / torch.sqrt(self.rms.var + self.epsilon)).float()
        return obs, scaled, terminated, truncated, info


class RescaleAction(Stateful):
    """Actions in [``low``, ``high``] (a policy's tanh range, say) mapped linearly onto the
    environment's action space (its bounds: the actuators' ranges, or their joints'), on the
    device (gymnasium's ``RescaleAction``, for torch tensors on any device)."""

    def __init__(self, env, low: float = -1.0, high: float = 1.0):
        super().__init__(env)
        if not low < high:
            raise ValueError(f"RescaleAction needs low < high, got low={low}, high={high}")
        dev = env.unwrapped.device
        lo, hi = (torch.as_tensor(b, dtype=torch.float32, device=dev) for b in
                  (env.single_action_space.low, env.single_action_space.high))
        self.low, self.high = float(low), float(high)
        self.scale = (hi - lo) / (high - low)
        self.offset = lo - self.low * self.scale

    def step(self, actions):
        return self.env.step(torch.addcmul(self.offset, actions, self.scale))
