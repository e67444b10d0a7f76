"""How flycuda's extension is compiled: one place for setup.py and flycuda.dev.

setup.py loads this file by path (before the package can be imported), so it
imports nothing from flycuda and nothing beyond the standard library.
"""

from __future__ import annotations

import os
import shutil
import sys

# A100, RTX 30xx/A40, RTX 40xx/L40, H100/H200; +PTX of the newest so that newer
# GPUs (e.g. Blackwell) JIT-compile it instead of failing with "no kernel image".
DEFAULT_ARCHS = "8.0;8.6;8.9;9.0+PTX"

# Host code: no FMA contraction (GCC contracts a*b+c with -march=haswell/native
# on x86 and by default on aarch64), so the CPU twins round like the references.
HOST_FLAGS = ["-O3", "-ffp-contract=off"]
# Device code: no FMA contraction either (--fmad=false), so CUDA rounds like the
# CPU twins and CPU == CUDA bit for bit; host code compiled by nvcc likewise.
# IEEE division/sqrt and no flush-to-zero, said explicitly (nvcc's defaults, but
# NVCC_APPEND_FLAGS could slip in -use_fast_math otherwise unnoticed).
NVCC_FLAGS = ["-O3", "-lineinfo", "--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false",
              "-Xcompiler", "-ffp-contract=off"]


def cuda_version(v: int) -> str:
    """"12.8" of CUDA's integer version 12080 (cudaRuntimeGetVersion, cuDriverGetVersion, Warp's)."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def openmp_flags() -> list[str]:
    """-fopenmp where GCC/Clang support it: torch's at::parallel_for is an inline
    OpenMP region, so without it the CPU kernels run on one thread."""
    return [] if sys.platform == "darwin" else ["-fopenmp"]


def find_cuda_home() -> str | None:
    """CUDA_HOME (or CUDA_PATH) from the environment, else the toolkit that holds nvcc,
    else /usr/local/cuda; None when none has cuda_runtime.h."""
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    cands.append("/usr/local/cuda")
    for cand in cands:
        if cand and os.path.isfile(os.path.join(cand, "include", "cuda_runtime.h")):
            return cand
    return None


def with_newest_ptx(archs: str) -> str:
    """``archs`` (TORCH_CUDA_ARCH_LIST syntax) with +PTX on its newest arch, unless
    some entry already has it. "8.0;9.0" -> "8.0;9.0+PTX"."""
    entries = [a.strip() for a in archs.replace(" ", ";").split(";") if a.strip()]
    if not entries or any(a.endswith("+PTX") for a in entries):
        return ";".join(entries)

    def key(a: str) -> tuple[int, ...]:
        return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in a.split("."))

    newest = max(range(len(entries)), key=lambda i: key(entries[i]))
    entries[newest] += "+PTX"
    return ";".join(entries)


def build_info_name() -> str:
    """File name of the build record setup.py writes next to the extension, one per
    interpreter (e.g. ``_build_info.cpython-312.json``), so lanes on different
    Pythons can share a checkout."""
    import sys  # noqa: PLC0415  (lazy: setup.py runs this file before torch exists)

    return f"_build_info.{sys.implementation.cache_tag}.json"
