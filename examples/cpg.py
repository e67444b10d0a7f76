"""A central pattern generator with feedback, as a flycuda.env policy: each world's legs
follow the model's own recording (the hexapod's tripod gait, NeuroMechFly's Spotlight clip)
at the world's own step counter (a CPG clocked on the device), corrected by proportional
feedback on the joint angles it observes.

    flycuda env walk --policy examples/cpg.py --worlds 16 --duration 0.5
    python examples/cpg.py --worlds 16 --duration 0.5 [--model neuromechfly]   # the same

(``make_policy(env)`` is what ``--policy PATH.py`` calls; it runs on any device, all
worlds at once, without leaving the device.)
"""

import argparse
import sys

import torch

import flycuda.ops
from flycuda.cli import main as flycuda_main
from flycuda.sim import tripod_gait

GAIN = 0.5  # feedback: rad of extra target per rad of tracking error


def make_policy(env):
    gait = env.motion if env.motion is not None else tripod_gait()
    names, driven = list(gait.dof_names), list(env.layout.names)
    if names != driven:  # a rhythm in another DOF order would drive the wrong joints
        raise ValueError(f"examples/cpg.py: the rhythm's DOFs ({len(names)}: {names[:3]} ...) are not the "
                         f"environment's driven DOFs ({len(driven)}: {driven[:3]} ...), in order; give the env a "
                         "recording of its own model (make(..., motion=))")
    frames = (gait.spline() if env.frames is not None and env.frames.dtype == torch.float64 else gait.as_buffer())
    frames = frames.to(env.device)                                # the rhythm, as the env's own reference
    fps = gait.fps * env.control_dt                               # frames per control step
    target = torch.empty_like(env.actions)
    joints = env.obs_slice("joints")

    def policy(obs):
        flycuda.ops.motion_at(frames, env.world_steps, target, frames_per_step=fps, mode="loop")
        error = target - obs[:, joints]                           # feedback on the observed angles
        return target + GAIN * error

    return policy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Runs this CPG as the policy of `flycuda env TASK` (the same as "
                                             "`flycuda env TASK --policy examples/cpg.py ...`).")
    ap.add_argument("--task", default="walk", help="the environment's task (default walk)")
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--duration", type=float, default=0.5, help="simulated seconds")
    ap.add_argument("--model", default="hexapod", help="hexapod or neuromechfly")
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    cmd = ["env", args.task, "--policy", __file__, "--worlds", str(args.worlds), "--duration", str(args.duration),
           "--model", args.model] + (["--device", args.device] if args.device else [])
    return flycuda_main(cmd)


if __name__ == "__main__":
    sys.exit(main())
