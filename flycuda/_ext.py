"""Loads the compiled extension ``flycuda._C`` and says what it was built with."""

from __future__ import annotations

import json
import os
import platform

import torch

from ._buildcfg import build_info_name

try:
    from . import _C  # noqa: F401  (runs the TORCH_LIBRARY registrations)
except ImportError as e:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "flycuda's compiled extension flycuda._C could not be loaded ({}). Build it with "
        "`pip install --no-build-isolation -e .` against the torch you run (torch {}).".format(
            e, torch.__version__)
    ) from e

OPS = ("motion_to_ctrl", "spline_to_ctrl", "advance_step", "record_qpos", "record_chunk", "render_tiles",
       "pool_ommatidia", "motion_at", "scatter_actions", "gather_columns", "episode_step", "reset_worlds")


def build_info() -> dict:
    """How flycuda._C was built (written by setup.py): CUDA or not, the CUDA toolkit and
    archs, flags, the torch it was built on and the oldest it runs on (``torch_target``:
    PyTorch's stable ABI); and under ``runs_on`` the torch and Python of this process."""

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), build_info_name())
    try:
        with open(path) as f:
            info = json.load(f)
    except OSError:
        info = {"unknown": f"{path} is missing (built by an older setup.py?)"}
    info["runs_on"] = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                       "python": platform.python_version()}
    return info


def has_cuda_ops() -> bool:
    """True when flycuda._C was built with its CUDA kernels (CUDAExtension)."""
    return all(torch._C._dispatch_has_kernel_for_dispatch_key(f"flycuda::{op}", "CUDA")
               for op in OPS)


def capturing(device: torch.device | str) -> bool:
    """Is torch's current stream on ``device`` being captured into a CUDA graph?
    (Always False on the CPU.)"""
    dev = torch.device(device)
    if dev.type != "cuda":
        return False
    with torch.cuda.device(dev):
        return torch.cuda.is_current_stream_capturing()


def cuda_ready() -> bool:
    """True when the CUDA kernels are built and a CUDA GPU is visible."""
    return has_cuda_ops() and torch.cuda.is_available()
