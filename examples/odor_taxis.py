"""Odor taxis by FlyGym 1.x's rule, as a flycuda.env policy for the "odor_taxis" task, every world
at once on the device: the left-right asymmetry of the odor at the antennae and palps turned into
two descending drives (FlyGym 1.x ``examples/olfaction/simple_odor_taxis.py``), against a fly blind
to odor walking straight on.

    flycuda env odor_taxis --action descending --policy examples/odor_taxis.py --worlds 8
    python examples/odor_taxis.py --worlds 8 --duration 1.0      # reached: the rule vs blind
    python examples/odor_taxis.py --worlds 8 --windy             # in each world's wind and scene

The rule, per world, from the ``odor`` observations I [k = 2, 4 sensors: palp L, R, antenna L, R]
(dimension 0 attracts, 1 repels)::

    a = (1 I[0, palp] + 9 I[0, antenna]) / 10          # attractive, [left, right]
    v = I[1, antenna]                                   # aversive (1.x's weights 0 and 10)
    b = -500 (a_L - a_R) / mean(a) + 80 (v_L - v_R) / mean(v)
    bn = tanh(b^2) sign(b)
    drives = (1, 1), the right one less 0.8 |bn| when bn > 0, else the left one

so the fly turns toward the stronger attractive odor and away from the aversive one; each
decision holds for 1.x's 0.05 s (``control_dt``). ``--windy`` draws a scene per world at reset
(:data:`WINDY`: the advection-diffusion field in a 0.5 to 1 m/s wind that also drags the fly,
0 to 2 aversive sources out, peaks within 30%); a world with no aversive odor turns on the
attractive one alone.
"""

from __future__ import annotations

import argparse

import torch

import flycuda.env as fe

DECISION_DT = 0.05  # s: FlyGym 1.x's decision_interval
PALP_ANTENNA = (1.0, 9.0)  # the attractive odor's weights; the aversive one's: (0, 10)
GAINS = (500.0, 80.0)  # attractive, aversive
WINDY = dict(field="advection_diffusion", wind=(200.0, 400.0), aversive=(0, 2), peak_spread=0.3)
"""--windy's scene options (flycuda.env.odor_tasks.OdorTaxis; wind in body lengths/s: 0.5 to 1 m/s)."""


def odor_drives(odor: torch.Tensor, gains=GAINS) -> torch.Tensor:
    """FlyGym 1.x's simple odor-taxis rule for every world: ``odor`` [W, 2, 4] (dimension 0
    attractive, 1 aversive; palp L, R, antenna L, R) -> drives [W, 2] (left, right)."""
    wp, wa = PALP_ANTENNA
    a = (wp * odor[:, 0, 0:2] + wa * odor[:, 0, 2:4]) / (wp + wa)
    v = odor[:, 1, 2:4]
    tiny = 1e-30  # no odor of a kind (a world without aversive sources): no turn from it
    b = -gains[0] * (a[:, 0] - a[:, 1]) / a.mean(1).clamp(min=tiny) + \
        gains[1] * (v[:, 0] - v[:, 1]) / v.mean(1).clamp(min=tiny)
    bn = torch.tanh(b * b) * torch.sign(b)
    drives = torch.ones(odor.shape[0], 2, device=odor.device)
    cut = 0.8 * bn.abs()
    drives[:, 0] -= torch.where(bn > 0, torch.zeros_like(cut), cut)
    drives[:, 1] -= torch.where(bn > 0, cut, torch.zeros_like(cut))
    return drives


def make_policy(env, blind: bool = False):
    """The rule on ``env``'s odor observations (``blind``: drives (1, 1), odor ignored)."""
    if env.descending is None:
        raise SystemExit("odor_taxis.py drives the walking controller: make(..., action='descending')")
    sl = env.obs_slice("odor")

    def policy(obs):
        if blind:
            return torch.ones(obs.shape[0], 2, device=obs.device)
        return odor_drives(obs[:, sl].view(-1, 2, 4))

    return policy


def measure(worlds: int, duration: float, blind: bool, device=None, seed: int = 0, scene: dict | None = None) -> dict:
    """One episode of ``duration`` s per world (no truncation): the fraction of worlds that came
    within the task's reach of the attractive source (before any fall), their mean closest
    distance (body lengths), and the thorax's path of every world. ``scene``: the task's scene
    options (e.g. :data:`WINDY`)."""
    env = fe.make("odor_taxis", worlds=worlds, model="neuromechfly", action="descending", device=device, seed=seed,
                  control_dt=DECISION_DT, max_episode_steps=0, **(scene or {}))
    obs, info = env.reset(seed=seed)
    policy = make_policy(env, blind)
    reached = torch.zeros(worlds, dtype=torch.bool, device=env.device)
    fell = torch.zeros_like(reached)
    closest = info["distance"].clone()
    root = env.layout.root_adr
    path = [env.sim.view("qpos")[:, root:root + 2].cpu().clone()]
    sources = env.smell.sources[:, :, :2].cpu().clone()
    for _ in range(max(1, round(duration / env.control_dt))):
        obs, _, term, _, info = env.step(policy(obs))
        fell |= term
        reached |= (info["reached"] > 0) & ~fell
        closest = torch.where(fell, closest, torch.minimum(closest, info["distance"]))
        path.append(env.sim.view("qpos")[:, root:root + 2].cpu().clone())
    return dict(reached=float(reached.float().mean()), closest=float(closest.mean()), fell=int(fell.sum()),
                worlds=worlds, path=torch.stack(path, 1), sources=sources)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="FlyGym 1.x's odor-taxis rule against a fly blind to odor")
    ap.add_argument("--worlds", type=int, default=8)
    ap.add_argument("--duration", type=float, default=1.0, help="simulated seconds per world")
    ap.add_argument("--device", default=None)
    ap.add_argument("--plot", default=None, metavar="PATH.png", help="the paths over the odor, both controllers")
    ap.add_argument("--windy", action="store_true", help="a scene per world: wind, aversive count, peaks (WINDY)")
    a = ap.parse_args(argv)
    runs = {}
    for name, blind in (("odor rule", False), ("blind", True)):
        r = runs[name] = measure(a.worlds, a.duration, blind, a.device, scene=WINDY if a.windy else None)
        print(f"{name}: {100 * r['reached']:.0f}% of {r['worlds']} worlds reached the attractive source in "
              f"{a.duration:g} s (mean closest {r['closest']:.2f} body lengths, {r['fell']} fell)", flush=True)
    if a.plot:
        plot(runs, a.plot)
        print(f"plot: {a.plot}")


def plot(runs: dict, path: str) -> None:
    """Each controller's paths, every world's moved so that its start is at the origin and its
    attractive source to the right, over world 0's odor (attractive minus aversive)."""
    import matplotlib  # noqa: PLC0415  (only the plot needs it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 4), tight_layout=True)
    for ax, (name, r) in zip(axes, runs.items()):
        p, s = r["path"], r["sources"]
        start, to = p[:, :1], s[:, 0] - p[:, 0]
        ang = -torch.atan2(to[:, 1], to[:, 0])
        rot = torch.stack([torch.stack([ang.cos(), -ang.sin()], 1), torch.stack([ang.sin(), ang.cos()], 1)], 1)
        rel = torch.einsum("wij,wtj->wti", rot, p - start)
        src = torch.einsum("wij,wnj->wni", rot, s - start)
        x, y = torch.meshgrid(torch.linspace(-2, 12, 200), torch.linspace(-6, 6, 160), indexing="xy")
        grid = torch.stack([x, y], -1)
        field = sum(sign / ((grid - src[0, i]).pow(2).sum(-1) + 0.05) for i, sign in enumerate((1.0, -1.0, -1.0)))
        ax.imshow(field.clamp(-2, 2), extent=(-2, 12, -6, 6), origin="lower", cmap="coolwarm", alpha=0.6)
        for w in range(rel.shape[0]):
            ax.plot(rel[w, :, 0], rel[w, :, 1], "k-", lw=0.8)
        ax.plot(src[:, 0, 0], src[:, 0, 1], "o", color="orange", ms=4, label="attractive")
        ax.plot(src[:, 1:, 0].flatten(), src[:, 1:, 1].flatten(), "o", color="royalblue", ms=3, label="aversive")
        ax.set_title(f"{name}: {100 * r['reached']:.0f}% reached")
        ax.set_xlabel("mm toward the attractive source")
        ax.set_aspect("equal")
    axes[0].legend(fontsize=7)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
