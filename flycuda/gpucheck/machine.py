"""gpu-check's view of the machine: the environment it reports (the GPU, the driver, the CUDA
runtime and driver as they report themselves, torch, Warp, MuJoCo Warp, flycuda's build), and the
toolkit's nvcc and compute-sanitizer."""

from __future__ import annotations

import ctypes
import datetime
import os
import shutil
import subprocess
import sys

import torch

import flycuda

from .._buildcfg import cuda_version, find_cuda_home
from ..driver import driver_cuda

__all__ = ["environment", "cuda_runtime_version", "find_nvcc", "compute_sanitizer"]


def environment() -> dict:
    """GPU, driver, CUDA runtime, torch, warp, mujoco-warp and flycuda's build."""

    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "python": sys.version.split()[0], "torch": torch.__version__,
           "torch_cuda_compiled": torch.version.cuda,
           "flycuda": flycuda.__version__, "flycuda_build": flycuda.build_info(),
           "flycuda_cuda_kernels": flycuda.has_cuda_ops()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = f"{props.name} (sm_{props.major}{props.minor}, {props.total_memory / 2**30:.0f} GiB)"
        env["gpus"] = torch.cuda.device_count()
    env["cuda_runtime"] = cuda_runtime_version()
    env["cuda_driver"] = driver_cuda()
    env["driver"] = _nvidia_smi("driver_version")
    for mod in ("warp", "mujoco", "mujoco_warp"):
        try:
            env[mod] = getattr(__import__(mod), "__version__", "?")
        except Exception as e:  # noqa: BLE001 - missing is a fact to report
            env[mod] = f"not importable ({type(e).__name__})"
    env["compute_sanitizer"] = compute_sanitizer()
    return env


def _loaded_library(stem: str) -> str | None:
    """Path of a shared library this process has loaded whose name starts with
    ``stem`` (e.g. the libcudart torch loaded), from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as f:
            for ln in f:
                path = ln.split()[-1] if ln.strip() else ""
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None


def cuda_runtime_version(lib: str | None = None) -> str:
    """The CUDA runtime's own version (cudaRuntimeGetVersion of the libcudart that torch
    loaded, else the system's), not the version torch was compiled with."""
    import torch  # noqa: F401, PLC0415  (loads torch's libcudart where it ships one)

    for cand in ([lib] if lib else [_loaded_library("libcudart"), "libcudart.so", "libcudart.so.13",
                                    "libcudart.so.12"]):
        if not cand:
            continue
        try:
            rt = ctypes.CDLL(cand)
        except OSError:
            continue
        v = ctypes.c_int(0)
        if rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
            return f"{cuda_version(v.value)} ({os.path.basename(cand)})"
    return "unknown (no libcudart could be loaded)"


def _nvidia_smi(field: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return "unknown (no nvidia-smi)"
    try:
        out = subprocess.run([exe, f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def find_nvcc() -> str | None:
    """The toolkit's nvcc (PATH, else the CUDA toolkit), or None."""
    home = find_cuda_home()
    cand = os.path.join(home, "bin", "nvcc") if home else None
    return cand if cand and os.path.isfile(cand) else shutil.which("nvcc")


def compute_sanitizer() -> str | None:
    """Path of compute-sanitizer (PATH, else the CUDA toolkit), or None."""
    exe = shutil.which("compute-sanitizer")
    home = find_cuda_home()
    if not exe and home:
        cand = os.path.join(home, "bin", "compute-sanitizer")
        exe = cand if os.path.isfile(cand) else None
    return exe
