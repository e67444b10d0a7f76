"""Benchmark: fly vision for every world (flycuda.vision.eyes) vs FlyGym's CPU vision.

  flygym    flygym.Simulation.get_ommatidia_readouts (MuJoCo's OpenGL renderer, here in
            software: MUJOCO_GL=osmesa, then Retina.fisheye_image_to_hex_pxls), one fly
  exact     flycuda.vision.eyes.Vision(mode="exact"): the eye cameras at the raw pixels the
            retina reads, pooled as FlyGym pools (render_tiles + pool_ommatidia)
  fast k    Vision(mode="fast", k): k rays per ommatidium

Reported per mode: readouts per second per fly (both eyes), rays per readout, device
bytes per world, and for the same states the readouts' agreement with FlyGym's own
(per-eye Pearson r over the 721 ommatidia and mean absolute difference) and, for
fast modes, the error against exact mode. The runs are interleaved (flygym, exact,
fast..., repeated) and medians reported.

    MUJOCO_GL=osmesa python bench/bench_vision.py --worlds 4 --repeats 3
    MUJOCO_GL=osmesa python bench/bench_vision.py --device cuda --worlds 1000 8192   # a GPU (gpu-check)
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402


def _timed(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _agreement(ours: np.ndarray, theirs: np.ndarray) -> tuple[float, float]:
    """Mean over eyes of Pearson r and mean |difference| of per-ommatidium readouts."""
    from flycuda.vision import agreement

    a = agreement(ours, theirs)
    return float(np.mean(a["r"])), float(np.mean(a["mad"]))


def _hexagons(ours: np.ndarray, theirs: np.ndarray, path: str) -> None:
    """One PNG: rows = flycuda's worlds (exact mode), then FlyGym's own readout of world
    0's state; columns = left and right eye, as Retina.hex_pxls_to_human_readable draws them."""
    import imageio.v3 as iio
    from flygym.vision.retina import Retina

    retina = Retina()

    def row(readout):  # [2, O, 2] -> one image of both eyes (the readout's own column per ommatidium)
        eyes = [retina.hex_pxls_to_human_readable(readout[e].max(-1), color_8bit=True) for e in range(2)]
        return np.concatenate([np.asarray(e).reshape(e.shape[0], e.shape[1], -1)[..., 0] for e in eyes], 1)

    img = np.concatenate([row(r) for r in ours] + [row(theirs)], 0)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    iio.imwrite(path, img.astype(np.uint8))
    print(f"wrote {path}: rows = flycuda worlds 0..{len(ours) - 1} (exact), then FlyGym's own (world 0)")


def _modes(sim, ks):
    from flycuda.vision import Vision

    return {"exact": Vision(sim)} | {f"fast k={k}": Vision(sim, mode="fast", k=k) for k in ks}


def _nmf_worlds(fg, world, n: int, device: str):
    sim = fg.wrap(fg.gpu_simulation(world, n, device=device))
    for _ in range(3):
        sim.step()
    sim.kinematics()  # geom poses of the final qpos, as FlyGym's mj_forward computes them
    return sim


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", help="where flycuda runs (FlyGym's vision is CPU only)")
    p.add_argument("--worlds", type=int, nargs="+", default=[4], help="world counts (e.g. 1000 8192 on a GPU)")
    p.add_argument("--ks", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--frames", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-record", action="store_true")
    p.add_argument("--hex", default="out/vision/hexagons.png", metavar="OUT.png",
                   help="both eyes' readouts of world 0 as FlyGym's hexagon images: flycuda exact (top), "
                        "FlyGym's own (bottom); '' for none")
    args = p.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    from flycuda import flygym as fg

    cuda = args.device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(args.device)) if cuda else (lambda: None)
    fly, world, _ = fg.neuromechfly(vision=True)
    fg_eyes = fg.FlyGymEyes(world, fly)
    fsim = fg_eyes.sim
    rows, t_fg, theirs = [], None, None
    for W in args.worlds:
        sim = _nmf_worlds(fg, world, W, args.device)
        if theirs is None:
            theirs = fg_eyes.readouts(sim.view("qpos")[0])  # also builds FlyGym's renderer (not timed)
        modes = _modes(sim, args.ks)
        exact = modes["exact"].update().clone()
        times = {name: [] for name in ["flygym", *modes]}
        for _ in range(args.repeats):  # interleaved
            times["flygym"].append(_timed(lambda: fsim.get_ommatidia_readouts(fly.name), args.frames))
            for name, v in modes.items():
                v.update()
                sync()
                times[name].append(_timed(lambda: (v.update(), sync()), args.frames) / W)  # per fly
        t_fg = statistics.median(times["flygym"])
        rows.append(["flygym (OpenGL, osmesa)", "1 (cpu)", f"{1 / t_fg:,.1f}", "1.00x", f"{450 * 512:,}", "-",
                     "1.000", "0", "-"])
        for name, v in modes.items():
            t = statistics.median(times[name])
            r, mad = _agreement(v.update()[0].cpu().numpy(), theirs)
            err = "0" if name == "exact" else f"{float((v.readouts - exact).abs().sum(-1).mean()):.4f}"
            per_world = (v.pixels[0].numel() + v.readouts[0].numel() * 4 + v.renderer.top_boxes[0].numel() * 4)
            rows.append([name, f"{W} ({args.device})", f"{1 / t:,.1f}", f"{t_fg / t:.1f}x",
                         f"{v.rays_per_readout * 2:,}", f"{per_world:,}", f"{r:.3f}", f"{mad:.3f}", err])
            print(f"{name}, {W} worlds: {1 / t:,.1f} readouts/s per fly, r {r:.3f}", flush=True)
        if args.hex and W == args.worlds[0]:
            _hexagons(modes["exact"].readouts[:2].cpu().numpy(), theirs, args.hex)
        del modes, sim
    table = format_table(["mode", "worlds", "readouts/s per fly", "vs flygym", "rays per readout", "device B/world",
                          "r vs flygym", "MAD vs flygym", "MAD vs exact"], rows)
    print(table)
    if not args.no_record:
        append_results("bench_vision: ommatidia readouts, flycuda.vision.eyes vs FlyGym's CPU vision", args.device, table,
                       notes=f"NeuroMechFly with add_vision, {args.worlds} worlds on {args.device}; medians of "
                             f"{args.repeats} interleaved runs of {args.frames}; FlyGym: one fly on the CPU, "
                             f"get_ommatidia_readouts; agreement: world 0's state in both, per-eye Pearson r / "
                             f"mean |diff| over ommatidia")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
