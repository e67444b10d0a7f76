"""Build flycuda's extension `flycuda._C`.

CUDA build (CUDAExtension over csrc/*.cpp + csrc/*.cu) when torch is a CUDA build
(`torch.version.cuda`) and a CUDA toolkit is found, or when FLYCUDA_FORCE_CUDA=1;
otherwise a CppExtension over csrc/*.cpp only. No GPU is needed to build: the
decision never asks `torch.cuda.is_available()`, so a GPU-less CI compiles and
links the .cu files. FLYCUDA_FORCE_CPU=1 forces the CPU-only build.

    pip install --no-build-isolation -e .
"""

import glob
import os
import shutil
import sys

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCHS = "8.0;8.6;8.9;9.0"  # A100, RTX 30xx/A40, RTX 40xx/L40, H100/H200


def _find_cuda_home():
    """CUDA_HOME from the environment, else the toolkit that holds `nvcc`."""
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if cand and os.path.isfile(os.path.join(cand, "include", "cuda_runtime.h")):
            return cand
    nvcc = shutil.which("nvcc")
    cands = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []
    cands.append("/usr/local/cuda")
    for cand in cands:
        if os.path.isfile(os.path.join(cand, "include", "cuda_runtime.h")):
            return cand
    return None


CUDA_HOME = _find_cuda_home()
if CUDA_HOME:
    os.environ["CUDA_HOME"] = CUDA_HOME  # before torch.utils.cpp_extension reads it

import torch  # noqa: E402
from torch.utils.cpp_extension import (  # noqa: E402
    BuildExtension,
    CppExtension,
    CUDAExtension,
)

FORCE_CPU = os.getenv("FLYCUDA_FORCE_CPU", "0") == "1"
FORCE_CUDA = os.getenv("FLYCUDA_FORCE_CUDA", "0") == "1"
if FORCE_CPU and FORCE_CUDA:
    sys.exit("flycuda: FLYCUDA_FORCE_CPU=1 and FLYCUDA_FORCE_CUDA=1 contradict each other")
if FORCE_CUDA and (torch.version.cuda is None or CUDA_HOME is None):
    sys.exit(
        "flycuda: FLYCUDA_FORCE_CUDA=1 needs a CUDA build of torch and a CUDA toolkit; "
        f"got torch {torch.__version__} (torch.version.cuda={torch.version.cuda}) and "
        f"CUDA_HOME={CUDA_HOME}. Install e.g. torch==2.14.1 and set CUDA_HOME."
    )
WITH_CUDA = not FORCE_CPU and (
    FORCE_CUDA or (torch.version.cuda is not None and CUDA_HOME is not None)
)
if WITH_CUDA and not os.getenv("TORCH_CUDA_ARCH_LIST"):
    # Without a visible GPU torch would guess; pick the data-centre/desktop
    # generations flycuda targets. Set TORCH_CUDA_ARCH_LIST to override.
    visible = torch.cuda.is_available()  # only chooses archs, never WITH_CUDA
    if not visible:
        os.environ["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCHS

sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
if WITH_CUDA:
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "*.cu")))
# -fopenmp: torch's at::parallel_for is an inline OpenMP region; without the
# flag the CPU kernels would silently run on one thread.
OPENMP = [] if sys.platform == "darwin" else ["-fopenmp"]
extra_compile_args = {"cxx": ["-O3"] + OPENMP}
if WITH_CUDA:
    extra_compile_args["nvcc"] = ["-O3", "-lineinfo"]
Extension = CUDAExtension if WITH_CUDA else CppExtension

print(
    "flycuda build: WITH_CUDA={} torch={} torch.version.cuda={} CUDA_HOME={} "
    "TORCH_CUDA_ARCH_LIST={} sources={}".format(
        WITH_CUDA, torch.__version__, torch.version.cuda, CUDA_HOME,
        os.environ.get("TORCH_CUDA_ARCH_LIST", "(torch default)"), len(sources),
    ),
    flush=True,
)

# Name, version, dependencies and the `flycuda` console script live in
# pyproject.toml; this file only adds the extension.
setup(
    ext_modules=[
        Extension(
            "flycuda._C",
            sources,
            include_dirs=[os.path.join(ROOT, "csrc")],
            extra_compile_args=extra_compile_args,
            define_macros=[("WITH_CUDA", None)] if WITH_CUDA else [],
            extra_link_args=OPENMP,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
