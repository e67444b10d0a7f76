"""PPO in plain torch on flycuda.env: every world a rollout worker, everything on the device.

    python examples/ppo.py --task imitate --worlds 4096 --iterations 200 --device cuda   # a GPU
    python examples/ppo.py --task walk --worlds 8 --iterations 1 --horizon 8             # a CPU smoke test
    python examples/ppo.py --task walk --model neuromechfly --action descending          # two drives a fly
    torchrun --nproc_per_node 8 examples/ppo.py --worlds 4096 --device cuda              # 8 GPUs
    python examples/ppo.py --checkpoint run.pt --resume                                  # survives a kill

Under torchrun each rank steps its own worlds on its own device (``cuda:LOCAL_RANK``, or the
CPU) from its own seed, and the ranks train one policy, as DistributedDataParallel does: the
parameters start equal (broadcast from rank 0) and every minibatch's gradients are averaged
over the ranks (all-reduce: NCCL on GPUs, gloo on the CPU) before the optimizer's step. Rank 0
prints the mean over all ranks' worlds.

A Gaussian policy (its mean an MLP of the observations, offset by the task's reference pose
when it has one: the policy learns a correction) and an MLP value function, trained with
the clipped surrogate, GAE(lambda) and per-minibatch advantage normalization; a truncated
episode is bootstrapped from its last observation's value (the env's ``final_obs``). Prints
one line per iteration: mean reward per step, episodes ended, env steps/s.

``--checkpoint PATH`` writes, after every iteration, everything the next one depends on (the
policy, the optimizer, torch's generators, and the environment's ``state_dict()``: its
physics, counters, episode draws, controllers and networks), atomically; ``--resume`` goes on
from it, bit for bit as a run never stopped (tests/env/test_ppo.py). Under torchrun each rank
keeps its own (``PATH.rank<N>``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
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
        joints = env.action_kind == "joints"  # descending: two drives, their mean offset to walking ahead
        self.ref = env.obs_slice("reference") if joints and env.observes("reference") else None
        self.base = 0.0 if joints else 0.8
        with torch.no_grad():
            self.pi[-1].weight.mul_(0.01)
            self.pi[-1].bias.zero_()

    def dist(self, obs):
        mean = self.pi(obs) + self.base
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


def update(agent, opt, b, adv, ret, epochs=4, minibatches=4, clip=0.2, reduce=None):
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
            if reduce is not None:
                reduce(agent)
            nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
            opt.step()


def join_ranks(device):
    """Under torchrun: (rank, ranks, this rank's device) with the process group joined (NCCL for
    CUDA, gloo for the CPU); else (0, 1, device)."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1, device
    rank, ranks, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    cuda = device == "cuda" or (device is None and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    else:
        device = "cpu"
    dist.init_process_group("nccl" if cuda else "gloo")
    return rank, ranks, device


def same_start(agent) -> None:
    """Every rank's parameters set to rank 0's."""
    for p in agent.parameters():
        dist.broadcast(p.data, src=0)


def average_grads(agent) -> None:
    """Every parameter's gradient averaged over the ranks (DistributedDataParallel's all-reduce)."""
    n = dist.get_world_size()
    for p in agent.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(n)


def save_checkpoint(path, env, agent, opt, curve, obs) -> None:
    """Everything the next iteration depends on, written under a temporary name, then renamed."""
    rng = {"cpu": torch.get_rng_state()}
    if env.device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(env.device)
    state = {"curve": curve, "obs": obs.detach().cpu(), "agent": agent.state_dict(), "opt": opt.state_dict(),
             "env": env.state_dict(), "rng": rng}
    torch.save(state, path + ".part")
    os.replace(path + ".part", path)


def load_checkpoint(path, env, agent, opt):
    """The run as :func:`save_checkpoint` left it: (the curve so far, the observations)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    agent.load_state_dict(state["agent"])
    opt.load_state_dict(state["opt"])
    env.load_state_dict(state["env"])
    torch.set_rng_state(state["rng"]["cpu"])
    if "cuda" in state["rng"]:
        torch.cuda.set_rng_state(state["rng"]["cuda"], env.device)
    return list(state["curve"]), state["obs"].to(env.device)


def main(argv=None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="imitate")
    ap.add_argument("--model", default="hexapod")
    ap.add_argument("--action", default="joints", help="joints or descending (two drives a world: neuromechfly)")
    ap.add_argument("--worlds", type=int, default=64, help="worlds (per rank under torchrun)")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--horizon", type=int, default=32, help="control steps per rollout")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", default=None, metavar="PATH", help="write a checkpoint after every iteration")
    ap.add_argument("--resume", action="store_true", help="go on from --checkpoint, if it is there")
    args = ap.parse_args(argv)
    rank, ranks, device = join_ranks(args.device)
    seed = args.seed + 1000 * rank  # each rank its own worlds
    torch.manual_seed(seed)
    env = flycuda.env.make(args.task, worlds=args.worlds, model=args.model, device=device, seed=seed,
                           check_actions=False, action=args.action)
    agent = Agent(env).to(env.device)
    if ranks > 1:
        same_start(agent)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs, _ = env.reset(seed=seed)
    curve = []
    path = f"{args.checkpoint}.rank{rank}" if args.checkpoint and ranks > 1 else args.checkpoint
    if args.resume and path and os.path.exists(path):
        curve, obs = load_checkpoint(path, env, agent, opt)
        if rank == 0:
            print(f"resumed from {path} after iteration {len(curve) - 1}", flush=True)
    for it in range(len(curve), args.iterations):
        t0 = time.perf_counter()
        b, obs, last = rollout(env, agent, obs, args.horizon)
        adv, ret = gae(b, last)
        update(agent, opt, b, adv, ret, reduce=average_grads if ranks > 1 else None)
        stats = torch.stack([b["score"].mean(), b["done"].sum()]).double()
        if ranks > 1:
            dist.all_reduce(stats)
            stats[0] /= ranks
        curve.append(float(stats[0]))
        if rank == 0:
            print(f"iteration {it}: mean reward {curve[-1]:.4f}, episodes ended {int(stats[1])}, "
                  f"{ranks * args.worlds * args.horizon / (time.perf_counter() - t0):,.0f} env steps/s", flush=True)
        if path:
            save_checkpoint(path, env, agent, opt, curve, obs)
    if ranks > 1:  # the ranks trained one policy: the same parameters everywhere
        total = float(sum(p.detach().double().sum() for p in agent.parameters()))
        # one write of a whole line (atomic on a pipe): the ranks share torchrun's stdout
        sys.stdout.write(f"rank {rank}: parameter sum {total:.12e}\n")
        sys.stdout.flush()
        dist.barrier()  # no rank tears gloo down while another still talks to it (an abort at exit)
        dist.destroy_process_group()
    return curve


if __name__ == "__main__":
    main()
