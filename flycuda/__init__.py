"""flycuda: CUDA kernels for the per-step glue of batched MuJoCo Warp fly simulations.

The ops (each with a C++ CPU twin and Python references in :mod:`flycuda.reference`):
* :func:`motion_to_ctrl` — each world's target angles from a motion buffer at the
  device-side step counter, into the controls (optionally advancing the counter);
* :func:`spline_to_ctrl` — the same with FlyGym's cubic resampling, evaluated on
  the device from per-frame spline pieces (:func:`spline_coeffs`);
* :func:`advance_step` — the device-side step counter (:func:`new_step_counter`), advanced in place;
* :func:`record_qpos` — joint angles recorded into a history buffer;
* :func:`record_chunk` — columns of any per-world array recorded into a ring of
  chunks that :mod:`flycuda.recording` streams to a zarr store;
* :func:`render_tiles` — every world's camera view ray-cast into image tiles;
* :func:`pool_ommatidia` — eye images pooled into FlyGym's ommatidia readouts;
* :mod:`flycuda.ops.episode` — a batched environment's step (per-world counters,
  actions, observations, terminations, resets), used by :mod:`flycuda.env`.

The stages, one subpackage each: :mod:`~flycuda.ops`, :mod:`~flycuda.sim`,
:mod:`~flycuda.recording`, :mod:`~flycuda.render`, :mod:`~flycuda.vision`,
:mod:`~flycuda.replay`, :mod:`~flycuda.env`, :mod:`~flycuda.cli`. The main classes are here too, imported
on first use (``flycuda.Sim``, ``Motion``, ``Recording``, ``TileRenderer``, ``Vision``,
``RetinaMap``): ``import flycuda`` loads the ops only, never Warp.
"""

import importlib

from ._ext import build_info, cuda_ready, has_cuda_ops
from .errors import FlycudaError
from .ops import (
    advance_step,
    motion_to_ctrl,
    new_step_counter,
    pool_ommatidia,
    record_chunk,
    record_qpos,
    render_tiles,
    spline_coeffs,
    spline_to_ctrl,
)

__version__ = "0.2.0"

__all__ = ["motion_to_ctrl", "spline_to_ctrl", "spline_coeffs", "advance_step", "record_qpos", "record_chunk",
           "new_step_counter", "render_tiles", "pool_ommatidia", "has_cuda_ops", "cuda_ready", "build_info",
           "FlycudaError", "__version__", "Sim", "Motion", "Recording", "TileRenderer", "Vision", "RetinaMap"]

# name -> the module that defines it, imported on first access
_LAZY = {"Sim": "flycuda.sim", "Motion": "flycuda.sim", "Recording": "flycuda.recording",
         "TileRenderer": "flycuda.render", "Vision": "flycuda.vision", "RetinaMap": "flycuda.vision"}
_SUBPACKAGES = ("ops", "reference", "sim", "recording", "render", "vision", "replay", "env", "cli", "flygym", "control",
                "errors", "dev", "profile", "brain")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"flycuda.{name}")
    else:
        raise AttributeError(f"module 'flycuda' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
