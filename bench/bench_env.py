"""flycuda.env's control step against the same task written the FlyGym way (NeuroMechFly:
FlyGym's own GPUSimulation API: set_actuator_inputs, step() n times, getters with dst=,
reward and done masks in torch, masked reset with set_state; the hexapod, which FlyGym
cannot load: the same loop by hand with torch index ops), and its overhead over its own
physics (n x mjw.step), interleaved round by round in one run (this machine is noisy). "over its physics":
a loop's time beyond flycuda.env's physics (its step less its glue alone, the same step
with no physics step); the glue's own row is that overhead.

    python bench/bench_env.py [--worlds 16 64] [--steps 20] [--rounds 3] [--device cpu] [--model hexapod]
                              [--vision-only] [--reset-branch]

--reset-branch (NeuroMechFly): the control step with the eyes and with descending drives, the
reset path in every step (before) against only when a world ended (now), resets rare and
frequent (bench/_reset_branch.py).

With NeuroMechFly also the eyes' control step (fast:2) on the CUDA path's reset branch: its
second render of every world (before issue 36) vs of the reset worlds only (now).

Also device memory per world of the environment's buffers, for each observation set.
Both loops run the "imitate" task on the built-in hexapod with the same decimation,
observations (joint angles and velocities, thorax pose and velocity, reference, phase)
and reward; the hand-written loop's resets are MuJoCo Warp's masked reset_data plus a
masked write of the initial state.
"""

from __future__ import annotations

import argparse

import torch
from _reset_branch import HEADER as RESET_HEADER
from _reset_branch import reset_branch_rows
from _results import append_results, format_table
from _timing import interleaved_medians

import flycuda.env as fe
from flycuda.env.layout import DESCENDING_GROUPS, GROUPS


def require_graph(env, what: str = "flycuda.env") -> None:
    """On CUDA a row named for flycuda.env times its captured step: an eager fallback (a capture
    that failed, warned of above) is refused in one line instead of reported under that name."""
    if env.device.type == "cuda" and not env.captured:
        raise SystemExit(f"bench_env: {what}'s control step is not a CUDA graph (its capture failed: see the "
                         "warning above); refusing to report the eager fallback as the captured env")


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
        self.init_q, self.init_v, self.init_f = env._init[0][0], env._init[1][0], env._init[2][0]
        self.frames, self.fps, self.offsets = env.frames[0], env.frames_per_step, env.offsets.clone()

    def step(self, actions):
        sim, env = self.sim, self.env
        ctrl, qpos, qvel = sim.view("ctrl"), sim.view("qpos"), sim.view("qvel")
        ctrl[:, self.ids] = torch.clamp(actions, env.action_map[2], env.action_map[3])  # set_actuator_inputs
        for _ in range(env.decimation):
            sim.step()
        self.steps += 1
        angles = qpos.index_select(1, self.qadr)                                        # get_joint_angles
        vel = qvel.index_select(1, self.dadr)                                           # get_joint_velocities
        f = (self.offsets + self.steps.double() * self.fps) % self.frames.shape[0]
        i0 = f.floor().long()
        a = (f - i0).float()[:, None]
        ref = self.frames[i0] * (1 - a) + self.frames[(i0 + 1) % self.frames.shape[0]] * a
        reward = torch.exp(-((angles - ref) ** 2).mean(1) / 0.09)
        z = qpos[:, self.root + 2]
        up = 1 - 2 * (qpos[:, self.root + 4] ** 2 + qpos[:, self.root + 5] ** 2)
        done = ~torch.isfinite(qpos).all(1) | (z < 0.3 * self.init_q[self.root + 2]) | (up < 0) | \
            (self.steps >= env.max_episode_steps)
        if bool(done.any()):                                                            # reset(worlds_mask)
            sim.reset(done)
            qpos[done] = self.init_q
            qvel[done] = self.init_v
            self.steps[done] = 0
            self.offsets[done] = self.init_f
        self.obs = torch.cat([angles, vel, qpos[:, self.root + 2:self.root + 7],
                              qvel[:, env.layout.root_dof:env.layout.root_dof + 6], ref,
                              (f / self.frames.shape[0]).float()[:, None]], 1)
        return self.obs, reward, done


class ByFlyGym:
    """The imitate task written with FlyGym's own GPUSimulation API, as its GPU tutorial and
    docs drive it: set_actuator_inputs, step() n times, the getters into preallocated Warp
    arrays (dst=), reward and done in torch on zero-copy views, resets with MuJoCo Warp's
    masked reset_data and set_state(qpos, qvel, worlds_mask) (reference-state init)."""

    def __init__(self, env, setup):
        import warp as wp
        from flygym.compose import ActuatorType

        self.env, self.gs, self.fly, self.wp = env, setup.gpu_sim, setup.fly.name, wp
        self.kind = ActuatorType.POSITION
        W, dev = env.num_envs, env.device
        dofs = list(setup.fly.get_jointdofs_order())  # every joint DOF (66): the getters' columns
        self.driven = torch.tensor([dofs.index(d) for d in setup.fly.get_actuated_jointdofs_order(self.kind)],
                                   device=dev)  # the 42 actuated ones among them
        self.angles = wp.zeros((W, len(dofs)), dtype=wp.float32, device=env.sim.wp_device)
        self.vel = wp.zeros((W, len(dofs)), dtype=wp.float32, device=env.sim.wp_device)
        self.lin = wp.zeros((W, 3), dtype=wp.float32, device=env.sim.wp_device)
        self.ang = wp.zeros((W, 3), dtype=wp.float32, device=env.sim.wp_device)
        self.t_angles = wp.to_torch(self.angles)
        self.steps = torch.zeros(W, dtype=torch.int64, device=dev)
        self.init_q = env._init[0][:1].expand(W, -1).contiguous()
        self.init_v = env._init[1][:1].expand(W, -1).contiguous()
        self.mask = torch.zeros(W, dtype=torch.bool, device=dev)
        self.mask_wp = wp.from_torch(self.mask, dtype=wp.bool)
        self.ref = torch.empty(W, 42, device=dev)
        self.obs = torch.empty_like(env.obs)

    def step(self, actions):
        env, gs, wp = self.env, self.gs, self.wp
        gs.set_actuator_inputs(self.fly, self.kind, wp.from_torch(actions.contiguous()))
        for _ in range(env.decimation):
            gs.step()
        self.steps += 1
        gs.get_joint_angles(self.fly, dst=self.angles)
        gs.get_joint_velocities(self.fly, dst=self.vel)
        gs.get_base_linear_velocity(self.fly, dst=self.lin)
        gs.get_base_angular_velocity(self.fly, dst=self.ang)
        from flycuda.ops import motion_at
        motion_at(env.frames, self.steps, self.ref, offsets=env.offsets, frames_per_step=env.frames_per_step,
                  mode=env.frame_mode)
        angles = self.t_angles[:, self.driven]
        reward = torch.exp(-((angles - self.ref) ** 2).mean(1) / 0.09)
        qpos = env.sim.view("qpos")
        z = qpos[:, env.layout.root_adr + 2]
        done = ~torch.isfinite(qpos).all(1) | (z < 0.3 * self.init_q[0, env.layout.root_adr + 2]) | \
            (self.steps >= env.max_episode_steps)
        if bool(done.any()):
            self.mask.copy_(done)
            env.sim.reset(self.mask_wp)
            gs.set_state(wp.from_torch(self.init_q), wp.from_torch(self.init_v), worlds_mask=self.mask_wp)
            self.steps[done] = 0
        self.obs = torch.cat([angles, wp.to_torch(self.vel)[:, self.driven], qpos[:, env.layout.root_adr + 2:
                              env.layout.root_adr + 7], wp.to_torch(self.lin), wp.to_torch(self.ang), self.ref,
                              self.ref[:, :1]], 1)
        return self.obs, reward, done


class GlueOnly:
    """flycuda.env's control step without its physics (decimation 0): everything else it
    does per step (actions, counters, terminations, observations, reward, resets). On CUDA
    with its own captured graph: the env's graph holds its physics steps, and launching it
    with decimation 0 would time them too (an H200 run did, and read the glue as the whole
    step)."""

    def __init__(self, env):
        self.env, self.graph = env, None

    def __call__(self, actions) -> None:
        env = self.env
        n, graph = env.decimation, env._graph
        env.decimation, env._graph = 0, self.graph
        try:
            env.step(actions)  # the first call runs eagerly and captures the glue's graph
            self.graph = env._graph
        finally:
            env.decimation, env._graph = n, graph


def _bytes(*objs) -> int:
    """Bytes of the distinct tensor storages among the attributes of ``objs``."""
    seen, total = set(), 0
    for o in objs:
        for t in vars(o).values() if o is not None else ():
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                total += t.untyped_storage().nbytes()
    return total


def memory_per_world(W: int, device: str, model: str = "hexapod") -> list[list]:
    """The environment's own buffers (not MuJoCo Warp's Data; with eyes, the eyes' renderer
    and maps too), per observation set and vision mode, at W and 4W worlds: fixed bytes (the
    recording, the initial states, the retina's maps) plus bytes per world."""
    if model == "hexapod":
        cases = [("default (imitate)", None, None), ("joints only", ("joints",), None),
                 ("all but vision, connectome, contacts, drives and odor",
                  tuple(g for g in GROUPS if g not in ("vision", "connectome", "contacts", "odor", *DESCENDING_GROUPS)),
                  None)]
    else:
        cases = [("default (imitate)", None, None), ("+ vision fast:4", None, "fast:4"), ("+ vision exact", None, "exact")]
    rows = []
    for name, groups, vision in cases:
        total = []
        for w in (W, 4 * W):
            env = fe.make("imitate", worlds=w, model=model, device=device, observe=groups, vision=vision)
            v = env.vision
            total.append(_bytes(env, v, v.renderer if v else None, v.map if v else None))
        slope = (total[1] - total[0]) / (3 * W)
        rows.append([model, name, f"{total[0]:,.0f}", f"{total[1]:,.0f}", f"{slope:,.0f}", f"{total[0] - slope * W:,.0f}"])
    return rows


def vision_reset_rows(W: int, args) -> list[list]:
    """A control step with the eyes (fast:2) on the CUDA path (the reset path every step, as a
    graph runs it) on ``args.device``: the second observation redrawing every world's eyes
    (before issue 36) against redrawing only the worlds that were reset (now), interleaved.
    Episodes run on (no world ends), as in most steps of a long episode."""
    env = fe.make("imitate", worlds=W, model=args.model, device=args.device, vision="fast:2",
                  max_episode_steps=10**6, check_actions=False)
    env.reset_branch = "always"
    obs, _ = env.reset(seed=0)
    ref = env.obs_slice("reference")
    masked = env.vision.update
    full = lambda only=None: masked(None)  # noqa: E731  (every world's eyes, whatever was reset)

    def step(update):
        env.vision.update = update
        env.step(obs[:, ref].clone())

    none = torch.zeros(W, dtype=torch.bool, device=env.device)  # no world was reset
    for upd in (full, masked):
        step(upd)
    require_graph(env, "flycuda.env with the eyes")
    cases = {"control step, every world (before)": lambda: step(full),
             "control step, reset worlds only (now)": lambda: step(masked),
             "the second render alone, every world (before)": lambda: masked(None),
             "the second render alone, reset worlds only (now)": lambda: masked(none)}
    med = interleaved_medians(cases, args.rounds, args.steps, env.device)
    rows = []
    for k, t in med.items():
        base = med[k.replace("reset worlds only (now)", "every world (before)")]
        rows.append([args.model, W, env.decimation, k, f"{t * 1e3:.2f}", f"{base / t:.2f}x"])
    return rows


def _pair(W: int, args):
    """(flycuda.env, the baseline loop and its name) on two separate sets of worlds."""
    env = fe.make("imitate", worlds=W, model=args.model, device=args.device, max_episode_steps=50,
                  check_actions=False)
    other = fe.make("imitate", worlds=W, model=args.model, device=args.device, max_episode_steps=50)
    if args.model == "hexapod":
        return env, ByHand(other), "by hand (FlyGym style)"
    from flycuda import flygym as fg
    setup = fg.Setup(args.model, W, device=args.device)
    other = fe.make("imitate", sim=setup.sim, act_ids=setup.act_ids, motion=fg.spotlight(setup.fly),
                    model=args.model, max_episode_steps=50)
    return env, ByFlyGym(other, setup), "FlyGym's GPUSimulation API"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--steps", type=int, default=20, help="control steps per timing")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the median is reported)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default="hexapod", help="hexapod, or neuromechfly (then the baseline is FlyGym's "
                                                     "own GPUSimulation API)")
    ap.add_argument("--no-results", action="store_true")
    ap.add_argument("--vision-only", action="store_true", help="only the eyes' step table (NeuroMechFly)")
    ap.add_argument("--reset-branch", action="store_true", help="only the reset path's table: every step vs when "
                                                                "a world ended (NeuroMechFly)")
    args = ap.parse_args()
    if args.reset_branch:
        table = format_table(RESET_HEADER, [r for W in args.worlds
                                             for r in reset_branch_rows(W, args, require_graph)])
        print(table)
        if not args.no_results:
            append_results("flycuda.env: the reset path in every step vs only when a world ended (issue 53)",
                           args.device, table, f"{args.model}, {args.steps} control steps x {args.rounds} "
                           "interleaved rounds, median; frequent: every world's episode ends every 4 steps")
        return
    vision = None
    if args.model != "hexapod":  # the hexapod has no eyes
        vision = format_table(["model", "worlds", "n", "the reset path's second render of the eyes", "ms",
                               "vs before"],
                              [r for W in args.worlds for r in vision_reset_rows(W, args)])
        print(vision)
        print()
        if args.vision_only:
            if not args.no_results:
                append_results("flycuda.env with the eyes: the reset path's second render, every world vs the "
                               "reset worlds only (issue 36)", args.device, vision,
                               f"imitate on {args.model}, vision fast:2, the reset path in every step (as on "
                               f"CUDA), {args.steps} control steps x {args.rounds} interleaved rounds, median")
            return
    rows = []
    for W in args.worlds:
        env, hand, base = _pair(W, args)
        hand.obs = hand.env.reset(seed=0)[0].clone()
        if isinstance(hand, ByHand):
            hand.offsets.copy_(hand.env.offsets)  # the same start phases as flycuda.env's worlds
        obs, _ = env.reset(seed=0)
        ref = env.obs_slice("reference")  # the same columns in both loops' observations
        ours = lambda: env.step(obs[:, ref].clone())  # noqa: E731  (both follow the reference: same contacts)
        theirs = lambda: hand.step(hand.obs[:, ref].clone())  # noqa: E731
        glue_only = GlueOnly(env)
        glue = lambda: glue_only(obs[:, ref].clone())  # noqa: E731
        for fn in (ours, theirs, glue):  # warm-up: Warp's JIT, and each graph's capture
            fn()
            fn()
        require_graph(env)
        med = interleaved_medians({"flycuda.env": ours, base: theirs, "flycuda.env's glue alone": glue}, args.rounds,
                                  args.steps, env.device)
        physics = med["flycuda.env"] - med["flycuda.env's glue alone"]
        for k, t in med.items():
            rows.append([args.model, W, env.decimation, k, f"{W / t:,.0f}", f"{t * 1e3:.2f}",
                         f"{med[base] / t:.2f}x" if "glue" not in k else "",
                         f"{100 * med[k] / physics - (100 if 'glue' not in k else 0):+.1f}%"])
    table = format_table(["model", "worlds", "n", "loop", "env steps/s", "ms/control step", "vs baseline",
                          "over its physics"],
                         rows)
    W0 = args.worlds[0]
    mem = format_table(["model", "observations", f"bytes at {W0} worlds", f"at {4 * W0}", "bytes per world",
                        "fixed bytes"], memory_per_world(W0, args.device, args.model))
    print(table)
    print()
    print(mem)
    if not args.no_results:
        append_results("flycuda.env vs the same task written the FlyGym way, and its glue alone (issue 28)",
                       args.device, table + "\n\nMemory of the environment's own buffers:\n\n" + mem
                       + ("\n\nThe eyes' step, the reset path's second render:\n\n" + vision if vision else ""),
                       f"imitate on {args.model}, {args.steps} control steps x {args.rounds} interleaved rounds, "
                       "median; n = physics steps per control step")


if __name__ == "__main__":
    main()
