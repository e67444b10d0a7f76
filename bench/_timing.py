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
