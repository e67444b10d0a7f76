"""A central pattern generator with feedback, as a flycuda.env policy: each world's legs
follow the built-in tripod gait at the world's own step counter (a CPG clocked on the
device), corrected by proportional feedback on the joint angles it observes.

    flycuda env walk --policy examples/cpg.py --worlds 16 --duration 0.5

(``make_policy(env)`` is what ``--policy PATH.py`` calls; it runs on any device, all
worlds at once, without leaving the device.)
"""

import torch

import flycuda.ops
from flycuda.sim import tripod_gait

GAIN = 0.5  # feedback: rad of extra target per rad of tracking error


def make_policy(env):
    gait = tripod_gait()
    frames = gait.as_buffer().to(env.device)                      # [1, T, 42]: the rhythm
    fps = gait.fps * env.control_dt                               # frames per control step
    target = torch.empty_like(env.actions)
    joints = env.obs_slice("joints")

    def policy(obs):
        flycuda.ops.motion_at(frames, env.world_steps, target, frames_per_step=fps, mode="loop")
        error = target - obs[:, joints]                           # feedback on the observed angles
        return target + GAIN * error

    return policy
