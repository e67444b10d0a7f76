"""How flycuda's extension is compiled: one place for setup.py and flycuda.dev.

setup.py loads this file by path (before the package can be imported), so it
imports nothing from flycuda and nothing beyond the standard library.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

# A100, RTX 30xx/A40, RTX 40xx/L40, H100/H200, B200/GB200 (and B300: sm_103 runs
# sm_100 code), RTX 50xx/RTX PRO (and sm_121); +PTX of the newest so that newer
# GPUs JIT-compile it instead of failing with "no kernel image".
DEFAULT_ARCHS = "8.0;8.6;8.9;9.0;10.0;12.0+PTX"
# CUDA before 12.8 knows no Blackwell: up to Hopper, whose PTX the driver compiles for newer GPUs.
DEFAULT_ARCHS_BEFORE_12_8 = "8.0;8.6;8.9;9.0+PTX"


def default_archs(toolkit: str | None) -> str:
    """The archs flycuda builds for with the CUDA toolkit of version ``toolkit`` ("12.4")
    when no GPU is visible and TORCH_CUDA_ARCH_LIST is unset."""
    try:
        major, minor = (int(x) for x in str(toolkit).split(".")[:2])
    except ValueError:
        return DEFAULT_ARCHS
    return DEFAULT_ARCHS if (major, minor) >= (12, 8) else DEFAULT_ARCHS_BEFORE_12_8

# PyTorch's stable ABI: the host code uses only torch/csrc/stable and
# torch/headeronly, up to what torch 2.10 has (version.h's encoding: major << 56 |
# minor << 48), and Python's limited API from 3.11, so one binary (an abi3 wheel)
# loads on every torch >= 2.10 and every CPython >= 3.11 (the oldest that flycuda's
# dependencies install on: zarr 3, the recordings' store, needs 3.11).
TORCH_TARGET = (2, 10)
PYTHON_TARGET = (3, 11)
ABI_FLAGS = [f"-DTORCH_TARGET_VERSION=0x{TORCH_TARGET[0]:02x}{TORCH_TARGET[1]:02x}000000000000",
             f"-DPy_LIMITED_API=0x{PYTHON_TARGET[0]:02X}{PYTHON_TARGET[1]:02X}0000"]  # torch's own spelling

# Host code: no FMA contraction (GCC contracts a*b+c with -march=haswell/native
# on x86 and by default on aarch64), so the CPU twins round like the references.
# Hidden visibility: the extension exports PyInit__C alone, so neither its symbols nor the
# stable ABI's inline helpers (hidden in torch's headers) clash with another extension's.
HOST_FLAGS = ["-O3", "-ffp-contract=off", "-fvisibility=hidden"] + ABI_FLAGS
# Device code: no FMA contraction either (--fmad=false), so CUDA rounds like the
# CPU twins and CPU == CUDA bit for bit; host code compiled by nvcc likewise.
# IEEE division/sqrt and no flush-to-zero, said explicitly (nvcc's defaults, but
# NVCC_APPEND_FLAGS could slip in -use_fast_math otherwise unnoticed).
NVCC_FLAGS = ["-O3", "-lineinfo", "--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false",
              "-Xcompiler", "-ffp-contract=off", "-Xcompiler", "-fvisibility=hidden"] + ABI_FLAGS

# The CUDA runtime is linked statically, and none of torch's CUDA libraries is
# linked (csrc/cuda/launch.h finds torch's current stream at run time): the
# extension then loads on a CPU build of torch too, and on a CUDA build of any
# CUDA version whose driver runs this toolkit's code.
CUDA_LIBRARIES = ["cudart_static", "rt", "pthread", "dl"]


def cuda_version(v) -> str:
    """"12.8" of CUDA's integer version 12080 (cudaRuntimeGetVersion, cuDriverGetVersion,
    Warp's before 1.19) or of a (major, minor) tuple (Warp 1.19's get_cuda_driver_version)."""
    if isinstance(v, (tuple, list)):
        return f"{v[0]}.{v[1]}"
    return f"{v // 1000}.{(v % 1000) // 10}"


def toolkit_candidates(env=os.environ) -> list[str]:
    """Where a CUDA toolkit may be, in order: CUDA_HOME, CUDA_PATH, the toolkit holding the
    nvcc on PATH, /usr/local/cuda, then /usr/local/cuda-X.Y newest first."""
    cands = [env.get("CUDA_HOME"), env.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc:
        cands.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    cands.append("/usr/local/cuda")
    versioned = glob.glob("/usr/local/cuda-*")
    cands += sorted(versioned, key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))], reverse=True)
    out = []
    for c in cands:
        if c and os.path.isfile(os.path.join(c, "include", "cuda_runtime.h")) and c not in out:
            out.append(c)
    return out


def choose_cuda_home(torch_cuda: str | None, candidates: list[str], version=None) -> tuple[str | None, str | None]:
    """(the toolkit to build with, None) or (None, why none fits, in one line).

    A CPU build of torch takes the first toolkit found (the kernels then need a driver for
    its CUDA). A CUDA build of torch takes the first whose major CUDA version is torch's:
    kernels built with CUDA 13 would not run on the CUDA 12 drivers that torch's cu12 build
    serves, and torch's own build check refuses a toolkit of another major. ``version``:
    the toolkit's version at a path (default :func:`toolkit_version`; tests stand it in)."""
    version = version or toolkit_version
    if not candidates:
        return None, None
    if torch_cuda is None:
        return candidates[0], None
    major = torch_cuda.split(".")[0]
    found = [(c, version(c)) for c in candidates]
    for c, v in found:
        if v and v.split(".")[0] == major:
            return c, None
    seen = ", ".join(f"{v or '?'} at {c}" for c, v in found)
    return None, (f"torch is built for CUDA {torch_cuda} but the CUDA toolkits found are {seen}: install a CUDA "
                  f"{major}.x toolkit and set CUDA_HOME to it (in a checkout, `bash .ci/cuda12-toolkit` composes "
                  "CUDA 12.4 from PyPI's and Debian's packages), or build the CPU ops only with FLYCUDA_FORCE_CPU=1")


def find_cuda_home() -> str | None:
    """The first toolkit of :func:`toolkit_candidates` (CUDA_HOME first), None when none
    has cuda_runtime.h. (setup.py chooses with :func:`choose_cuda_home`, knowing torch's CUDA.)"""
    cands = toolkit_candidates()
    return cands[0] if cands else None


def nvcc_version(nvcc: str | None) -> str | None:
    """"13.0" of the nvcc at path ``nvcc`` (its "release 13.0"), None when unknown."""
    import subprocess  # noqa: PLC0415  (lazy: only where nvcc is asked)

    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def toolkit_version(home: str | None) -> str | None:
    """"13.0" of the CUDA toolkit at ``home``, None when unknown."""
    return nvcc_version(os.path.join(home, "bin", "nvcc")) if home else None


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
    """File name of the build record setup.py writes next to the extension (one
    abi3 extension serves every interpreter, so one record)."""
    return "_build_info.json"


def build_matches(info: dict, env) -> bool:
    """Does the build record ``info`` match what ``env`` asks for: CUDA or not
    (FLYCUDA_FORCE_CPU / FLYCUDA_FORCE_CUDA) and the archs of TORCH_CUDA_ARCH_LIST?
    (One abi3 extension serves every lane of a checkout; run.sh rebuilds it when a
    lane asks for another build than the one there.)"""
    if env.get("FLYCUDA_FORCE_CPU") == "1":
        return info.get("with_cuda") is False
    if env.get("FLYCUDA_FORCE_CUDA") == "1" and not info.get("with_cuda"):
        return False
    archs = env.get("TORCH_CUDA_ARCH_LIST")
    return not archs or not info.get("with_cuda") or info.get("archs") == with_newest_ptx(archs)


if __name__ == "__main__":  # run.sh: `--matches` exits 1 when a rebuild is due; .ci/wheel: `--default-archs [12.4]`
    import json
    import sys

    if sys.argv[1:2] == ["--default-archs"]:  # [TOOLKIT_VERSION]
        print(default_archs(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_ARCHS)
        sys.exit(0)
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), build_info_name())) as f:
            record = json.load(f)
    except (OSError, ValueError):
        sys.exit(1)
    sys.exit(0 if build_matches(record, os.environ) else 1)
