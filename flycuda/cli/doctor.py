"""``flycuda doctor``: can flycuda run on this machine's GPU, and what to do when not.

It reads the facts (torch and the CUDA it was built for, the driver, the GPUs, the CUDA
toolkit, the archs flycuda's extension holds) and judges them: each problem is one line
saying what is wrong and what to do. Exit status 0 when flycuda can run (on the GPU, or on
the CPU where there is none), 1 when a GPU is there that flycuda cannot use.
"""

from __future__ import annotations

import torch

from .. import _ext
from .._buildcfg import find_cuda_home, nvcc_version
from .gpucheck import cuda_driver_version, find_nvcc

__all__ = ["facts", "diagnose", "arch_coverage", "main"]


def _version_tuple(v) -> tuple[int, int] | None:
    """(major, minor) of "12.8" or "12.8 (libcudart.so)"; None when unknown."""
    try:
        major, minor = str(v).split()[0].split(".")[:2]
        return int(major), int(minor)
    except (ValueError, IndexError):
        return None


def facts() -> dict:
    """What doctor judges, gathered from this process and machine."""
    info = _ext.build_info()
    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append({"name": p.name, "capability": (p.major, p.minor)})
    home = find_cuda_home()
    nvcc = find_nvcc()
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "driver_cuda": cuda_driver_version(),
            "built_cuda": info.get("cuda"), "built_torch": info.get("torch"), "torch_target": info.get("torch_target"),
            "gpus": gpus, "toolkit": home, "nvcc": nvcc_version(nvcc),
            "cuda_kernels": _ext.has_cuda_ops(), "archs": info.get("archs"), "build": info}


def arch_coverage(capability: tuple[int, int], archs: str | None) -> str | None:
    """How the extension's archs run on a GPU of ``capability`` ("SASS 9.0", "PTX 9.0,
    compiled by the driver on first use"), or None when they cannot. SASS runs on its own
    major version at an equal or higher minor; PTX on any equal or newer GPU."""
    if not archs:
        return None
    best_sass = best_ptx = None
    for a in archs.replace(",", ";").split(";"):
        a = a.strip()
        v = _version_tuple(a.replace("+PTX", ""))
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


def diagnose(f: dict) -> tuple[list[str], bool]:
    """(report lines, whether flycuda can run) for the facts ``f`` (:func:`facts`)."""
    driver = _version_tuple(f["driver_cuda"])
    torch_cuda = _version_tuple(f["torch_cuda"]) if f["torch_cuda"] else None
    lines = [f"torch          {f['torch']} ({'CUDA ' + f['torch_cuda'] if f['torch_cuda'] else 'a CPU build'})",
             f"driver         {'supports CUDA ' + f['driver_cuda'] if driver else 'none found (no NVIDIA driver)'}",
             f"GPUs (torch)   {', '.join(g['name'] + ' sm_%d%d' % g['capability'] for g in f['gpus']) or 'none'}",
             f"CUDA toolkit   {f['toolkit'] or 'not found'}{' (nvcc ' + f['nvcc'] + ')' if f['nvcc'] else ''}",
             f"flycuda._C     {'CUDA ' + str(f.get('built_cuda') or '?') + ' kernels for ' + str(f['archs']) if f['cuda_kernels'] else 'CPU only'}"
             f"{'; stable ABI: built on torch ' + str(f.get('built_torch')) + ', runs on torch >= ' + f['torch_target'] if f.get('torch_target') else ''}"]
    problems = []
    if driver and not f["gpus"]:
        if torch_cuda is None:
            problems.append(f"torch {f['torch']} is a CPU build but this machine has an NVIDIA driver: install a "
                            f"CUDA build of torch for CUDA <= {f['driver_cuda']} (then rebuild flycuda)")
        elif torch_cuda > driver:
            problems.append(f"torch is built for CUDA {f['torch_cuda']} but the driver supports CUDA "
                            f"{f['driver_cuda']}, so torch sees no GPU: update the NVIDIA driver (for CUDA >= "
                            f"{f['torch_cuda']}) or install a torch built for CUDA <= {f['driver_cuda']}")
        else:
            problems.append("the driver is there but torch sees no GPU (CUDA_VISIBLE_DEVICES? a container "
                            "without the GPU?); check nvidia-smi")
    built = _version_tuple(f.get("built_cuda")) if f["cuda_kernels"] else None
    if f["gpus"] and built and driver and built > driver:
        problems.append(f"flycuda's kernels are built with CUDA {f['built_cuda']} but the driver supports CUDA "
                        f"{f['driver_cuda']}: update the NVIDIA driver (for CUDA >= {f['built_cuda']}) or rebuild "
                        f"flycuda with a CUDA <= {f['driver_cuda']} toolkit (CUDA_HOME=... pip install "
                        "--no-build-isolation -e .)")
    if f["gpus"] and not f["cuda_kernels"]:
        problems.append("flycuda._C was built without its CUDA kernels (no toolkit at build time, or "
                        "FLYCUDA_FORCE_CPU=1): rebuild with a CUDA toolkit, e.g. CUDA_HOME=/usr/local/cuda "
                        "pip install --no-build-isolation -e .")
    for g in f["gpus"] if f["cuda_kernels"] else []:
        how = arch_coverage(g["capability"], f["archs"])
        cap = "%d.%d" % g["capability"]
        if how is None:
            problems.append(f"{g['name']} is sm_{cap.replace('.', '')}, which flycuda's kernels ({f['archs']}) do "
                            f"not cover: rebuild with TORCH_CUDA_ARCH_LIST={cap} (or {cap}+PTX)")
        else:
            lines.append(f"{g['name']:<14} runs flycuda's kernels as {how}")
    if f["gpus"] and f["cuda_kernels"] and not problems:
        lines.append("verdict        ready: flycuda runs on the GPU (bash run.sh gpu-check checks it in full)")
    elif not driver and not f["gpus"]:
        lines.append("verdict        no NVIDIA GPU here: flycuda runs on the CPU (device='cpu')")
    lines += [f"problem        {p}" for p in problems]
    return lines, not problems


def main() -> int:
    """``flycuda doctor``: prints the report; 0 when flycuda can run, 1 otherwise."""
    lines, ok = diagnose(facts())
    print("flycuda doctor")
    for ln in lines:
        print("  " + ln)
    return 0 if ok else 1
