"""flycuda.env as a TorchRL environment (``pip install "flycuda[torchrl]"``).

    from flycuda.env.torchrl import TorchRLEnv
    env = TorchRLEnv(flycuda.env.make("imitate", worlds=1024))
    td = env.rollout(100)                   # TensorDict [1024, 100]: observation, action, next/reward, ...

Batch size [W] on the sim's device. A world whose episode ends is reset inside
:meth:`FlyVecEnv.step` (same-step autoreset); the adapter gives TorchRL what it expects
of an environment with partial resets: ``next/observation`` is the last observation of the
ended episode (``final_obs``), ``done``/``terminated``/``truncated`` mark it, and the
``_reset`` that TorchRL's collectors then ask for returns the new episode's first
observation (already computed; worlds asked for that had not ended are reset then).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

__all__ = ["TorchRLEnv"]


class TorchRLEnv(EnvBase):
    """A :class:`flycuda.env.FlyVecEnv` as a TorchRL ``EnvBase`` (passes ``check_env_specs``)."""

    def __init__(self, env):
        W, A, O = env.num_envs, env.actions.shape[1], len(env.obs_names)
        super().__init__(device=env.device, batch_size=torch.Size([W]))
        self.fly = env
        lo, hi = env.action_map[2].expand(W, A), env.action_map[3].expand(W, A)
        self.observation_spec = Composite(observation=Unbounded(shape=(W, O), device=env.device),
                                          shape=(W,), device=env.device)
        self.action_spec = Bounded(low=lo.clamp(min=-1e9), high=hi.clamp(max=1e9), shape=(W, A), device=env.device)
        self.reward_spec = Unbounded(shape=(W, 1), device=env.device)
        flag = Categorical(2, shape=(W, 1), dtype=torch.bool, device=env.device)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(W,),
                                   device=env.device)
        self._started = False
        self._ended = torch.zeros(W, dtype=torch.bool, device=env.device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        env = self.fly
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if not self._started or mask is None:
            env.reset()
            self._started = True
        else:
            mask = mask.reshape(-1)
            fresh = mask & ~self._ended  # asked for, but still running: reset now
            if bool(fresh.any()):
                env.reset_worlds(fresh)
        self._ended.zero_()
        zeros = torch.zeros(env.num_envs, 1, dtype=torch.bool, device=self.device)
        return TensorDict({"observation": env.obs.clone(), "done": zeros, "terminated": zeros.clone(),
                           "truncated": zeros.clone()}, batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        env = self.fly
        _, rew, term, trunc, info = env.step(tensordict.get("action").contiguous())
        self._ended.copy_(info["_final_obs"])
        return TensorDict({"observation": info["final_obs"].clone(), "reward": rew.clone().unsqueeze(-1),
                           "done": (term | trunc).unsqueeze(-1), "terminated": term.clone().unsqueeze(-1),
                           "truncated": trunc.clone().unsqueeze(-1)}, batch_size=self.batch_size, device=self.device)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self.fly.reset(seed=int(seed))
            self._started = True
