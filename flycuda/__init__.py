"""flycuda: CUDA kernels for the per-step glue of batched MuJoCo Warp fly simulations.

The ops (each with a C++ CPU twin and Python references in
:mod:`flycuda.reference`):

* :func:`motion_to_ctrl` — each world's target angles from a motion buffer at the
  device-side step counter, into the controls (optionally advancing the counter);
* :func:`spline_to_ctrl` — the same with FlyGym's cubic resampling, evaluated on
  the device from per-frame spline pieces (:func:`spline_coeffs`);
* :func:`advance_step` — the device-side step counter, advanced in place;
* :func:`record_qpos` — joint angles recorded into a history buffer;
* :func:`record_chunk` — columns of any per-world array recorded into a ring of
  chunks that :mod:`flycuda.recording` streams to a zarr store;
* :func:`render_tiles` — every world's camera view ray-cast into image tiles;
* :func:`pool_ommatidia` — eye images pooled into FlyGym's ommatidia readouts
  (the maps: :mod:`flycuda.retina`).
"""

from ._ext import build_info, cuda_ready, has_cuda_ops
from .ops import (advance_step, motion_to_ctrl, new_step_counter, pool_ommatidia, record_chunk, record_qpos,
                  render_tiles, spline_to_ctrl)
from .spline import spline_coeffs
from . import reference, retina

__version__ = "0.1.0"

__all__ = ["motion_to_ctrl", "spline_to_ctrl", "spline_coeffs", "advance_step", "record_qpos", "record_chunk", "new_step_counter", "render_tiles", "pool_ommatidia",
           "has_cuda_ops", "cuda_ready", "build_info", "reference", "retina", "__version__"]
