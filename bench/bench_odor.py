"""Odor at the sensors for W worlds: flycuda.ops.odor_intensity (one call for every world) against
FlyGym 1.x's NumPy ``get_olfaction`` called once per fly (flycuda.reference.odor.flygym1_olfaction,
its transcription: what a 1.x user runs each step), interleaved round by round in one run, on the
same sources, peaks and sensors; and flycuda.ops.odor_plume on a grid the size of 1.x's plume. On CUDA it adds the op alone captured in a graph and replayed
(CUDA events), for both fields, and beside it a physics step of the built-in hexapod at the same
number of worlds (MuJoCo Warp, eager, CUDA events over many steps) for the op's share of a step.

    python bench/bench_odor.py [--worlds 16 64 256] [--sources 2] [--dims 2] [--steps 200] [--repeats 5]
                               [--device cpu] [--gpu-worlds 4096] [--no-results]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from _results import append_results, format_table
from _timing import time_steps
from tqdm.auto import tqdm

import flycuda.ops as ops
from flycuda.reference.odor import flygym1_olfaction

SENSORS = 4  # FlyGym 1.x's: the maxillary palps and antennae


def scene(W: int, n: int, k: int, device: str, seed: int = 0) -> dict:
    """Random sources, peaks and sensors (mm), a wind for the advection-diffusion field."""
    g = torch.Generator().manual_seed(seed)
    return dict(sources=(torch.rand(W, n, 3, generator=g) * 40 - 20).to(device),
                peaks=(torch.rand(n, k, generator=g) * 100).to(device),
                sensors=(torch.rand(W, SENSORS, 3, generator=g) * 40 - 20).to(device),
                out=torch.empty(W, k, SENSORS, device=device),
                wind=(torch.rand(W, 2, generator=g) * 400 - 200).to(device))


def flygym1_step(sc: dict) -> list:
    """One step of W flies as FlyGym 1.x computes them: one get_olfaction per fly."""
    src, peaks, sen = sc["np_sources"], sc["np_peaks"], sc["np_sensors"]
    return [flygym1_olfaction(sen[w], src[w], peaks) for w in range(sen.shape[0])]


def cpu_rows(W: int, n: int, k: int, steps: int, repeats: int) -> list[list]:
    """The op (power field) against W get_olfaction calls, interleaved round by round; the
    advection-diffusion field's op time beside them."""
    sc = scene(W, n, k, "cpu")
    sc.update(np_sources=sc["sources"].double().numpy(), np_peaks=sc["peaks"].double().numpy(),
              np_sensors=sc["sensors"].double().numpy())
    ours = lambda: ops.odor_intensity(sc["sources"], sc["peaks"], sc["sensors"], sc["out"])  # noqa: E731
    plume = lambda: ops.odor_intensity(sc["sources"], sc["peaks"], sc["sensors"], sc["out"],  # noqa: E731
                                       field="advection_diffusion", wind=sc["wind"])
    got = {"power": [], "advection_diffusion": [], "flygym": []}
    for _ in range(repeats):
        for name, fn in (("power", ours), ("flygym", lambda: flygym1_step(sc)), ("advection_diffusion", plume)):
            fn()
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            got[name].append((time.perf_counter() - t0) * 1e6 / steps)
    ops.odor_intensity(sc["sources"], sc["peaks"], sc["sensors"], sc["out"])
    want = np.stack(flygym1_step(sc))
    assert np.allclose(sc["out"].numpy(), want, rtol=1e-6), "the op and FlyGym 1.x disagree"
    us = {name: statistics.median(v) for name, v in got.items()}
    return [[W, n, k, "power", "flycuda.ops.odor_intensity", f"{us['power']:.1f}", f"{us['flygym'] / us['power']:.0f}x"],
            [W, n, k, "power", "FlyGym 1.x get_olfaction x W", f"{us['flygym']:.1f}", "1x"],
            [W, n, k, "advection_diffusion", "flycuda.ops.odor_intensity", f"{us['advection_diffusion']:.1f}", ""]]


def plume_row(W: int, device: str, steps: int, repeats: int, share=None) -> list:
    """The plume op on FlyGym 1.x's plume grid size (480 x 320 cells of 0.5 mm, 60 frames at
    20 fps: its plume_short.hdf5) at W worlds x 4 sensors: time per call (a graph on CUDA) and
    the grid's bytes, held once."""
    g = torch.Generator().manual_seed(1)
    grid = torch.rand(60, 480, 320, generator=g).to(device)
    sensors = (torch.rand(W, SENSORS, 3, generator=g) * 200 + 20).to(device)
    time = (torch.rand(W, generator=g) * 3).to(device)
    out = torch.empty(W, SENSORS, device=device)
    us = time_steps(lambda: ops.odor_plume(grid, sensors, time, out, origin=[0.0, 0.0], spacing=[0.5, 0.5], fps=20.0),
                    steps, device, repeats)
    mib = grid.numel() * 4 / 2**20
    label = "flycuda.ops.odor_plume" + (", graph replay" if device.startswith("cuda") else "")
    return [W, "-", 1, f"plume [60, 480, 320] ({mib:.0f} MiB once)", label, f"{us:.2f}", share(us) if share else ""]


def physics_us(W: int, steps: int = 50) -> float | None:
    """A physics step of the built-in hexapod at W worlds on CUDA (eager, CUDA events), or None
    without MuJoCo Warp."""
    try:
        from flycuda.sim import Sim
        sim = Sim.build(None, W, device="cuda")
    except Exception as e:  # noqa: BLE001  (no MuJoCo Warp here: no share column)
        print(f"bench_odor: no physics row ({type(e).__name__}: {e})")
        return None
    for _ in range(5):
        sim.step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        sim.step()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / steps


def gpu_rows(W: int, n: int, k: int, steps: int, repeats: int) -> list[list]:
    """The op alone in a CUDA graph, both fields; its share of a hexapod physics step."""
    sc = scene(W, n, k, "cuda")
    physics = physics_us(W)
    rows = []
    for field in ops.ODOR_FIELDS:
        wind = sc["wind"] if field == "advection_diffusion" else None
        us = time_steps(lambda: ops.odor_intensity(sc["sources"], sc["peaks"], sc["sensors"], sc["out"], field=field,
                                                   wind=wind), steps, "cuda", repeats)
        share = f"{100 * us / physics:.2f}% of {physics:.0f} us" if physics else "-"
        rows.append([W, n, k, field, "flycuda.ops.odor_intensity, graph replay", f"{us:.2f}", share])
    rows.append(plume_row(W, "cuda", steps, repeats,
                          (lambda us: f"{100 * us / physics:.2f}% of {physics:.0f} us") if physics else None))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, nargs="+", default=[16, 64, 256], help="CPU rows' worlds")
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--dims", type=int, default=2, help="odor dimensions k")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cpu: the comparison with FlyGym 1.x; cuda: the graph rows")
    ap.add_argument("--gpu-worlds", type=int, nargs="+", default=[4096])
    ap.add_argument("--no-results", action="store_true")
    a = ap.parse_args(argv)
    if min(a.worlds + a.gpu_worlds) < 1 or a.sources < 1 or a.dims < 1 or a.steps < 1 or a.repeats < 1:
        ap.error("worlds, sources, dims, steps and repeats must be >= 1")
    rows = []
    if a.device == "cpu":
        for W in tqdm(a.worlds, desc="bench_odor", leave=False):
            rows += cpu_rows(W, a.sources, a.dims, a.steps, a.repeats)
            rows.append(plume_row(W, "cpu", a.steps, a.repeats))
    else:
        for W in a.gpu_worlds:
            rows += gpu_rows(W, a.sources, a.dims, a.steps, a.repeats)
    table = format_table(["worlds", "sources", "k", "field", "call", "us per step", "vs FlyGym 1.x / share"], rows)
    print(table)
    if not a.no_results:
        append_results(f"bench_odor: odor at 4 sensors per world, {a.sources} sources, k = {a.dims}", a.device, table,
                       notes="CPU: FlyGym 1.x's get_olfaction (NumPy, one fly a call) called for every world, "
                       "interleaved with the op round by round, median of the rounds; CUDA: the op in a graph, "
                       "beside an eager hexapod physics step at the same worlds.")


if __name__ == "__main__":
    main()
