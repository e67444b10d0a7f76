"""Can this machine's NVIDIA driver run flycuda's CUDA kernels: one judge, one wording.

``flycuda doctor``, the automatic device choice (:func:`flycuda.sim.mjwarp.warp_device_for`),
the replay and the environments all ask :func:`kernels_problem`, so a driver too old for the
kernels is refused before any work, in the same one line everywhere.

The rules (NVIDIA's CUDA compatibility guide):

- kernels built with CUDA X.y run on a driver for CUDA X.z, z < y, as long as the GPU runs
  their SASS (CUDA's minor-version compatibility, from CUDA 11 on); PTX, which the driver
  compiles for a GPU that has no SASS of its own in the binary, needs a driver for X.y or
  newer;
- a driver for an older major CUDA (12.x under 13.0 kernels) runs none of them.

The facts come from the driver (``cuDriverGetVersion`` through ``libcuda.so.1``, no torch or
Warp needed) and from flycuda's build record; tests stub them.
"""

from __future__ import annotations

import ctypes

import torch

from . import _ext
from ._buildcfg import cuda_version

__all__ = ["driver_cuda", "version_tuple", "arch_coverage", "arch_problem", "kernel_support", "kernels_problem",
           "MIN_DRIVER"]

# The oldest Linux driver branch for each major CUDA (its first release's driver).
MIN_DRIVER = {11: "R450", 12: "R525", 13: "R580"}


def version_tuple(v) -> tuple[int, int] | None:
    """(major, minor) of "12.8", "12.8 (libcudart.so)" or "13.0+PTX"; None when unknown."""
    try:
        major, minor = str(v).split()[0].replace("+PTX", "").split(".")[:2]
        return int(major), int(minor)
    except (ValueError, IndexError):
        return None


def driver_cuda(lib: str = "libcuda.so.1") -> str:
    """The CUDA version the installed driver supports ("12.8", from cuDriverGetVersion), or
    "unknown (...)" saying why it could not be read (no NVIDIA driver)."""
    try:
        drv = ctypes.CDLL(lib)
    except OSError:
        return f"unknown ({lib} not loadable: no NVIDIA driver)"
    v = ctypes.c_int(0)
    err = drv.cuDriverGetVersion(ctypes.byref(v))
    return cuda_version(v.value) if err == 0 else f"unknown (cuDriverGetVersion error {err})"


def arch_coverage(capability: tuple[int, int], archs: str | None) -> str | None:
    """How kernels built for ``archs`` (TORCH_CUDA_ARCH_LIST syntax) run on a GPU of
    ``capability``: "SASS 9.0", "PTX 9.0, compiled by the driver on first use", or None when
    they cannot. SASS runs on its own major version at an equal or higher minor; PTX on any
    equal or newer GPU."""
    if not archs:
        return None
    best_sass = best_ptx = None
    for a in archs.replace(",", ";").split(";"):
        a = a.strip()
        v = version_tuple(a)
        if v is None:
            continue
        if v[0] == capability[0] and v[1] <= capability[1]:
            best_sass = max(best_sass or v, v)
        if a.endswith("+PTX") and v <= capability:
            best_ptx = max(best_ptx or v, v)
    if best_sass:
        return f"SASS {best_sass[0]}.{best_sass[1]}"
    if best_ptx:
        return f"PTX {best_ptx[0]}.{best_ptx[1]}, compiled by the driver on first use (slow once)"
    return None


def kernel_support(driver: str | None, kernels: str | None, *, ptx: bool = False) -> str | None:
    """Why a driver for CUDA ``driver`` cannot run kernels built with CUDA ``kernels``, in one
    line naming both and what to install; None when it can (or when either is unknown).
    ``ptx``: the GPU runs the kernels' PTX (no SASS of its own), which needs a driver at least
    as new as the kernels' toolkit."""
    d, k = version_tuple(driver), version_tuple(kernels)
    if d is None or k is None or d >= k or (d[0] == k[0] and not ptx):
        return None
    newer = f"a driver for CUDA >= {k[0]}.{k[1] if d[0] == k[0] else 0}"
    if d[0] == k[0]:  # the same major: only PTX needs the newer minor
        why = (f"this GPU runs flycuda's PTX, built with CUDA {kernels}, which the driver compiles; the NVIDIA "
               f"driver supports CUDA {driver}")
    else:
        why = f"flycuda's kernels are built with CUDA {kernels}; the NVIDIA driver supports CUDA {driver}"
    branch = MIN_DRIVER.get(k[0])
    return (f"{why}: update the driver ({newer}{', ' + branch + '+' if branch and not d[0] == k[0] else ''}), or "
            f"install flycuda built with CUDA {d[0]}.x (the released wheel is built with CUDA 12 and runs from "
            f"R525 up; from source: CUDA_HOME=<a CUDA {d[0]}.x toolkit> pip install flycuda-*.tar.gz), "
            "or pass device='cpu'")


def kernels_problem(capability: tuple[int, int] | None = None, *, driver: str | None = None,
                    info: dict | None = None, index: int | None = None) -> str | None:
    """:func:`kernel_support` for this machine: the installed driver against flycuda's built
    kernels (their CUDA and archs) on a GPU of ``capability`` (None: torch's current GPU,
    when torch sees one; ``index``: that CUDA device's instead), and whether the kernels cover
    that GPU's arch at all. ``driver`` and ``info`` (the build record) stand in for the
    machine's in tests. None when flycuda has no CUDA kernels or the driver is unknown."""
    info = _ext.build_info() if info is None else info
    if not info.get("with_cuda"):
        return None
    driver = driver_cuda() if driver is None else driver
    if version_tuple(driver) is None or version_tuple(info.get("cuda")) is None:
        return None
    if capability is None:
        capability = torch.cuda.get_device_capability(index) if torch.cuda.is_available() else None
    coverage = arch_coverage(capability, info.get("archs")) if capability else None
    if capability and coverage is None:
        return arch_problem(capability, info.get("archs"))
    return kernel_support(driver, info.get("cuda"), ptx=bool(coverage and coverage.startswith("PTX")))


def arch_problem(capability: tuple[int, int], archs: str | None, name: str = "this GPU") -> str:
    """The one line for a GPU (``name``) that flycuda's kernels (built for ``archs``) do not cover."""
    cap = "%d.%d" % tuple(capability)
    return (f"{name} is sm_{cap.replace('.', '')}, which flycuda's kernels ({archs}) do not cover: rebuild with "
            f"TORCH_CUDA_ARCH_LIST={cap} (or {cap}+PTX), or pass device='cpu'")
