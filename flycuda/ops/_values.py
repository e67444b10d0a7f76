"""The index-value checks of CUDA inputs, once per tensor version (the wrappers' half
of the ops' checks).

flycuda's extension is built on PyTorch's stable ABI, which has no tensor version
counter to key a cache on. So the C++ ops check index values on the CPU on every call
(a scan, no copy) and never on CUDA, where a check is a device-to-host copy (a
synchronization); the wrappers check a CUDA index tensor here the first time they see
it and again only after it changed (its version, data pointer or size), never while a
CUDA graph is being captured. The messages are the C++ checks' own. The kernels skip
out-of-range entries, so ids that escape the check (written through a Warp alias, or
passed to ``torch.ops.flycuda`` directly) are never a memory error.
"""

from __future__ import annotations

import threading
import weakref

import torch

from .._ext import capturing

__all__ = ["check_index", "check_offsets", "check_min", "check_columns", "seen", "EVERY_DEVICE"]

CHECKED_DEVICES = ("cuda",)  # the C++ ops check CPU inputs themselves (tests check the CPU here too)
# brain_step's connectivity (15 M synapses at FlyWire's scale, read every 0.1 ms step) is checked here on
# every device: a scan per call would cost more than the step (its kernels are safe against any values)
EVERY_DEVICE = ("cuda", "cpu")
_SEEN: dict[tuple, tuple] = {}  # (id(tensor), check) -> (weakref, version, data_ptr, numel): checks passed
_SEEN_MAX = 256
_LOCK = threading.Lock()


def _needs_check(t: torch.Tensor | None, check: tuple, ref: torch.Tensor | None = None,
                 devices: tuple | None = None) -> bool:
    """Is ``t`` a contiguous CUDA index tensor (on ``ref``'s device) that has not passed
    ``check`` as it is now? Anything else is the op's to judge: its metadata checks come
    first and say what is wrong (a device, dtype or shape), and during capture or
    torch.compile's tracing nothing is copied to the host."""
    devices = CHECKED_DEVICES if devices is None else devices  # (read now: the tests widen CHECKED_DEVICES)
    if torch.compiler.is_compiling() or t is None or t.device.type not in devices:
        return False
    entry = _SEEN.get((id(t), check))  # the common case first: passed, unchanged
    if entry is not None and entry[0]() is t and entry[1:] == (_version(t), t.data_ptr(), t.numel()):
        return False
    return (t.dtype in (torch.int32, torch.int64) and t.is_contiguous()
            and (ref is None or ref.device == t.device) and not capturing(t.device))


def _passed(t: torch.Tensor, check: tuple) -> None:
    version = _version(t)
    if version is None:  # an inference tensor has no version: checked on every call
        return
    with _LOCK:
        while len(_SEEN) >= _SEEN_MAX:
            _SEEN.pop(next(iter(_SEEN)))
        _SEEN[(id(t), check)] = (weakref.ref(t), version, t.data_ptr(), t.numel())


def seen(t: torch.Tensor) -> bool:
    """Has ``t`` passed some check as it is now (tests)?"""
    return any(k[0] == id(t) and v[0]() is t for k, v in list(_SEEN.items()))


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # inference tensors
        return None


def _fail(op: str, msg: str) -> None:
    raise RuntimeError(f"flycuda.{op}: {msg}")


def check_index(op: str, name: str, ids: torch.Tensor, bound: int, bound_name: str, unique: bool = False,
                ref: torch.Tensor | None = None, devices: tuple | None = None) -> None:
    """Every entry of the 1-D ``ids`` in [0, bound), and none repeated when ``unique``;
    the first failing position reported, as the op's in-order scan does."""
    check = ("index", op, name, int(bound), unique)
    if ids.dim() != 1 or not _needs_check(ids, check, ref, devices):
        return
    h = ids.cpu().long()
    n = len(h)
    bad = ((h < 0) | (h >= bound)).nonzero().flatten()
    first_bad = int(bad[0]) if len(bad) else n
    later = first = n
    if unique and n:
        order = torch.sort(h, stable=True).indices
        same = (h[order[1:]] == h[order[:-1]]).nonzero().flatten()
        if len(same):
            later, first = min((int(order[j + 1]), int(order[j])) for j in same.tolist())
    if first_bad < n and first_bad <= later:
        _fail(op, f"argument '{name}' must hold indices in [0, {bound}) ({bound_name} = {bound}), got "
                  f"{name}[{first_bad}] = {int(h[first_bad])}")
    if later < n:
        _fail(op, f"argument '{name}' must not repeat an index, got {int(h[later])} at positions {first} and "
                  f"{later}")
    _passed(ids, check)


def check_offsets(op: str, name: str, offsets: torch.Tensor, total: int, total_name: str,
                  ref: torch.Tensor | None = None, devices: tuple | None = None) -> None:
    """CSR offsets: ``offsets[0] == 0``, non-decreasing, ``offsets[-1] == total``."""
    check = ("offsets", op, name, int(total))
    if offsets.dim() != 1 or not _needs_check(offsets, check, ref, devices):
        return
    h = offsets.cpu().long()
    if len(h) < 1 or int(h[0]) != 0:
        _fail(op, f"argument '{name}' must start at 0, got {name}[0] = {int(h[0]) if len(h) else -1}")
    down = (h[1:] < h[:-1]).nonzero()
    if len(down):
        i = int(down[0]) + 1
        _fail(op, f"argument '{name}' must be non-decreasing, got {name}[{i}] = {int(h[i])} < {name}[{i - 1}] = "
                  f"{int(h[i - 1])}")
    if int(h[-1]) != total:
        _fail(op, f"argument '{name}' must end at {total_name} = {total}, got {name}[{len(h) - 1}] = {int(h[-1])}")
    _passed(offsets, check)


def check_min(op: str, name: str, values: torch.Tensor, low: int, ref: torch.Tensor | None = None) -> None:
    """Every entry of the 1-D ``values`` >= ``low``."""
    check = ("min", op, name, int(low))
    if values.dim() != 1 or not _needs_check(values, check, ref):
        return
    h = values.cpu().long()
    bad = (h < low).nonzero()
    if len(bad):
        i = int(bad[0])
        _fail(op, f"argument '{name}' must hold values >= {low}, got {name}[{i}] = {int(h[i])}")
    _passed(values, check)


def check_columns(op: str, columns: torch.Tensor, widths: list[int], ref: torch.Tensor | None = None) -> None:
    """gather_columns' rows (source, column): a source in [0, len(widths)), a column of it."""
    check = ("columns", op, tuple(widths))
    if columns.dim() != 2 or columns.shape[1] != 2 or not _needs_check(columns, check, ref):
        return
    h = columns.cpu().long()
    n = len(widths)
    for o, (s, c) in enumerate(h.tolist()):
        if not 0 <= s < n:
            _fail(op, f"argument 'columns' row {o} names source {s}; there are {n} sources")
        if not 0 <= c < widths[s]:
            _fail(op, f"argument 'columns' row {o} names column {c} of sources[{s}], which has {widths[s]}")
    _passed(columns, check)
