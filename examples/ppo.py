"""PPO in plain torch on flycuda.env: every world a rollout worker, everything on the device.

    python examples/ppo.py --task imitate --worlds 4096 --iterations 200 --device cuda   # a GPU
    python examples/ppo.py --task walk --worlds 8 --iterations 1 --horizon 8             # a CPU smoke test

A Gaussian policy (its mean an MLP of the observations, offset by the task's reference pose
when it has one: the policy learns a correction) and an MLP value function, trained with
the clipped surrogate, GAE(lambda) and per-minibatch advantage normalization; a truncated
episode is bootstrapped from its last observation's value (the env's ``final_obs``). Prints
one line per iteration: mean reward per step, episodes ended, env steps/s.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import flycuda.env

GAMMA = 0.99


def mlp(n_in: int, n_out: int, hidden: int = 128) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, n_out))


class Agent(nn.Module):
    def __init__(self, env):
        super().__init__()
        O, A = len(env.obs_names), env.actions.shape[1]
        self.pi, self.v = mlp(O, A), mlp(O, 1)
        self.log_std = nn.Parameter(torch.full((A,), -1.5))
        self.ref = env.obs_slice("reference") if env.observes("reference") else None
        with torch.no_grad():
            self.pi[-1].weight.mul_(0.01)
            self.pi[-1].bias.zero_()

    def dist(self, obs):
        mean = self.pi(obs)
        if self.ref is not None:
            mean = mean + obs[:, self.ref]
        return torch.distributions.Normal(mean, self.log_std.exp(), validate_args=False)  # no host syncs


def rollout(env, agent, obs, horizon):
    """``horizon`` control steps of every world: observations, actions, log-probs, rewards,
    dones, values (all [horizon, W, ...] on the device)."""
    buf = {k: [] for k in ("obs", "act", "logp", "rew", "done", "val", "score")}
    for _ in range(horizon):
        with torch.no_grad():
            d = agent.dist(obs)
            act = d.sample()
            buf["logp"].append(d.log_prob(act).sum(-1))
            buf["val"].append(agent.v(obs).squeeze(-1))
        buf["obs"].append(obs.clone())
        buf["act"].append(act)
        obs, rew, term, trunc, info = env.step(act)
        buf["score"].append(rew.clone())  # the task's reward, for the report
        rew = rew.clone()
        with torch.no_grad():  # a truncated episode did not end: bootstrap from its last observation's value
            rew += GAMMA * trunc.float() * agent.v(info["final_obs"]).squeeze(-1)
        buf["rew"].append(rew)
        buf["done"].append((term | trunc).float())
    with torch.no_grad():
        last = agent.v(obs).squeeze(-1)
    return {k: torch.stack(v) for k, v in buf.items()}, obs, last


def gae(b, last, gamma=GAMMA, lam=0.95):
    adv = torch.zeros_like(b["rew"])
    nxt, run = last, torch.zeros_like(last)
    for t in reversed(range(b["rew"].shape[0])):
        live = 1.0 - b["done"][t]
        delta = b["rew"][t] + gamma * nxt * live - b["val"][t]
        run = delta + gamma * lam * live * run
        adv[t], nxt = run, b["val"][t]
    return adv, adv + b["val"]


def update(agent, opt, b, adv, ret, epochs=4, minibatches=4, clip=0.2):
    n = adv.numel()
    flat = {k: v.reshape(n, *v.shape[2:]) for k, v in b.items() if k != "score"}
    adv, ret = adv.reshape(n), ret.reshape(n)
    for _ in range(epochs):
        for idx in torch.randperm(n, device=adv.device).chunk(minibatches):
            d = agent.dist(flat["obs"][idx])
            ratio = (d.log_prob(flat["act"][idx]).sum(-1) - flat["logp"][idx]).exp()
            a = adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8) if a.numel() > 1 else a
            loss_pi = -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).mean()
            loss_v = 0.5 * (agent.v(flat["obs"][idx]).squeeze(-1) - ret[idx]).pow(2).mean()
            opt.zero_grad()
            (loss_pi + loss_v - 0.001 * d.entropy().sum(-1).mean()).backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
            opt.step()


def main(argv=None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="imitate")
    ap.add_argument("--worlds", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--horizon", type=int, default=32, help="control steps per rollout")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    env = flycuda.env.make(args.task, worlds=args.worlds, device=args.device, seed=args.seed, check_actions=False)
    agent = Agent(env).to(env.device)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs, _ = env.reset(seed=args.seed)
    curve = []
    for it in range(args.iterations):
        t0 = time.perf_counter()
        b, obs, last = rollout(env, agent, obs, args.horizon)
        adv, ret = gae(b, last)
        update(agent, opt, b, adv, ret)
        mean = float(b["score"].mean())
        curve.append(mean)
        print(f"iteration {it}: mean reward {mean:.4f}, episodes ended {int(b['done'].sum())}, "
              f"{args.worlds * args.horizon / (time.perf_counter() - t0):,.0f} env steps/s", flush=True)
    return curve


if __name__ == "__main__":
    main()
