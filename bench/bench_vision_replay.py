"""Benchmark: recording the fly's eyes at scale (``replay(vision=...)``, ``flycuda replay --vision``).

One table, two measures (FlyGym lane: NeuroMechFly and FlyGym's retina):

  memory@scale  8192 worlds x 10 s at 1e-4 s, readouts at 500 Hz, exact and fast:4 mode:
                flycuda's device bytes (the vision ring as the recorder sizes it, the eyes'
                pixel buffers, readouts and per-world BVH boxes as a real Vision allocates
                them per world, the scene and maps once) and pinned host buffers, against
                holding the readouts [W, samples, 2, 721, 2] (what a loop that collects
                them per sample and stacks them at the end holds), and the bytes the store
                receives over the run.
  memory(dur)   real replays with vision at 1x and 4x duration (this machine's device):
                the recording's device bytes, the vision stage's, the samples written, and
                the readouts/s of the vision stage inside the replay.

    python bench/bench_vision_replay.py --device cpu
"""

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402

GIB, MIB = 2**30, 2**20


def _per_world(stage) -> tuple[int, int]:
    """(bytes per world, bytes once) of a real vision stage."""
    v, r = stage.vision, stage.vision.renderer
    S = v.readouts.shape[0]
    per = (v.pixels.numel() + v.readouts.numel() * 4 + r.top_boxes.numel() * 4) // S
    return per, stage.device_bytes() - per * S


def memory_at_scale(stages: dict, worlds=8192, seconds=10.0, dt=1e-4, hz=500.0):
    """Rows from the arrays' shapes, the recorder's own chunk rule and the stages' real
    per-world buffers (nothing of this size is allocated)."""
    from flycuda.recording.recorder import CHUNK_BYTES, RING, rows_per_chunk

    rows = int(round(seconds / dt)) // round(1 / (hz * dt)) + 1
    out = []
    for mode, stage in stages.items():
        D = stage.vision.readouts[0].numel()
        C = rows_per_chunk(worlds, D, rows, CHUNK_BYTES)
        ring = RING * worlds * C * D * 4
        per, once = _per_world(stage)
        dev = ring + per * worlds + once
        held = worlds * rows * D * 4
        out.append(["memory@scale", f"{mode}, {worlds} NMF x {seconds:g} s at {hz:g} Hz, device",
                    f"{dev / MIB:,.0f} MiB", f"{held / GIB:,.0f} GiB", "readouts held [W, samples, 2, 721, 2]",
                    f"{held / dev:,.0f}x less"])
        out.append(["memory@scale", f"{mode}: ring / eye buffers per world / scene", f"{ring / MIB:,.0f} MiB",
                    f"{per / 1024:,.1f} KiB/world", f"{once / MIB:,.1f} MiB once", f"chunk {C} sample(s)"])
        out.append(["memory@scale", f"{mode}: pinned host / to the store", f"{ring / MIB:,.0f} MiB",
                    f"{held / GIB:,.0f} GiB", "written to the store over the run", ""])
    return out


def memory_by_duration(device: str, worlds: int, base: float, spec: str, tmp: str):
    from flycuda import flygym as fg
    from flycuda.replay import replay

    rows = []
    for mult in (1, 4):
        setup = fg.Setup("neuromechfly", worlds, device=device, vision=True)
        motion = fg.spotlight(setup.fly)
        res = replay(motion=motion, worlds=worlds, duration=base * mult, sim=setup.sim, act_ids=setup.act_ids,
                     interp="cubic", warmup=0.0, progress=False, vision=spec,
                     record=os.path.join(tmp, f"v{mult}.zarr"))
        t = res.split_seconds.get("vision", 0.0)
        rows.append(["memory(dur)", f"NMF, {worlds} worlds, {base * mult:g} s ({mult}x), {res.vision}",
                     f"{res.recorder_device_bytes / MIB:.2f} MiB rings",
                     f"{res.vision_device_bytes / MIB:.2f} MiB vision stage",
                     f"{res.rows_written.get('vision', 0)} samples stored",
                     f"{res.vision_samples * worlds / t:,.1f} readouts/s" if t > 0 else ""])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--worlds", type=int, default=2, help="worlds of the real replays")
    p.add_argument("--base", type=float, default=0.03, help="seconds of the 1x replay (past a full chunk)")
    p.add_argument("--spec", default="fast:4@1", help="vision of the real replays (every step: full chunks)")
    p.add_argument("--no-results", action="store_true", help="print only (no row in bench/RESULTS.md)")
    args = p.parse_args(argv)
    from flycuda import flygym as fg
    from flycuda.sim.stepper import Loop, LoopOptions
    from flycuda.vision.stage import VisionStage

    setup = fg.Setup("neuromechfly", 1, device=args.device, vision=True)
    loop = Loop(setup.sim, [], LoopOptions(steps=1))  # what a stage's set-up reads: the worlds, the counter
    stages = {mode: VisionStage(mode) for mode in ("exact", "fast:4")}
    for stage in stages.values():
        stage.setup(loop)
    rows = memory_at_scale(stages)
    with tempfile.TemporaryDirectory() as tmp:
        rows += memory_by_duration(args.device, args.worlds, args.base, args.spec, tmp)
    table = format_table(["measure", "setting", "flycuda", "baseline / detail", "baseline is", "ratio"], rows)
    print(table)
    if not args.no_results:
        append_results("bench_vision_replay: recording the eyes at scale", args.device, table,
                       notes="memory@scale from the recorder's chunk rule and a real Vision's per-world buffers "
                             "(NeuroMechFly, FlyGym's retina); memory(dur): real replays of the Spotlight clip "
                             "with --vision, each duration in turn")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
