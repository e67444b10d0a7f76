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
from ..driver import arch_coverage, arch_problem, driver_cuda, kernel_support
from ..driver import version_tuple as _version_tuple
from ..gpucheck import find_nvcc

__all__ = ["add_parser", "run", "facts", "diagnose", "main"]


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
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "driver_cuda": driver_cuda(),
            "built_cuda": info.get("cuda"), "built_torch": info.get("torch"), "torch_target": info.get("torch_target"),
            "gpus": gpus, "toolkit": home, "nvcc": nvcc_version(nvcc),
            "cuda_kernels": _ext.has_cuda_ops(), "archs": info.get("archs"), "build": info}


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
    if f["gpus"] and not f["cuda_kernels"]:
        problems.append("flycuda._C was built without its CUDA kernels (no toolkit at build time, or "
                        "FLYCUDA_FORCE_CPU=1): rebuild with a CUDA toolkit, e.g. CUDA_HOME=/usr/local/cuda "
                        "pip install --no-build-isolation -e .")
    for g in f["gpus"] if f["cuda_kernels"] else []:  # one judge with the device choice (flycuda.driver)
        how = arch_coverage(g["capability"], f["archs"])
        why = kernel_support(f["driver_cuda"], f.get("built_cuda"), ptx=bool(how and how.startswith("PTX")))
        if why and why not in problems:
            problems.append(why)
        if how is None:
            problems.append(arch_problem(g["capability"], f["archs"], g["name"]))
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


def add_parser(sub) -> None:
    """The ``doctor`` subcommand."""
    d = sub.add_parser("doctor", help="can flycuda run on this machine's GPU (torch, driver, toolkit, archs), and what "
                                  "to do when not", description="Judges torch and its CUDA, the driver, the GPUs, the "
                                  "CUDA toolkit and the archs in flycuda's extension; exits 1 when a GPU is there that "
                                  "flycuda cannot use.")
    d.set_defaults(run=run)


def run(args) -> int:
    """``flycuda doctor``."""
    return main()
