"""flycuda.env's control step against the same task written by hand from Python, the way
FlyGym's GPUSimulation is driven (set the actuator inputs, step n times, read getters into
buffers with index ops, reward and done masks in torch, masked reset), and against bare
physics (n x mjw.step), interleaved round by round in one run (this machine is noisy).

    python bench/bench_env.py [--worlds 16 64] [--steps 20] [--rounds 3] [--device cpu] [--no-results]

Also device memory per world of the environment's buffers, for each observation set.
Both loops run the "imitate" task on the built-in hexapod with the same decimation,
observations (joint angles and velocities, thorax pose and velocity, reference, phase)
and reward; the hand-written loop's resets are MuJoCo Warp's masked reset_data plus a
masked write of the initial state.
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import append_results, format_table

import flycuda.env as fe
from flycuda.env.layout import GROUPS


class ByHand:
    """The imitate task written from Python around the same worlds (FlyGym's style)."""

    def __init__(self, env):
        self.env, sim, lay = env, env.sim, env.layout
        self.sim, W = sim, env.num_envs
        self.ids, self.qadr = lay.act_ids.long(), torch.tensor(lay.qpos_adrs, device=env.device)
        self.dadr = torch.tensor(lay.dof_adrs, device=env.device)
        self.root = lay.root_adr
        self.steps = torch.zeros(W, dtype=torch.int64, device=env.device)
        self.obs = torch.empty_like(env.obs)
        self.init_q, self.init_v = env._init[0][0], env._init[1][0]
        self.frames, self.fps = env.frames[0], env.frames_per_step

    def step(self, actions):
        sim, env = self.sim, self.env
        ctrl, qpos, qvel = sim.view("ctrl"), sim.view("qpos"), sim.view("qvel")
        ctrl[:, self.ids] = torch.clamp(actions, env.action_map[2], env.action_map[3])  # set_actuator_inputs
        for _ in range(env.decimation):
            sim.step()
        self.steps += 1
        angles = qpos.index_select(1, self.qadr)                                        # get_joint_angles
        vel = qvel.index_select(1, self.dadr)                                           # get_joint_velocities
        f = (self.steps.double() * self.fps) % self.frames.shape[0]
        i0 = f.floor().long()
        a = (f - i0).float()[:, None]
        ref = self.frames[i0] * (1 - a) + self.frames[(i0 + 1) % self.frames.shape[0]] * a
        reward = torch.exp(-((angles - ref) ** 2).mean(1) / 0.09)
        z = qpos[:, self.root + 2]
        up = 1 - 2 * (qpos[:, self.root + 4] ** 2 + qpos[:, self.root + 5] ** 2)
        done = ~torch.isfinite(qpos).all(1) | (z < 0.3 * self.init_q[self.root + 2]) | (up < 0) | \
            (self.steps >= env.max_episode_steps)
        if bool(done.any()):                                                            # reset(worlds_mask)
            with sim._wp.ScopedDevice(sim.wp_device):
                sim._mjw.reset_data(sim.model, sim.data, reset=sim._wp.from_torch(done))
            qpos[done] = self.init_q
            qvel[done] = self.init_v
            self.steps[done] = 0
        self.obs = torch.cat([angles, vel, qpos[:, self.root + 2:self.root + 7],
                              qvel[:, env.layout.root_dof:env.layout.root_dof + 6], ref,
                              (f / self.frames.shape[0]).float()[:, None]], 1)
        return self.obs, reward, done


def bare(env):
    for _ in range(env.decimation):
        env.sim.step()


def time_it(fn, steps: int, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t) / steps


def memory_per_world(W: int, device: str) -> list[list]:
    """The environment's own buffers (not MuJoCo Warp's Data), per observation set, at W
    and 4W worlds: fixed bytes (the recording, the initial states) plus bytes per world."""
    rows = []
    for name, groups in (("default (imitate)", None), ("joints only", ("joints",)),
                         ("all but vision", tuple(g for g in GROUPS if g != "vision"))):
        per = []
        for w in (W, 4 * W):
            env = fe.make("imitate", worlds=w, device=device, observe=groups)
            seen, total = set(), 0
            for t in vars(env).values():
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                    seen.add(t.untyped_storage().data_ptr())
                    total += t.untyped_storage().nbytes()
            per.append(total / w)
        slope = (per[1] * 4 * W - per[0] * W) / (3 * W)
        rows.append([name, f"{per[0] * W:,.0f}", f"{per[1] * 4 * W:,.0f}", f"{slope:,.0f}",
                     f"{per[0] * W - slope * W:,.0f}"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--steps", type=int, default=20, help="control steps per timing")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the median is reported)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-results", action="store_true")
    args = ap.parse_args()
    rows = []
    for W in args.worlds:
        env = fe.make("imitate", worlds=W, device=args.device, max_episode_steps=50, check_actions=False)
        hand = ByHand(fe.make("imitate", worlds=W, device=args.device, max_episode_steps=50))
        hand.obs = hand.env.reset(seed=0)[0].clone()
        obs, _ = env.reset(seed=0)
        ref = env.obs_slice("reference")  # the same columns in both loops' observations
        ours = lambda: env.step(obs[:, ref].clone())  # noqa: E731  (both follow the reference: same contacts)
        theirs = lambda: hand.step(hand.obs[:, ref].clone())  # noqa: E731
        for fn in (ours, theirs, lambda: bare(env)):  # warm-up: Warp's JIT, the graph
            fn()
            fn()
        times = {"flycuda.env": [], "by hand (FlyGym style)": [], "bare physics": []}
        for _ in range(args.rounds):
            times["flycuda.env"].append(time_it(ours, args.steps, env.device))
            times["by hand (FlyGym style)"].append(time_it(theirs, args.steps, env.device))
            times["bare physics"].append(time_it(lambda: bare(env), args.steps, env.device))
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        for k, t in med.items():
            rows.append([W, env.decimation, k, f"{W / t:,.0f}", f"{t * 1e3:.2f}",
                         f"{med['by hand (FlyGym style)'] / t:.2f}x", f"{100 * (t / med['bare physics'] - 1):+.1f}%"])
    table = format_table(["worlds", "n", "loop", "env steps/s", "ms/control step", "vs by hand", "vs bare physics"],
                         rows)
    W0 = args.worlds[0]
    mem = format_table(["observations", f"bytes at {W0} worlds", f"at {4 * W0}", "bytes per world", "fixed bytes"],
                       memory_per_world(args.worlds[0], args.device))
    print(table)
    print()
    print(mem)
    if not args.no_results:
        append_results("flycuda.env vs the same task by hand (FlyGym style) and bare physics (issue 28)",
                       args.device, table + "\n\nMemory of the environment's own buffers per world:\n\n" + mem,
                       f"imitate on the hexapod, {args.steps} control steps x {args.rounds} interleaved rounds, "
                       "median; n = physics steps per control step")


if __name__ == "__main__":
    main()
