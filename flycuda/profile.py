"""Profiling helpers: torch.profiler with a schedule, NVTX ranges, a summary.

    with flycuda.profile.Profiler("trace.json") as prof:   # wait 1, warmup 1, active 3
        for _ in range(steps):
            with flycuda.profile.stage("physics"):
                ...
            prof.step()
    print(prof.summary())

The trace opens in Perfetto (ui.perfetto.dev) or chrome://tracing. NVTX ranges
(CUDA only) show up in Nsight Systems.
"""

from __future__ import annotations

import contextlib
import os

import torch

from .errors import FlycudaError


@contextlib.contextmanager
def stage(name: str, cuda: bool | None = None):
    """A profiler label and, on CUDA, an NVTX range around one stage of a step."""
    use_nvtx = torch.cuda.is_available() if cuda is None else cuda
    with torch.profiler.record_function(name):
        if use_nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if use_nvtx:
                torch.cuda.nvtx.range_pop()


class Profiler:
    """torch.profiler over a wait/warmup/active schedule, exporting a Chrome trace.

    Args:
        trace_path: where to write the trace (.json); its directory must exist.
        wait, warmup, active: schedule steps (``prof.step()`` once per loop step).
        cuda: also record CUDA activity (default: when a GPU is visible).
    """

    def __init__(self, trace_path: str | None, wait: int = 1, warmup: int = 1, active: int = 3,
                 cuda: bool | None = None):
        if trace_path is not None:
            d = os.path.dirname(os.path.abspath(trace_path))
            if not os.path.isdir(d):
                raise FlycudaError(f"profile: output directory does not exist: {d}")
        for n, v in (("wait", wait), ("warmup", warmup), ("active", active)):
            if not isinstance(v, int) or v < (1 if n == "active" else 0):
                raise FlycudaError(f"profile: {n} must be an integer >= {1 if n == 'active' else 0}, got {v!r}")
        self.trace_path = trace_path
        self.cuda = torch.cuda.is_available() if cuda is None else cuda
        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(
            activities=acts, schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=self._ready, record_shapes=False)
        self.ready = False

    def _ready(self, prof):
        self.ready = True
        if self.trace_path:
            tmp = self.trace_path + ".part.json"
            prof.export_chrome_trace(tmp)
            os.replace(tmp, self.trace_path)

    def __enter__(self):
        self._prof.__enter__()
        return self

    def __exit__(self, *exc):
        return self._prof.__exit__(*exc)

    def step(self) -> None:
        """Marks the end of one loop step."""
        self._prof.step()

    def summary(self, top: int = 10) -> str:
        """Top ops/kernels by self time and, on CUDA, the gaps between kernels."""
        if not self.ready:
            return "profile: no active steps were recorded (run more steps than wait + warmup)"
        ev = self._prof.key_averages()
        key = "self_device_time_total" if self.cuda else "self_cpu_time_total"
        lines = [ev.table(sort_by=key, row_limit=top)]
        if self.cuda:
            kernels = sorted((e for e in self._prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                             key=lambda e: e.time_range.start)
            gaps = [b.time_range.start - a.time_range.end for a, b in zip(kernels, kernels[1:])
                    if b.time_range.start >= a.time_range.end]
            if gaps:
                gaps.sort()
                lines.append(f"GPU idle between kernels: {len(gaps)} gaps, median {gaps[len(gaps) // 2]:.1f} us, "
                             f"max {gaps[-1]:.1f} us, total {sum(gaps):.0f} us")
        return "\n".join(lines)
