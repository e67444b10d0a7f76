"""Steering by the eyes, as a flycuda.env policy for the "approach" task: the recorded gait
(the task's reference pose at each world's own step), its swing shrunk on the side the
pillar is seen, so that the fly turns toward it. Every world at once, on the device.

    flycuda env approach --policy examples/steer.py --worlds 8     # NeuroMechFly, its eyes at fast:2
    python examples/steer.py --worlds 8 --duration 0.3        # measures it against the gait alone

The pillar is dark: the eye that sees it reads less light. With ``a = (right - left) /
(right + left)`` of the two eyes' mean readouts (> 0: the pillar is on the left), the
left legs' targets become ``center + (1 - GAIN a) (ref - center)`` and the right legs'
``center + (1 + GAIN a) (ref - center)`` (``center``: each DOF's mean over the recording),
the turning rule of FlyGym's hybrid turning controller (the inner legs step shorter).
"""

from __future__ import annotations

import argparse
import math
import re

import torch

import flycuda.env as fe

GAIN = 8.0


def leg_sides(names) -> torch.Tensor:
    """+1 for a left leg's DOF, -1 for a right leg's, 0 otherwise, from FlyGym's names
    (``c_thorax-lf_coxa-yaw``) or the hexapod's (``joint_LFCoxa``)."""
    out = []
    for n in names:
        m = re.search(r"(?i)(?<![a-z])([lr])[fmh](?=[_a-z]|$)", n.split("/")[-1])
        out.append(0.0 if m is None else (1.0 if m.group(1).lower() == "l" else -1.0))
    return torch.tensor(out)


def make_policy(env, gain: float = GAIN):
    ref, vis = env.obs_slice("reference"), env.obs_slice("vision")
    frames = env.frames[0] if env.frames.dim() == 3 else env.frames[0, :, 0]  # [T, D]: the recorded frames
    center = frames.float().mean(0)
    side = leg_sides(env.layout.names).to(env.device)
    half = (vis.stop - vis.start) // 2  # left eye's columns, then the right eye's

    def policy(obs):
        eyes = obs[:, vis]
        left, right = eyes[:, :half].mean(1), eyes[:, half:].mean(1)
        a = ((right - left) / (right + left + 1e-6)).clamp(-0.1, 0.1)
        amp = (1.0 - gain * a[:, None] * side).clamp(0.2, 1.8)  # shorter swing on the pillar's side
        return center + amp * (obs[:, ref] - center)

    return policy


def measure(worlds: int, duration: float, gain: float, model: str, device, seed: int = 0) -> dict:
    """Runs one episode of ``duration`` s per world (no resets); the fraction of worlds whose
    |bearing| to the pillar shrank, and the mean change of |bearing| (rad)."""
    env = fe.make("approach", worlds=worlds, model=model, device=device, vision="fast:2", noise=0.0, seed=seed,
                  control_dt=1e-3 if model != "hexapod" else None, max_episode_steps=0, jitter=0.0)
    obs, info = env.reset(seed=seed)
    b0 = info["bearing"].abs().clone()  # the approach task's success measures (its docstring)
    policy = make_policy(env, gain)
    steps = max(1, round(duration / env.control_dt))
    for _ in range(steps):
        obs, _, term, _, info = env.step(policy(obs))
    b1 = info["bearing"].abs()
    ok = ~(term | torch.isnan(b1))
    return dict(gain=gain, worlds=worlds, steps=steps, shrank=float((b1 < b0)[ok].float().mean()),
                mean_change=float((b1 - b0)[ok].mean()), fell=int((~ok).sum()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="steering toward the pillar vs the gait alone (gain 0)")
    ap.add_argument("--worlds", type=int, default=8)
    ap.add_argument("--duration", type=float, default=0.3, help="simulated seconds per world")
    ap.add_argument("--model", default="neuromechfly")
    ap.add_argument("--device", default=None)
    ap.add_argument("--gains", type=float, nargs="+", default=[GAIN, 0.0],
                    help="steering gains to compare (0: the gait alone; negative: steering away)")
    args = ap.parse_args(argv)
    for gain in args.gains:
        r = measure(args.worlds, args.duration, gain, args.model, args.device)
        print(f"gain {r['gain']:g}: {100 * r['shrank']:.0f}% of {r['worlds']} worlds turned toward the pillar over "
              f"{r['steps']} control steps (mean |bearing| change {math.degrees(r['mean_change']):+.1f} deg, "
              f"{r['fell']} fell)", flush=True)


if __name__ == "__main__":
    main()
