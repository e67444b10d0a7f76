"""Benchmark: flycuda's tile renderer vs MuJoCo Warp's renderer, same scene, camera, size.

  flycuda   flycuda.render_tiles (TileRenderer): RGB tiles, 1 sample, no shadows
  mjwarp    mjw.refit_bvh + mjw.render + mjw.get_rgb (MuJoCo Warp's pipeline per frame)

Both render every world from the same camera at the same resolution (RGB only);
reported: images/s, Mpixels/s and the speed-up. On CUDA each renderer is timed
over --frames frames after warm-up (synchronized); on CPU likewise on Warp's CPU device.

    python bench/bench_render.py                               # CUDA: 8/100/1000 worlds
    python bench/bench_render.py --device cpu --worlds 4 8 --scene fly
"""

import argparse
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import flycuda  # noqa: E402
from _results import append_results, format_table  # noqa: E402
from flycuda.bridge import Sim  # noqa: E402

SIZES = [(64, 64), (128, 128), (320, 240)]


def _sync(sim):
    if sim.device.type == "cuda":
        import warp as wp

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize()


def _time(fn, sim, frames, repeats):
    fn()
    _sync(sim)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(frames):
            fn()
        _sync(sim)
        runs.append((time.perf_counter() - t0) / frames)
    return statistics.median(runs)


def bench(scene: str, device: str, worlds: int, size, frames: int, repeats: int):
    import mujoco_warp as mjw
    import warp as wp

    from flycuda.model import primitives_xml
    from flycuda.render import MjwRenderer, TileRenderer

    src, cam = (None, "track") if scene == "fly" else (primitives_xml(), "overview")
    sim = Sim.build(src, worlds, device=device)
    for _ in range(5):
        sim.step()
    W, H = size
    ours = TileRenderer(sim, cam, W, H)
    theirs = MjwRenderer(sim, cam, W, H)
    with wp.ScopedDevice(sim.wp_device):
        t_ours = _time(ours.render, sim, frames, repeats)
        t_mjw = _time(theirs.render, sim, frames, repeats)
    del mjw
    return t_ours, t_mjw


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if flycuda.cuda_ready() else "cpu", choices=["cpu", "cuda"])
    p.add_argument("--scene", default="fly", choices=["fly", "primitives"])
    p.add_argument("--worlds", type=int, nargs="+", default=None)
    p.add_argument("--sizes", nargs="+", default=None, help="WxH, e.g. 64x64 320x240")
    p.add_argument("--frames", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args(argv)
    worlds = args.worlds or ([8, 100, 1000] if args.device == "cuda" else [4, 8])
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SIZES
    frames = args.frames or (50 if args.device == "cuda" else 5)
    rows = []
    for n in worlds:
        for size in sizes:
            t_ours, t_mjw = bench(args.scene, args.device, n, size, frames, args.repeats)
            px = n * size[0] * size[1]
            rows.append([n, f"{size[0]}x{size[1]}", f"{n / t_ours:,.0f}", f"{n / t_mjw:,.0f}",
                         f"{px / t_ours / 1e6:,.1f}", f"{px / t_mjw / 1e6:,.1f}", f"{t_mjw / t_ours:.2f}x"])
            print(f"{n} worlds {size}: flycuda {n / t_ours:,.0f} img/s, mjwarp {n / t_mjw:,.0f} img/s", flush=True)
    table = format_table(["worlds", "size", "flycuda img/s", "mjwarp img/s", "flycuda Mpx/s", "mjwarp Mpx/s",
                          "speed-up"], rows)
    print(table)
    if not args.no_record:
        append_results(f"bench_render: tile renderer vs mjw.render, {args.scene} scene", args.device, table,
                       notes=f"RGB only, 1 sample, no shadows; {frames} frames per run, median of {args.repeats}; "
                             "mjwarp = refit_bvh + render + get_rgb")


if __name__ == "__main__":
    main()
