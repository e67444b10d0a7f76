"""Following a moving dark target by the eyes' motion pathway (issue 40): a flycuda.env policy for
the "follow" task, every world at once on the device, turning toward the eye where flyvis's T4/T5
cells (the connectome-constrained network behind both eyes) depart most from their usual response.

    python examples/follow.py --worlds 8 --duration 1        # T4/T5 vs the raw ommatidia vs straight on
    flycuda env follow --action descending --control-dt 0.002 --connectome all --policy examples/follow.py

The controller is FlyGym 1.x's ``follow_fly_closed_loop.py``, without the object's centre:

1. A baseline: the fly walks straight with the target out of sight (1,000 body lengths away) for
   ``CALIBRATION`` s; each observed value's mean and standard deviation over worlds and steps
   (1.x: ``record_baseline_response.py``).
2. Each step, each column's ``|z|`` (the value's distance from its baseline mean in standard
   deviations), averaged over the cell types, marks the column as seeing the object when above
   ``THRESHOLD`` (1.x: 5).
3. The bias is ``b = (n_right - n_left) / (n_right + n_left)`` of the two eyes' marked columns
   (0 when none is marked; < 0: the object on the left). As in 1.x the drive on the side to turn to
   is lowered to ``max(0.4, 1 - 0.6 |g b|)`` and the other stays at 1 (1.x raised it to
   ``min(1.2, 1 + 0.2 |g b|)``; flycuda's drives end at 1).

The signal is ``connectome`` (the chosen cells' voltages over all columns: ``connectome={"columns":
"all"}``, default T4a-d and T5a-d) or ``ommatidia`` (the photoreceptor inputs the network reads:
the brighter of each ommatidium's two channels): the same controller on either.
"""

from __future__ import annotations

import argparse

import torch

import flycuda.env as fe

GAIN, THRESHOLD, CALIBRATION = 2.0, 5.0, 0.1
SIGNALS = ("connectome", "ommatidia", "none")


def signal_of(env, obs: torch.Tensor, source: str) -> torch.Tensor:
    """[W, 2, T, C]: each eye's values (T types of C columns) of ``source`` in ``obs``."""
    W = obs.shape[0]
    if source == "connectome":
        return obs[:, env.obs_slice("connectome")].view(W, 2, len(env.connectome.spec.cell_types), -1)
    return obs[:, env.obs_slice("vision")].view(W, 2, 1, -1, 2).amax(4)  # the photoreceptors' input


def turning_drives(b: torch.Tensor, gain: float) -> torch.Tensor:
    """[W, 2] drives (left, right) from the bias ``b`` [W] (< 0: turn left): 1.x's rule."""
    inner = (1.0 - 0.6 * (gain * b).abs()).clamp(min=0.4)
    ones = torch.ones_like(inner)
    left_turn = b < 0  # lower the left drive to turn left
    return torch.stack([torch.where(left_turn, inner, ones), torch.where(left_turn, ones, inner)], 1)


def object_bias(z: torch.Tensor, threshold: float) -> torch.Tensor:
    """``b`` [W] from ``|z|`` [W, 2, T, C]: the eyes' columns whose mean ``|z|`` over the types
    exceeds ``threshold``, right less left over their sum (0 where none does)."""
    n = (z.mean(2) > threshold).float().sum(2)  # [W, 2]: marked columns per eye
    return (n[:, 1] - n[:, 0]) / n.sum(1).clamp(min=1.0)


def calibrate(env, source: str, seconds: float = CALIBRATION, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) [2, T, C] of ``source`` while flies like ``env``'s walk straight with the target
    out of sight (a second environment, its target 1,000 body lengths away)."""
    v = env.vision
    vision = "exact" if v.mode == "exact" else f"fast:{v.k}"
    connectome = env.connectome.spec if source == "connectome" else None
    calib = fe.make("follow", worlds=env.num_envs, model="neuromechfly", action="descending", vision=vision,
                    connectome=connectome, control_dt=env.control_dt, max_episode_steps=0, noise=0.0,
                    distance=1000.0, seed=seed + 1, device=env.device)
    obs, _ = calib.reset(seed=seed + 1)
    straight = torch.ones(env.num_envs, 2, device=env.device)
    seen = []
    for _ in range(max(2, round(seconds / calib.control_dt))):
        obs, *_ = calib.step(straight)
        seen.append(signal_of(calib, obs, source).clone())
    calib.close()
    s = torch.cat(seen)  # [steps x W, 2, T, C]
    return s.mean(0), s.std(0).clamp(min=1e-6)


def make_policy(env, gain: float = GAIN, signal: str | None = None, baseline=None, threshold: float = THRESHOLD):
    """``policy(obs) -> drives`` for ``env`` (action="descending"), reading ``signal``: the
    ``connectome`` group when the env observes it, else the eyes (``ommatidia``); ``"none"``
    walks straight. ``baseline``: (mean, std) from :func:`calibrate` (made here when None)."""
    if env.descending is None:
        raise SystemExit("examples/follow.py steers by the descending drives: make(..., action='descending')")
    signal = signal or ("connectome" if env.observes("connectome") else "ommatidia")
    if signal == "none":
        return lambda obs: torch.ones(obs.shape[0], 2, device=obs.device)
    mean, std = baseline if baseline is not None else calibrate(env, signal)

    def policy(obs):
        z = (signal_of(env, obs, signal) - mean).abs_().div_(std)
        return turning_drives(object_bias(z, threshold), gain)

    return policy


def measure(worlds: int, duration: float, signal: str, gain: float, device=None, seed: int = 0) -> dict:
    """One episode of ``duration`` s per world: the fraction of worlds whose target stayed within
    +-45 degrees all along, the mean fraction of steps it was, and the mean final distance (body
    lengths), over the worlds whose episode did not end (``fell``: those that did)."""
    connectome = {"columns": "all", "start": "scene"} if signal == "connectome" else None
    env = fe.make("follow", worlds=worlds, model="neuromechfly", action="descending", vision="fast:2",
                  connectome=connectome, control_dt=0.002, max_episode_steps=0, noise=0.0, seed=seed, device=device)
    policy = make_policy(env, gain, signal)
    obs, info = env.reset(seed=seed)
    steps = max(1, round(duration / env.control_dt))
    kept = torch.ones(worlds, dtype=torch.bool, device=env.device)
    ended = torch.zeros(worlds, dtype=torch.bool, device=env.device)  # fell (and was reset): not scored
    ahead = torch.zeros(worlds, device=env.device)
    for _ in range(steps):
        obs, _, term, trunc, info = env.step(policy(obs))
        ended |= term | trunc
        kept &= info["ahead"] > 0
        ahead += info["ahead"]
    ok = ~ended
    return dict(signal=signal, gain=gain, worlds=worlds, steps=steps, kept=float(kept[ok].float().mean()),
                ahead=float((ahead / steps)[ok].mean()), distance=float(info["distance"][ok].mean()),
                fell=int((~ok).sum()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="following the target by T4/T5 vs by the raw ommatidia vs straight on")
    ap.add_argument("--worlds", type=int, default=8)
    ap.add_argument("--duration", type=float, default=1.0, help="simulated seconds per world")
    ap.add_argument("--device", default=None)
    ap.add_argument("--gain", type=float, default=GAIN)
    ap.add_argument("--signals", nargs="+", choices=SIGNALS, default=list(SIGNALS))
    args = ap.parse_args(argv)
    for signal in args.signals:
        r = measure(args.worlds, args.duration, signal, args.gain, args.device)
        print(f"{signal}: {100 * r['kept']:.0f}% of {r['worlds']} worlds kept the target within 45 deg over "
              f"{r['steps']} control steps ({100 * r['ahead']:.0f}% of world-steps; final distance "
              f"{r['distance']:.2f} L; {r['fell']} fell)", flush=True)


if __name__ == "__main__":
    main()
