"""bench_env --reset-branch: the control step with the reset path in every step (before issue 53:
how a CUDA graph ran it) against only in the steps where a world ended (now:
:attr:`flycuda.env.FlyVecEnv.reset_branch`, a conditional graph node on CUDA, a host branch
eagerly), with resets rare (no episode ends) and frequent (every world ends every
``FREQUENT`` control steps), with the eyes (fast:2) and with descending drives, interleaved.
"""

from __future__ import annotations

import torch
from _timing import interleaved_medians

import flycuda.env as fe

FREQUENT = 4  # max_episode_steps of the frequent-reset rows
CONFIGS = {"eyes fast:2": dict(task="imitate", vision="fast:2"),
           "descending": dict(task="walk", action="descending")}
HEADER = ["model", "worlds", "env", "resets", "reset path", "ms/control step", "vs every step"]


def _actions(env, obs):
    """The same actions each step: the reference's joint angles, or a constant forward drive."""
    if env.action_space.shape[1] == 2:
        return torch.full((env.num_envs, 2), 0.8, device=env.device)
    return obs[:, env.obs_slice("reference")].clone()


def reset_branch_rows(W: int, args, require_graph) -> list[list]:
    """One row per (config, resets, reset path), medians of ``args.rounds`` interleaved rounds."""
    rows = []
    for name, cfg in CONFIGS.items():
        for resets, episode in (("rare", 10**6), ("frequent", FREQUENT)):
            envs = {}
            for branch in ("always", None):  # None: the env's own choice
                env = fe.make(cfg["task"], worlds=W, model=args.model, device=args.device,
                              vision=cfg.get("vision"), action=cfg.get("action", "joints"),
                              max_episode_steps=episode, check_actions=False)
                if branch is not None:
                    env.reset_branch = branch
                obs, _ = env.reset(seed=0)
                act = _actions(env, obs)
                step = (lambda e, a: lambda: e.step(a))(env, act)
                step()
                step()  # warm-up: Warp's JIT, the capture
                require_graph(env, f"flycuda.env ({name})")
                envs["every step (before)" if branch else f"{env.reset_branch} branch (now)"] = step
            med = interleaved_medians(envs, args.rounds, args.steps, torch.device(args.device))
            base = med["every step (before)"]
            rows += [[args.model, W, name, resets, k, f"{t * 1e3:.2f}", f"{base / t:.2f}x"] for k, t in med.items()]
    return rows
