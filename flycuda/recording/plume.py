"""Odor plumes on disk (issue 41): a concentration grid over time, stored as a zarr v3 group, held
once on the device and read at every world's sensors by :func:`flycuda.ops.odor_plume`.

Layout of a plume store (readable with zarr, without flycuda)::

    plume.zarr/        group; attrs["flycuda_plume"] = {"origin": [x0, y0(, z0)],
                       "spacing": [dx, dy(, dz)], "fps": frames per second, "units": ...}
      plume            float32 [T, X, Y] (the floor plane) or [T, X, Y, Z]: node (i, j[, l]) at
                       origin + (i, j[, l]) * spacing, frame t at t / fps

Bring your own: a plume simulated elsewhere (FlyGym 1.x's ``plume.hdf5`` is [T, Y, X] float16 at
0.5 mm per cell and 200 fps: transpose its last two axes) becomes a store with
:func:`save_plume`; :func:`load_plume` reads it back, refusing a grid without its origin, spacing
or rate.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from ..errors import StoreError
from ..ops import odor_plume
from .store import zarr_module

__all__ = ["Plume", "save_plume", "load_plume", "PLUME_ATTRS"]

PLUME_ATTRS = "flycuda_plume"
"""The group attribute that holds a plume's geometry and rate."""


@dataclass(frozen=True)
class Plume:
    """A plume grid with its geometry: ``grid`` float32 [T, X, Y(, Z)] (contiguous), ``origin`` and
    ``spacing`` (one value per spatial axis, the model's length unit), ``fps`` (frames per second)."""

    grid: torch.Tensor
    origin: tuple[float, ...]
    spacing: tuple[float, ...]
    fps: float

    def __post_init__(self):
        if not (isinstance(self.grid, torch.Tensor) and self.grid.dtype == torch.float32 and self.grid.is_contiguous()):
            raise StoreError("a plume's grid must be a contiguous float32 tensor, got "
                             f"{getattr(self.grid, 'dtype', type(self.grid).__name__)}")
        _check(tuple(self.grid.shape), self.origin, self.spacing, self.fps)

    @property
    def nbytes(self) -> int:
        """The grid's bytes (held once, whatever the number of worlds)."""
        return self.grid.numel() * self.grid.element_size()

    @property
    def duration(self) -> float:
        """Seconds from the first frame to the last."""
        return (self.grid.shape[0] - 1) / self.fps

    def to(self, device) -> "Plume":
        """The same plume with its grid on ``device``."""
        return Plume(self.grid.to(device), self.origin, self.spacing, self.fps)

    def sample(self, sensors: torch.Tensor, time: torch.Tensor, out: torch.Tensor, time_mode: str = "clamp") -> None:
        """:func:`flycuda.ops.odor_plume` with this plume's grid and geometry (``out`` [W, s])."""
        odor_plume(self.grid, sensors, time, out, origin=self.origin, spacing=self.spacing, fps=self.fps,
                   time_mode=time_mode)


def _check(shape: tuple, origin, spacing, fps) -> None:
    if len(shape) not in (3, 4) or 0 in shape:
        raise StoreError(f"a plume is a non-empty [T, X, Y] or [T, X, Y, Z] grid, got shape {list(shape)}")
    dims = len(shape) - 1
    for name, v in (("origin", origin), ("spacing", spacing)):
        if not (isinstance(v, (list, tuple)) and len(v) == dims and all(_finite(x) for x in v)):
            raise StoreError(f"a plume's {name} must be {dims} finite numbers (one per spatial axis), got {v!r}")
    if any(float(x) <= 0 for x in spacing):
        raise StoreError(f"a plume's spacing must be > 0 on every axis, got {list(spacing)}")
    if not (_finite(fps) and float(fps) > 0):
        raise StoreError(f"a plume's fps must be a finite number > 0, got {fps!r}")


def _finite(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def save_plume(path: str, grid, *, origin, spacing, fps: float, units: str = "") -> None:
    """Writes ``grid`` ([T, X, Y] or [T, X, Y, Z], any float array; stored float32, one chunk per
    frame) with its geometry to a new zarr store at ``path``.

    Raises:
        StoreError: a bad shape, origin, spacing or fps, or ``path`` exists.
    """
    zarr = zarr_module()
    g = torch.as_tensor(grid).detach().cpu().to(torch.float32).contiguous()
    _check(tuple(g.shape), origin, spacing, fps)
    try:
        root = zarr.open_group(path, mode="w-")
    except Exception as e:  # noqa: BLE001  (zarr's own error for an existing store varies by version)
        raise StoreError(f"cannot create the plume store {path!r}: {e}") from None
    root.attrs[PLUME_ATTRS] = {"origin": [float(x) for x in origin], "spacing": [float(x) for x in spacing],
                               "fps": float(fps), "units": units}
    arr = root.create_array("plume", shape=tuple(g.shape), dtype="float32", chunks=(1, *g.shape[1:]))
    arr[...] = g.numpy()


def load_plume(path: str, device=None) -> Plume:
    """The plume of the zarr store at ``path`` (:func:`save_plume`'s layout), its grid float32 on
    ``device`` (default the CPU).

    Raises:
        StoreError: no store or no ``plume`` array there, or its origin, spacing or fps missing
            or out of range.
    """
    zarr = zarr_module()
    try:
        root = zarr.open_group(path, mode="r")
        arr = root["plume"]
    except Exception as e:  # noqa: BLE001
        raise StoreError(f"no plume store at {path!r} (a zarr group with an array 'plume'): {e}") from None
    facts = dict(root.attrs).get(PLUME_ATTRS)
    if not isinstance(facts, dict):
        raise StoreError(f"{path!r} has no attrs[{PLUME_ATTRS!r}]: a plume grid needs its origin, spacing and fps "
                         "(flycuda.recording.plume.save_plume writes them)")
    origin, spacing, fps = facts.get("origin"), facts.get("spacing"), facts.get("fps")
    _check(tuple(arr.shape), origin, spacing, fps)
    grid = torch.from_numpy(arr[...]).to(torch.float32).contiguous()
    return Plume(grid.to(device) if device is not None else grid, tuple(float(x) for x in origin),
                 tuple(float(x) for x in spacing), float(fps))
