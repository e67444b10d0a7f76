"""Benchmark: flycuda's tile renderer vs MuJoCo Warp's renderer, same scene, camera, size.

  flycuda   flycuda.render_tiles (TileRenderer): RGB tiles, 1 sample, shadows as --shadows
  mjwarp    mjw.refit_bvh + mjw.render + mjw.get_rgb (MuJoCo Warp's pipeline per frame)

Scenes: aloha-pot (MuJoCo Warp's own mesh-heavy test scene, ~64k triangles, from its
teleoperator camera), fly (the built-in hexapod, capsules), fly-mesh (the hexapod with triangle-mesh
body parts, ~80k triangles, no extra dependency), primitives, and with FlyGym installed
neuromechfly (69 meshes, ~115k triangles) and neuromechfly-capsules (FlyGym's
capsule-simplified variant), from the fly's tracking camera. Both renderers draw
every world from the same camera at the same resolution (RGB only); reported:
images/s, Mpixels/s, primary rays/s per CPU core (CPU) and the speed-up. Each
renderer is timed over --frames frames after warm-up (synchronized), --repeats times,
the two renderers' runs interleaved; the medians are reported.

    python bench/bench_render.py                               # CUDA: 8/100/1000 worlds
    python bench/bench_render.py --device cpu --worlds 4 8 --scenes fly neuromechfly --shadows both
"""

import argparse
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402

import flycuda  # noqa: E402
from flycuda.sim import Sim  # noqa: E402

SIZES = [(64, 64), (128, 128), (320, 240)]


def _sync(sim):
    if sim.device.type == "cuda":
        import warp as wp

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize()


def _run(fn, sim, frames):
    """Seconds per frame of ``frames`` calls of fn (synchronized)."""
    t0 = time.perf_counter()
    for _ in range(frames):
        fn()
    _sync(sim)
    return (time.perf_counter() - t0) / frames


def _time_pair(ours, theirs, sim, frames, repeats):
    """Median seconds per frame of each renderer, their runs interleaved (ours, theirs,
    ours, ...) after one warm-up call each, so that a slow spell of the machine hits both."""
    for fn in (ours, theirs):
        fn()
    _sync(sim)
    runs = [(_run(ours, sim, frames), _run(theirs, sim, frames)) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


SCENES = ["fly", "fly-mesh", "primitives", "aloha-pot", "neuromechfly", "neuromechfly-capsules"]


def make_scene(scene: str, device: str, worlds: int):
    """(sim, camera) of a scene, a few steps in (NeuroMechFly: a few replayed steps, so
    the worlds' poses differ)."""
    from flycuda.sim.hexapod import primitives_xml

    if scene.startswith("neuromechfly"):
        from flycuda import flygym as fg
        from flycuda.replay import replay

        setup = fg.Setup(scene, worlds, device=device)
        replay(motion=fg.spotlight(setup.fly), worlds=worlds, duration=0.002, sim=setup.sim, act_ids=setup.act_ids,
               interp="cubic", snippet=0.5, progress=False)
        return setup.sim, setup.camera
    from flycuda.sim.hexapod import fly_mesh_model

    if scene == "aloha-pot":  # shipped with mujoco_warp (its test data)
        import os

        import mujoco_warp

        src = os.path.join(os.path.dirname(mujoco_warp.__file__), "test_data", "aloha_pot", "scene.xml")
        sim = Sim.build(src, worlds, device=device)
        sim.step()
        return sim, "teleoperator_pov"
    src, cam = {"fly": (None, "track"), "fly-mesh": (fly_mesh_model(), "track"),
                "primitives": (primitives_xml(), "overview")}[scene]
    sim = Sim.build(src, worlds, device=device)
    for _ in range(5):
        sim.step()
    return sim, cam


def bench(sim, cam, size, frames: int, repeats: int, shadows: bool):
    import warp as wp

    from flycuda.render import MjwRenderer, TileRenderer

    W, H = size
    ours = TileRenderer(sim, cam, W, H, shadows=shadows)
    theirs = MjwRenderer(sim, cam, W, H, shadows=shadows)
    with wp.ScopedDevice(sim.wp_device):
        return _time_pair(ours.render, theirs.render, sim, frames, repeats)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if flycuda.cuda_ready() else "cpu", choices=["cpu", "cuda"])
    p.add_argument("--scenes", nargs="+", default=None, choices=SCENES,
                   help="default: fly and fly-mesh, plus neuromechfly when FlyGym is installed")
    p.add_argument("--scene", default=None, choices=SCENES, help="one scene (same as --scenes SCENE)")
    p.add_argument("--worlds", type=int, nargs="+", default=None)
    p.add_argument("--sizes", nargs="+", default=None, help="WxH, e.g. 64x64 320x240")
    p.add_argument("--shadows", choices=["off", "on", "both"], default="off")
    p.add_argument("--frames", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args(argv)
    from flycuda import flygym as fg

    scenes = [args.scene] if args.scene else args.scenes or (
        ["fly", "fly-mesh"] + (["neuromechfly"] if fg.available() else []))
    if any(not fg.can_build(s) for s in scenes if s.startswith("neuromechfly")):
        fg.require()  # one clear line when FlyGym is missing (and nothing is frozen: flycuda.flygym.frozen)
    worlds = args.worlds or ([8, 100, 1000] if args.device == "cuda" else [4, 8])
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes] if args.sizes else SIZES
    frames = args.frames or (50 if args.device == "cuda" else 5)
    shadow_modes = {"off": [False], "on": [True], "both": [False, True]}[args.shadows]
    cores = torch.get_num_threads()
    rows = []
    for scene in scenes:
        for n in worlds:
            sim, cam = make_scene(scene, args.device, n)
            for size in sizes:
                for shadows in shadow_modes:
                    t_ours, t_mjw = bench(sim, cam, size, frames, args.repeats, shadows)
                    px = n * size[0] * size[1]
                    per_core = f"{px / t_ours / cores / 1e6:,.2f}" if args.device == "cpu" else "n/a"
                    rows.append([scene, n, f"{size[0]}x{size[1]}", "on" if shadows else "off",
                                 f"{n / t_ours:,.0f}", f"{n / t_mjw:,.0f}", f"{px / t_ours / 1e6:,.1f}",
                                 f"{px / t_mjw / 1e6:,.1f}", per_core, f"{t_mjw / t_ours:.2f}x"])
                    print(f"{scene} {n} worlds {size} shadows {shadows}: flycuda {n / t_ours:,.0f} img/s, "
                          f"mjwarp {n / t_mjw:,.0f} img/s", flush=True)
    table = format_table(["scene", "worlds", "size", "shadows", "flycuda img/s", "mjwarp img/s", "flycuda Mpx/s",
                          "mjwarp Mpx/s", "flycuda Mrays/s/core", "speed-up"], rows)
    print(table)
    if not args.no_record:
        append_results(f"bench_render: tile renderer vs mjw.render ({', '.join(scenes)})", args.device, table,
                       notes=f"RGB only, 1 sample; {frames} frames per run, median of {args.repeats} interleaved runs; "
                             f"mjwarp = refit_bvh + render + get_rgb; rays/s/core = primary rays / {cores} threads")


if __name__ == "__main__":
    main()
