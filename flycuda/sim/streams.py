"""One CUDA stream shared by torch and Warp, and CUDA-graph capture on it.

flycuda's ops launch on torch's current stream; MuJoCo Warp launches on Warp's
current stream. For the two to be ordered without host syncs, and for a step to
be capturable into one CUDA graph, both must be the same stream, and it must not
be the legacy default (NULL) stream: ``cudaStreamBeginCapture`` refuses that one.
:func:`shared_stream` provides such a stream; :func:`capture_graph` captures on
it and refuses the default stream with a clear error instead of CUDA's.

Every capture in flycuda (replay, benchmarks, self-check) goes through here.
The capture is Warp's (``wp.ScopedCapture``), which torch's caching allocator
does not know about: a torch tensor allocated while it runs would be freed after
the capture and its memory reused while the graph still reads and writes it.
:func:`capture_graph` therefore refuses any allocation by torch's allocator
during the capture, with an error that names the op (:func:`allocation_guard`).
Warp's current stream is one setting per device for the whole process (torch's
is per thread), so use :func:`shared_stream` from one thread per device.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .._ext import capturing  # the check lives below sim and recording, which both need it
from ..errors import CaptureAllocationError, CaptureError, ConditionalCaptureError

__all__ = ["shared_stream", "capture_graph", "launch_graph", "capturing", "allocation_guard",
           "CaptureAllocationError", "warp_on_torch_stream", "device_branches", "run_if"]


@contextlib.contextmanager
def shared_stream(device: torch.device | str) -> Iterator[torch.cuda.Stream | None]:
    """Makes a new (non-default) torch stream on ``device`` current for torch and Warp.

    Work queued on the device's current stream before entering runs first; work
    queued inside runs before anything queued on it after leaving. On a CPU
    device nothing changes and None is yielded.
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        yield None
        return
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    dev = torch.device("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    outer = torch.cuda.current_stream(dev)
    stream = torch.cuda.Stream(device=dev)
    stream.wait_stream(outer)
    try:
        # sync_exit: Warp's previous stream waits for this one on exit.
        with torch.cuda.device(dev), torch.cuda.stream(stream), \
                wp.ScopedStream(wp.stream_from_torch(stream), sync_exit=True):
            yield stream
    finally:
        outer.wait_stream(stream)


def warp_on_torch_stream(wp_device: str, cache: dict):
    """Binds Warp's current stream on ``wp_device`` to torch's current stream there (a
    context manager), so that MuJoCo Warp's launches and flycuda's ops in it are ordered
    on one stream, whatever stream the caller made current (``torch.cuda.stream(s)``), and
    Warp's own stream waits for it on exit (later Warp work stays ordered after it).
    ``cache`` (one per long-lived owner) keeps one Warp stream object per torch stream:
    a temporary one would unregister the stream from Warp when collected. Torch's legacy
    default stream: nothing when Warp's stream is blocking (ordered with it by CUDA),
    else Warp's null stream. Nothing on the CPU or when Warp is already on torch's stream."""
    if not str(wp_device).startswith("cuda"):
        return contextlib.nullcontext()
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    ts = torch.cuda.current_stream(torch.device(wp_device))
    current = wp.get_stream(wp_device)
    if current.cuda_stream == ts.cuda_stream:
        return contextlib.nullcontext()
    if ts.cuda_stream == 0:
        if current.is_blocking:
            return contextlib.nullcontext()
        return wp.ScopedStream(wp.get_device(wp_device).null_stream, sync_exit=True)
    if ts.cuda_stream not in cache:
        cache[ts.cuda_stream] = (ts, wp.stream_from_torch(ts))  # keeps both alive
    return wp.ScopedStream(cache[ts.cuda_stream][1], sync_exit=True)


def _check_capturable(wp_device: str) -> None:
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    dev = torch.device(wp_device)
    current = torch.cuda.current_stream(dev)
    if current.cuda_stream == 0:  # the legacy NULL stream
        raise CaptureError("flycuda: cannot capture a CUDA graph on the legacy default stream; "
                           "wrap the capture in `with flycuda.sim.streams.shared_stream(device):`")
    warp_stream = wp.get_stream(wp_device).cuda_stream
    if warp_stream != current.cuda_stream:
        raise CaptureError("flycuda: torch's current stream and Warp's differ, so a captured step would not "
                           "be ordered; wrap it in `with flycuda.sim.streams.shared_stream(device):`")


def _torch_allocations(device: torch.device) -> int:
    """How many allocations torch's caching allocator has served on ``device`` so far
    (cached blocks included: each is memory the allocator may hand out again); 0 on
    the CPU, which has no such count."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.memory_stats(device).get("allocation.all.allocated", 0))


def _new_storages(out, inputs: set, device: torch.device) -> list[torch.Tensor]:
    """The tensors of an op's result on ``device`` whose memory none of its inputs had."""
    return [t for t in tree_flatten(out)[0]
            if isinstance(t, torch.Tensor) and t.device == device and t.untyped_storage().nbytes() > 0
            and t.untyped_storage().data_ptr() not in inputs]


class _AllocationGuardMode(TorchDispatchMode):
    """Sees every op torch dispatches: an op that returns new memory on the device, or
    during which the allocator's count grew, is refused by name."""

    def __init__(self, device: torch.device, where: str):
        super().__init__()
        self.device, self.where = device, where

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor) and t.device == self.device}
        before = _torch_allocations(self.device)
        out = func(*args, **kwargs)
        grew = _torch_allocations(self.device) - before
        new = _new_storages(out, inputs, self.device)
        if grew > 0 or new:
            what = (f"returned {len(new)} new tensor(s) ({', '.join(f'{tuple(t.shape)} {t.dtype}' for t in new)})"
                    if new else f"made {grew} allocation(s) inside")
            raise CaptureAllocationError(
                f"flycuda: op {func} allocated memory from torch's caching allocator on {self.device} during "
                f"{self.where} ({what}); torch does not know about this capture, so the memory would be "
                f"reused while the graph still uses it. Allocate it before the capture and write into it "
                f"in place (out=, copy_, the ops' preallocated outputs).")
        return out


@contextlib.contextmanager
def allocation_guard(device: torch.device | str, where: str = "a CUDA-graph capture") -> Iterator[None]:
    """Raises :class:`CaptureAllocationError`, naming the op, if torch's caching
    allocator allocates on ``device`` inside the block: per op that torch
    dispatches (an op returning new memory on the device, or one during which the
    allocator's count grew), then for the whole block (an allocation outside any
    dispatched op). Used by :func:`capture_graph`; cheap enough for a capture, not
    for a hot loop."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    before = _torch_allocations(dev)
    with _AllocationGuardMode(dev, where):
        yield
    grew = _torch_allocations(dev) - before
    if grew > 0:
        raise CaptureAllocationError(
            f"flycuda: torch's caching allocator made {grew} allocation(s) on {dev} during {where}, outside "
            f"any op torch dispatches; torch does not know about this capture, so the memory would be reused "
            f"while the graph still uses it. Allocate before the capture.")


def capture_graph(fn: Callable[[], None], wp_device: str, repeat: int = 1):
    """Captures ``repeat`` calls of ``fn`` into one CUDA graph (a Warp graph) on the
    shared stream, and returns it. Call inside :func:`shared_stream`, after a
    warm-up call of ``fn`` (Warp compiles kernels on first use). Raises
    :class:`CaptureAllocationError`, naming the op, if anything in ``fn`` allocates
    from torch's caching allocator (see :func:`allocation_guard`)."""
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    _check_capturable(wp_device)
    with wp.ScopedCapture(device=wp_device, stream=wp.get_stream(wp_device)) as cap:
        with allocation_guard(wp_device, f"the CUDA-graph capture of {getattr(fn, '__qualname__', fn)!r}"):
            for _ in range(repeat):
                fn()
    return cap.graph


def device_branches(wp_device) -> bool:
    """Can a graph captured on ``wp_device`` branch on the device: a CUDA device, with Warp's
    conditional graph nodes (``wp.capture_if``: a CUDA 12.4+ toolkit and driver)?"""
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    return wp.get_device(wp_device).is_cuda and wp.is_conditional_graph_supported()


def run_if(flag: torch.Tensor, fn: Callable[[], None]) -> None:
    """Runs ``fn`` when ``flag`` (int32 [1], on the device the work runs on) is nonzero. Inside a
    capture (:func:`capture_graph`) ``fn``'s work becomes a conditional node of the graph, which
    the device decides at each launch from the flag's value then, with no host sync (CUDA 12.4+:
    :func:`device_branches`); outside one the flag is read on the host (on CUDA a sync). Raises
    :class:`ConditionalCaptureError` when the node cannot be made (``fn``'s own errors pass as
    they are), and :class:`CaptureError` for a flag that is not the capture's device's."""
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    if flag.dtype != torch.int32 or flag.numel() != 1:
        raise CaptureError(f"run_if's flag must be int32 with one element, got {flag.dtype} {list(flag.shape)}")
    live = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    if live and (flag.device.type != "cuda" or flag.device.index != torch.cuda.current_device()):
        raise CaptureError(f"run_if's flag must be on the device being captured (cuda:"
                           f"{torch.cuda.current_device()}), got {flag.device}: it would be read once, now")

    def body() -> None:
        try:
            fn()
        except BaseException as e:
            e.flycuda_run_if_body = True  # (its own error: not the conditional node's)
            raise

    try:
        wp.capture_if(wp.from_torch(flag, dtype=wp.int32), on_true=body)
    except RuntimeError as e:
        if not live or getattr(e, "flycuda_run_if_body", False):
            raise
        raise ConditionalCaptureError(f"flycuda: a conditional graph node could not be made: {e}") from e


def launch_graph(graph) -> None:
    """Launches a graph from :func:`capture_graph` on Warp's current stream."""
    import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

    wp.capture_launch(graph)
