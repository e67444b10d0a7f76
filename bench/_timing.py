"""Timing shared by the benchmarks: a step function's microseconds per step, on CUDA from
replays of one captured graph (CUDA events), on CPU from eager calls."""

import statistics
import time

import torch


def time_steps(step_fn, steps: int, device: str, repeats: int) -> float:
    """Median microseconds per step over `repeats` runs of `steps` steps."""
    runs = []
    if device.startswith("cuda"):
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step_fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            step_fn()
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                g.replay()
            end.record()
            torch.cuda.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / steps)
    else:
        step_fn()
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                step_fn()
            runs.append((time.perf_counter() - t0) * 1e6 / steps)
    return statistics.median(runs)


def time_it(fn, steps: int, device) -> float:
    """Seconds per call of ``fn`` over ``steps`` eager calls (on CUDA synchronized before and after)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t) / steps


def interleaved_medians(cases: dict, rounds: int, steps: int, device) -> dict:
    """``{name: median seconds per call}`` of each case's function (:func:`time_it`), the cases
    interleaved round by round (a noisy machine slows them all alike)."""
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(time_it(fn, steps, device))
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}
