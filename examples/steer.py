"""Steering by the eyes, as a flycuda.env policy for the "approach" task, every world at once
on the device. Two ways to walk:

* ``action="descending"`` (NeuroMechFly v2's visual taxis): two descending drives into FlyGym's
  hybrid turning controller, the drive lowered on the side the pillar is seen, so that the fly
  turns toward it;
* joint targets: the recorded gait (the task's reference pose at each world's own step), its
  swing shrunk on the side the pillar is seen.

    flycuda env approach --action descending --policy examples/steer.py --worlds 8
    flycuda env approach --policy examples/steer.py --worlds 8     # NeuroMechFly, its eyes at fast:2
    python examples/steer.py --action descending --worlds 8 --duration 0.3   # against walking straight

The pillar is dark: the eye that sees it reads less light. With ``a = (right - left) /
(right + left)`` of the two eyes' mean readouts (> 0: the pillar is on the left), the
drives are ``(DRIVE - DRIVE_GAIN a, DRIVE + DRIVE_GAIN a)``; with joint targets the left legs'
become ``center + (1 - GAIN a) (ref - center)`` and the right legs' ``center + (1 + GAIN a)
(ref - center)`` (``center``: each DOF's mean over the recording), the turning rule of FlyGym's
hybrid turning controller (the inner legs step shorter).
"""

from __future__ import annotations

import argparse
import math
import re

import torch

import flycuda.env as fe

GAIN = 8.0
DRIVE, DRIVE_GAIN = 0.8, 20.0  # descending: both drives' base, and their change per unit of a


def leg_sides(names) -> torch.Tensor:
    """+1 for a left leg's DOF, -1 for a right leg's, 0 otherwise, from FlyGym's names
    (``c_thorax-lf_coxa-yaw``) or the hexapod's (``joint_LFCoxa``)."""
    out = []
    for n in names:
        m = re.search(r"(?i)(?<![a-z])([lr])[fmh](?=[_a-z]|$)", n.split("/")[-1])
        out.append(0.0 if m is None else (1.0 if m.group(1).lower() == "l" else -1.0))
    return torch.tensor(out)


def eyes_asymmetry(obs, vis: slice) -> torch.Tensor:
    """``a`` [W] in [-0.1, 0.1]: > 0 when the left eye reads less light (the pillar on the left)."""
    half = (vis.stop - vis.start) // 2  # left eye's columns, then the right eye's
    eyes = obs[:, vis]
    left, right = eyes[:, :half].mean(1), eyes[:, half:].mean(1)
    return ((right - left) / (right + left + 1e-6)).clamp(-0.1, 0.1)


def make_policy(env, gain: float | None = None):
    vis = env.obs_slice("vision")
    if env.descending is not None:  # two drives: the one on the pillar's side lowered
        g = DRIVE_GAIN if gain is None else gain
        side = torch.tensor([-1.0, 1.0], device=env.device)

        def drives(obs):
            return (DRIVE + g * eyes_asymmetry(obs, vis)[:, None] * side).clamp(-1.0, 1.0)

        return drives
    gain = GAIN if gain is None else gain
    ref = env.obs_slice("reference")
    frames = env.frames[0] if env.frames.dim() == 3 else env.frames[0, :, 0]  # [T, D]: the recorded frames
    center = frames.float().mean(0)
    side = leg_sides(env.layout.names).to(env.device)

    def policy(obs):
        amp = (1.0 - gain * eyes_asymmetry(obs, vis)[:, None] * side).clamp(0.2, 1.8)  # shorter on the pillar's side
        return center + amp * (obs[:, ref] - center)

    return policy


def measure(worlds: int, duration: float, gain: float, model: str, device, seed: int = 0,
            action: str = "joints") -> dict:
    """Runs one episode of ``duration`` s per world (no resets); the fraction of worlds whose
    |bearing| to the pillar shrank, and the mean change of |bearing| (rad)."""
    env = fe.make("approach", worlds=worlds, model=model, device=device, vision="fast:2", noise=0.0, seed=seed,
                  control_dt=1e-3 if model != "hexapod" else None, max_episode_steps=0, jitter=0.0, action=action)
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
    ap.add_argument("--action", choices=list(fe.ACTIONS), default="joints",
                    help="joints (the recorded gait, reshaped) or descending (two drives into FlyGym's controller)")
    ap.add_argument("--gains", type=float, nargs="+", default=None,
                    help="steering gains to compare (0: straight on; negative: steering away; default: "
                         f"{GAIN:g} and 0 for joints, {DRIVE_GAIN:g} and 0 for descending)")
    args = ap.parse_args(argv)
    gains = args.gains or ([DRIVE_GAIN, 0.0] if args.action == "descending" else [GAIN, 0.0])
    for gain in gains:
        r = measure(args.worlds, args.duration, gain, args.model, args.device, action=args.action)
        print(f"gain {r['gain']:g}: {100 * r['shrank']:.0f}% of {r['worlds']} worlds turned toward the pillar over "
              f"{r['steps']} control steps (mean |bearing| change {math.degrees(r['mean_change']):+.1f} deg, "
              f"{r['fell']} fell)", flush=True)


if __name__ == "__main__":
    main()
