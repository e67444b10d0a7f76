"""The stream shared by torch and Warp, graph capture on it, and concurrent fused launches.

CPU: the helpers are no-ops there, and every capture in the repository goes through
flycuda.sim.streams (a capture on the legacy default stream cannot come back silently).
GPU: the shared stream is a real non-default stream seen by both torch and Warp,
capture on the legacy stream is refused with flycuda's error, and two fused
motion_to_ctrl launches on different counters and streams overlap correctly.
"""

import os
import re

import pytest
import torch

import flycuda
from flycuda.ops import launch_plan
from flycuda.sim import streams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What starts a Warp capture or hands torch's stream to Warp. (torch.cuda.graph is
# fine anywhere: it captures on a side stream of its own.)
CAPTURE_CALLS = re.compile(r"ScopedCapture|capture_begin|stream_from_torch|ScopedStream")


def test_shared_stream_is_a_no_op_on_cpu():
    with streams.shared_stream("cpu") as s:
        assert s is None
    assert streams.capturing("cpu") is False


def test_every_capture_goes_through_flycuda_streams():
    """Benchmarks, replay, notebooks and the self-check capture Warp work only via
    flycuda.sim.streams, which never captures on the legacy default stream."""
    offenders = []
    for top in ("flycuda", "bench", "notebooks"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                path = os.path.join(dirpath, name)
                if not name.endswith((".py", ".ipynb")) or path.endswith(os.path.join("flycuda", "sim", "streams.py")):
                    continue
                with open(path, encoding="utf-8") as f:
                    for i, line in enumerate(f, 1):
                        if CAPTURE_CALLS.search(line):
                            offenders.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}")
    assert not offenders, "capture outside flycuda.sim.streams:\n" + "\n".join(offenders)


@pytest.mark.needs_cuda
@pytest.mark.needs_warp
def test_shared_stream_is_shared_and_not_default():
    import warp as wp

    with streams.shared_stream("cuda") as s:
        assert s.cuda_stream != 0 and s.cuda_stream == torch.cuda.current_stream().cuda_stream
        assert wp.get_stream("cuda:0").cuda_stream == s.cuda_stream


@pytest.mark.needs_cuda
@pytest.mark.needs_warp
def test_capture_on_legacy_stream_is_refused_clearly():
    import warp as wp

    wp.init()
    x = torch.zeros(4, device="cuda")
    with pytest.raises(RuntimeError, match="legacy default stream"):
        streams.capture_graph(lambda: x.add_(1), "cuda:0")
    with streams.shared_stream("cuda"):
        x.add_(1)  # warm-up
        graph = streams.capture_graph(lambda: x.add_(1), "cuda:0", repeat=3)
        for _ in range(2):
            streams.launch_graph(graph)
    torch.cuda.synchronize()
    assert x.tolist() == [7.0] * 4


@pytest.mark.needs_cuda
@pytest.mark.parametrize("kind", ["sliced-1", "sliced-2", "new_step_counter"])
def test_fused_launches_on_two_counters_and_streams_overlap(kind):
    """Two counters, launches alternating between two streams with no ordering between
    them: [1] or [2] counters side by side in one buffer (unfused: a [2] sliced from
    a bigger buffer is not mistaken for a new_step_counter, whose ticket would be the
    other counter's step), or two new_step_counters (fused, a ticket each)."""
    W, D, T, reps = 4096, 42, 600, 250  # 672 blocks per launch
    motion = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(1, T, D).contiguous().cuda()
    ids = torch.arange(D, device="cuda")
    size = 1 if kind == "sliced-1" else 2
    store = torch.zeros(2 * size, dtype=torch.int64, device="cuda")
    counters = ([store[:size], store[size:]] if kind != "new_step_counter"
                else [flycuda.new_step_counter("cuda"), flycuda.new_step_counter("cuda")])
    ctrls = [torch.full((W, D), -1.0, device="cuda") for _ in range(2)]
    hist = [torch.zeros(reps, dtype=torch.float32, device="cuda") for _ in range(2)]
    pair = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    for r in range(reps):
        for i in range(2):
            with torch.cuda.stream(pair[i]):
                flycuda.motion_to_ctrl(motion, counters[i], ctrls[i], ids, advance=1)
                # every world of this launch read step r: min == max == r
                hist[i][r] = ctrls[i].amin() + 1000 * (ctrls[i].amax() - ctrls[i].amin())
    torch.cuda.synchronize()
    for i in range(2):
        assert int(counters[i][0]) == reps
        if size == 2:
            assert int(counters[i][1]) == 0
        if kind == "new_step_counter":
            assert launch_plan.ticket_of(counters[i]).tolist() == [0]
        assert torch.equal(hist[i].cpu(), torch.arange(reps, dtype=torch.float32))


# --- the capture guard: no allocation by torch's allocator inside a Warp capture ---------

def test_allocation_guard_names_the_op_that_allocates():
    """An op returning new memory inside the guard is refused by name (CPU: the guard
    watches the device given; on CUDA it also watches the caching allocator's count)."""
    x = torch.zeros(4)
    with pytest.raises(streams.CaptureAllocationError, match=r"op aten\.\w+.*allocated memory.*cpu"):
        with streams.allocation_guard("cpu"):
            x.add_(1)
            y = x * 2  # a new tensor: the allocation a graph would lose
            del y
    with pytest.raises(streams.CaptureAllocationError, match=r"aten\.clone"):
        with streams.allocation_guard("cpu"):
            x.clone()


def test_allocation_guard_allows_in_place_work_and_views():
    x, step = torch.zeros(3, 4), flycuda.new_step_counter("cpu")
    motion, ids = torch.randn(1, 5, 4), torch.arange(4)
    with streams.allocation_guard("cpu"):
        x.add_(1)
        x[0].mul_(2)  # a view
        x.t().copy_(x.t())
        flycuda.motion_to_ctrl(motion, step, x, ids, advance=1)  # flycuda's ops work in place
        flycuda.advance_step(step, 1)
        torch.empty(0)  # no memory
    assert int(step[0]) == 2


def test_allocation_guard_ignores_other_devices():
    with streams.allocation_guard(torch.device("meta")):
        torch.zeros(3)  # CPU memory while the (meta) capture device is guarded


def test_allocation_guard_counts_allocations_inside_an_op(monkeypatch):
    """An op whose result is no new tensor but which allocated inside (a temporary from
    the caching allocator): named by the allocator's count around it (mocked on CPU)."""
    count = {"n": 0}
    monkeypatch.setattr(streams, "_torch_allocations", lambda device: count["n"])

    @torch.library.custom_op("flycuda_test::scratch_op", mutates_args=("x",))
    def scratch_op(x: torch.Tensor) -> None:
        count["n"] += 1  # as CUDACachingAllocator counts a served allocation
        x.add_(1)

    x = torch.zeros(2)
    with pytest.raises(streams.CaptureAllocationError, match=r"flycuda_test\.scratch_op.*1 allocation"):
        with streams.allocation_guard("cpu"):
            x.mul_(1)
            scratch_op(x)


def test_allocation_guard_counts_allocations_outside_ops(monkeypatch):
    count = {"n": 0}
    monkeypatch.setattr(streams, "_torch_allocations", lambda device: count["n"])
    with pytest.raises(streams.CaptureAllocationError, match="outside any op torch dispatches"):
        with streams.allocation_guard("cpu"):
            count["n"] += 2  # e.g. a C++ extension calling the allocator directly


def test_capture_graph_is_guarded(monkeypatch):
    """capture_graph runs the captured function under the guard: an allocation names
    the op and the captured function (Warp mocked: no GPU here)."""
    import sys
    import types

    events = []

    class ScopedCapture:
        def __init__(self, device, stream):
            self.graph = "graph"

        def __enter__(self):
            events.append("begin")
            return self

        def __exit__(self, *exc):
            events.append("end")
            return False

    fake_wp = types.SimpleNamespace(ScopedCapture=ScopedCapture, get_stream=lambda dev: None)
    monkeypatch.setitem(sys.modules, "warp", fake_wp)
    monkeypatch.setattr(streams, "_check_capturable", lambda dev: None)
    x = torch.zeros(3)

    def good_step():
        x.add_(1)

    def bad_step():
        x.add_(1)
        return torch.cat([x, x])

    assert streams.capture_graph(good_step, "cpu", repeat=3) == "graph" and x.tolist() == [3.0] * 3
    with pytest.raises(streams.CaptureAllocationError, match=r"aten\.cat.*bad_step"):
        streams.capture_graph(bad_step, "cpu")
    assert events == ["begin", "end", "begin", "end"]  # the capture is ended either way
