"""Benchmark: recording at scale (flycuda.recording.recorder streaming into a zarr store).

One table, five measures:

  memory@scale   memory for 8192 NeuroMechFly worlds x 10 s at 1e-4 s, joint angles every
                 step + qpos at 30 fps, from the arrays' shapes: flycuda (spline pieces,
                 offsets, counter, recording rings, tracking buffers; pinned host buffers)
                 vs FlyGym's tutorial (the pre-expanded targets buffer on the device, its
                 WarpTrajectoryRecorder's qpos on the host) and flycuda before streaming
                 (a [W, R, D] history on the device, twice that on the host).
  memory(dur)    a real replay at 1x, 10x, 100x duration (each in its own process): the
                 recording's device bytes and the process's peak RSS.
  overhead       world-steps/s of the same replay with a zarr recording (angles every step,
                 qpos at 30 fps) / without one; runs interleaved, median of --repeats.
  writer         sustained MB/s of the writer thread into a local store (chunks of 8192
                 worlds x 12 samples x 42 angles), next to the rate a GPU run would need.
  snapshots      the same replay recording with snapshots (issue 52: one per chunk of angles,
                 beside the store) / without; interleaved, median of --repeats; each snapshot's
                 file size next to a chunk of angles, its time to take (host) and to write
                 (writer thread), and the store's progress JSON writes (time each, per chunk).
  afterwards     render afterwards: flycuda's render_recording vs FlyGym's
                 render_trajectories_gpu (MuJoCo Warp's renderer; Warp's CPU device here),
                 same recording, worlds and size (FlyGym lane).

    python bench/bench_record.py --device cpu
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402

GIB, MIB = 2**30, 2**20
MEASURES = ("memory@scale", "memory(dur)", "overhead", "snapshots", "writer", "afterwards")


def memory_at_scale(worlds=8192, seconds=10.0, dt=1e-4, nq=73, dofs=42, frames=660, fps_video=30.0):
    """Bytes from the arrays' shapes (nothing allocated at this size)."""
    from flycuda.recording.recorder import CHUNK_BYTES, RING, rows_per_chunk

    steps = int(round(seconds / dt))
    rows_angles = steps + 1
    every_q = round(1 / (fps_video * dt))
    rows_q = steps // every_q + 1
    c_ang = rows_per_chunk(worlds, dofs, rows_angles, CHUNK_BYTES)
    c_q = rows_per_chunk(worlds, nq, rows_q, CHUNK_BYTES)
    rings = RING * worlds * 4 * (c_ang * dofs + c_q * nq)
    tracking = worlds * c_ang * dofs * 4 + dofs * 8 + 16
    pieces = frames * 4 * dofs * 8 + worlds * 8 + 16
    flycuda_dev = rings + tracking + pieces
    flycuda_host = rings + RING * worlds * c_ang * dofs * 4  # pinned buffers: rings' twins + targets
    flygym_dev = worlds * steps * dofs * 4                    # tutorial buffer [W, steps, 42] float32
    flygym_host = worlds * rows_q * nq * 4                    # WarpTrajectoryRecorder: qpos at the video rate
    history = worlds * rows_angles * dofs * 4                 # flycuda before: history [W, R, D]
    return [
        ["memory@scale", "8192 NMF x 10 s, device", f"{flycuda_dev / MIB:,.0f} MiB",
         f"{flygym_dev / GIB:,.1f} GiB", "FlyGym tutorial buffer", f"{flygym_dev / flycuda_dev:,.0f}x less"],
        ["memory@scale", "8192 NMF x 10 s, host", f"{flycuda_host / MIB:,.0f} MiB",
         f"{flygym_host / MIB:,.0f} MiB", "FlyGym recorder (qpos only)", "angles+qpos vs qpos"],
        ["memory@scale", "8192 NMF x 10 s, device", f"{flycuda_dev / MIB:,.0f} MiB",
         f"{history / GIB:,.1f} GiB (+{2 * history / GIB:,.0f} GiB host)", "flycuda before (history)",
         f"{history / flycuda_dev:,.0f}x less"],
    ]


def _child_replay(duration, record, observe):
    """Runs in a subprocess: one replay; prints its recorder bytes and peak RSS as JSON."""
    import resource

    from flycuda.replay import replay

    res = replay(worlds=1, duration=duration, device="cpu", progress=False, record=record, observe=observe)
    print(json.dumps({"device_bytes": res.recorder_device_bytes,
                      "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "wsps": res.world_steps_per_s}))


def memory_by_duration(base: float, tmp: str):
    rows = []
    for mult in (1, 10, 100):
        store = os.path.join(tmp, f"d{mult}.zarr")
        code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
                f"import bench_record as b; b._child_replay({base * mult}, {store!r}, ('angles', 'qpos@30hz'))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        m = json.loads(out.strip().splitlines()[-1])
        rows.append(["memory(dur)", f"hexapod, 1 world, {base * mult:g} s ({mult}x)",
                     f"{m['device_bytes'] / MIB:.2f} MiB rings", f"{m['rss_mib']:,.0f} MiB peak RSS", "process", ""])
    return rows


def overhead(device: str, duration: float, repeats: int, tmp: str, models):
    from flycuda.replay import replay
    from flycuda.worlds import resolve

    rows = []
    for model in models:
        built = resolve(model, 2, device=device, motion=False)
        kw = dict(worlds=2, sim=built.sim, duration=duration, progress=False, act_ids=built.act_ids,
                  keep_state=True)
        if built.fly is not None:
            from flycuda import flygym as fg

            kw.update(motion=fg.spotlight(built.fly), interp="cubic")
        with_rec, without = [], []
        for i in range(repeats + 1):  # the first pair warms up (JIT), not counted
            a = replay(**kw).world_steps_per_s
            b = replay(**kw, observe=("angles", "qpos@30hz"), record=os.path.join(tmp, f"o{model}{i}.zarr"))
            if i:
                without.append(a)
                with_rec.append(b.world_steps_per_s)
        w, wo = statistics.median(with_rec), statistics.median(without)
        rows.append(["overhead", f"{model}, 2 worlds, {duration:g} s", f"{w:,.0f} world-steps/s",
                     f"{wo:,.0f} world-steps/s", "same run, no recording", f"{w / wo:.3f}x"])
    return rows


def snapshots(device: str, duration: float, repeats: int, tmp: str, models):
    from flycuda.replay import replay
    from flycuda.worlds import resolve

    rows = []
    for model in models:
        built = resolve(model, 2, device=device, motion=False)
        kw = dict(worlds=2, sim=built.sim, duration=duration, progress=False, act_ids=built.act_ids,
                  keep_state=True, observe=("angles", "qpos@30hz"))
        if built.fly is not None:
            from flycuda import flygym as fg

            kw.update(motion=fg.spotlight(built.fly), interp="cubic")
        on, off, last = [], [], None
        for i in range(repeats + 1):  # the first pair warms up (JIT), not counted
            a = replay(**kw, record=os.path.join(tmp, f"s{model}{i}a.zarr"), snapshots=False)
            b = replay(**kw, record=os.path.join(tmp, f"s{model}{i}b.zarr"))
            if i:
                off.append(a.world_steps_per_s)
                on.append(b.world_steps_per_s)
                last = b
        w, wo = statistics.median(on), statistics.median(off)
        sn, chunk = last.snapshots, 4 * int(np.prod(last.recording["angles"].chunks))
        n = max(1, sn["taken"])
        rows += [["snapshots", f"{model}, 2 worlds, {duration:g} s, {sn['taken']} snapshots",
                  f"{w:,.0f} world-steps/s", f"{wo:,.0f} world-steps/s", "same run, snapshots off", f"{w / wo:.3f}x"],
                 ["snapshots", "one snapshot's file / one chunk of angles", f"{sn['file_bytes'] / 1024:,.1f} KiB",
                  f"{chunk / 1024:,.1f} KiB", "the chunk it is written with", f"{sn['file_bytes'] / chunk:.2f}x"],
                 ["snapshots", "take (host: sync, copies) / write (writer thread)", f"{1e3 * sn['seconds'] / n:.2f} ms",
                  f"{1e3 * sn['write_seconds'] / n:.2f} ms", "file + fsync + marker", ""],
                 ["progress", "the store's progress JSON, per write", f"{1e3 * last.progress_seconds / max(1, last.progress_writes):.2f} ms",
                  f"{last.progress_writes} writes", "for the run's chunks (one JSON write each, at most)", ""]]
    return rows


def writer_rate(tmp: str, chunks: int = 12):
    from flycuda.recording import store as zstore

    W, C, D = 8192, 12, 42
    spec = zstore.ArraySpec("angles", W, C * chunks, [str(i) for i in range(D)], 1, W, C)
    group = zstore.create(os.path.join(tmp, "w.zarr"), [spec], {"timestep": 1e-4})
    writer = zstore.Writer(group)
    data = (np.random.default_rng(0).standard_normal((W, C, D)) * 0.3).astype(np.float32)  # angle-like
    t0 = time.perf_counter()
    for c in range(chunks):
        writer.put("angles", 0, c * C, data)
    writer.close()
    wall = time.perf_counter() - t0
    mbs = writer.bytes_written / wall / 1e6
    per_ws = D * 4  # bytes per world-step (angles every step)
    return [["writer", f"{chunks} chunks of 8192x12x42 f32, zstd", f"{mbs:,.0f} MB/s",
             f"{1e6 * per_ws / 1e6:,.0f} MB/s per 1M world-steps/s", "needed (angles every step)",
             f"keeps up to {mbs / per_ws:,.1f}M world-steps/s"]]


def afterwards(tmp: str, worlds: int, size, frames: int):
    """flycuda render_recording vs FlyGym's render_trajectories_gpu on the same NeuroMechFly recording."""
    from flycuda import flygym as fg
    from flycuda.recording import Target
    from flycuda.replay import render_recording, replay

    if not fg.available():
        return [["afterwards", "needs FlyGym (its lane)", "-", "-", "render_trajectories_gpu", "-"]]
    import warp as wp
    from flygym.warp.recording import render_trajectories_gpu
    from flygym.warp.rendering import modify_world_for_batch_rendering

    setup = fg.Setup("neuromechfly", worlds, device="cpu")
    store = os.path.join(tmp, "nmf.zarr")
    every = 10
    replay(motion=fg.spotlight(setup.fly), worlds=worlds, sim=setup.sim, act_ids=setup.act_ids, interp="cubic",
           duration=(frames - 1) * every * setup.sim.timestep, snippet=None, offsets=[0.1 * w for w in range(worlds)],
           progress=False, observe=("angles", f"qpos@{every}"),
           record=Target(store, attrs={"model": "neuromechfly", "camera": setup.camera}))
    fly, world, cam = fg.neuromechfly()
    modify_world_for_batch_rendering(world)
    world.mjcf_root.option.noslip_iterations = 0  # as GPUSimulation does (MuJoCo Warp has no noslip)
    mjm = world.compile()[0]
    trajs = fg.to_trajectories(store, playback_speed=every * setup.sim.timestep * 25)
    t0 = time.perf_counter()
    with wp.ScopedDevice("cpu"):
        render_trajectories_gpu(mjm, trajs, [cam.name], camera_res=(size[1], size[0]), worlds_per_batch=worlds)
    t_fg = time.perf_counter() - t0
    t0 = time.perf_counter()
    pb = render_recording(store, None, worlds=f"0:{worlds}", size=size, progress=False, camera=setup.camera)
    t_fc = time.perf_counter() - t0
    n = worlds * frames
    return [["afterwards", f"NMF, {worlds} worlds x {frames} frames, {size[0]}x{size[1]}, end to end",
             f"{n / t_fc:,.1f} images/s", f"{n / t_fg:,.1f} images/s", "FlyGym render_trajectories_gpu",
             f"{t_fg / t_fc:.2f}x"],
            ["afterwards", "flycuda: set-up (build worlds, pack meshes) / frames", f"{t_fc - pb.seconds:.1f} s",
             f"{pb.images_per_s:,.0f} images/s", "kinematics + tile render, per frame", ""]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--duration", type=float, default=0.1, help="seconds of the overhead runs")
    p.add_argument("--base", type=float, default=0.15, help="seconds of the 1x memory run (> MAX_ROWS steps)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--models", nargs="+", default=["hexapod"])
    p.add_argument("--render-worlds", type=int, default=4)
    p.add_argument("--render-frames", type=int, default=40)
    p.add_argument("--render-size", default="160x120")
    p.add_argument("--measures", nargs="+", default=list(MEASURES), choices=list(MEASURES),
                   help="which measures to run (default all)")
    p.add_argument("--no-results", action="store_true", help="print only (no row in bench/RESULTS.md)")
    a = p.parse_args(argv)
    size = tuple(int(x) for x in a.render_size.split("x"))
    runs = {"memory@scale": lambda tmp: memory_at_scale(),
            "memory(dur)": lambda tmp: memory_by_duration(a.base, tmp),
            "overhead": lambda tmp: overhead(a.device, a.duration, a.repeats, tmp, a.models),
            "snapshots": lambda tmp: snapshots(a.device, a.duration, a.repeats, tmp, a.models),
            "writer": writer_rate,
            "afterwards": lambda tmp: afterwards(tmp, a.render_worlds, size, a.render_frames)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.measures:
            rows += runs[m](tmp)
    table = format_table(["measure", "setting", "flycuda", "baseline", "baseline is", "ratio"], rows)
    print(table)
    if not a.no_results:
        append_results("bench_record: recording at scale (memory, streaming overhead, writer, render afterwards)",
                       a.device, table, notes="memory@scale from shapes (FlyGym tutorial: its [W, steps, 42] float32 "
                       "targets buffer; its WarpTrajectoryRecorder: qpos at 30 fps); overhead: interleaved runs, "
                       f"median of {a.repeats}; writer: zarr default codec (zstd) on this machine's disk")


if __name__ == "__main__":
    main()
