"""Build flycuda's extension `flycuda._C`.

CUDA build (CUDAExtension over csrc/*.cpp + csrc/*.cu) when torch is a CUDA build
(`torch.version.cuda`) and a CUDA toolkit is found, or when FLYCUDA_FORCE_CUDA=1;
otherwise a CppExtension over csrc/*.cpp only. No GPU is needed to build: the
decision never asks `torch.cuda.is_available()`, so a GPU-less CI compiles and
links the .cu files. FLYCUDA_FORCE_CPU=1 forces the CPU-only build.

    pip install --no-build-isolation -e .
"""

import glob
import importlib.util
import json
import os
import sys

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_buildcfg", os.path.join(ROOT, "flycuda", "_buildcfg.py"))
cfg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cfg)

CUDA_HOME = cfg.find_cuda_home()
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
if WITH_CUDA:
    # Without a visible GPU torch would guess; pick the generations flycuda
    # targets. Either way the newest listed arch also gets PTX.
    archs = os.getenv("TORCH_CUDA_ARCH_LIST") or (None if torch.cuda.is_available() else cfg.DEFAULT_ARCHS)
    if archs:
        os.environ["TORCH_CUDA_ARCH_LIST"] = cfg.with_newest_ptx(archs)

sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
if WITH_CUDA:
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "*.cu")))
OPENMP = cfg.openmp_flags()
extra_compile_args = {"cxx": cfg.HOST_FLAGS + OPENMP}
if WITH_CUDA:
    extra_compile_args["nvcc"] = list(cfg.NVCC_FLAGS)
Extension = CUDAExtension if WITH_CUDA else CppExtension

print(
    "flycuda build: WITH_CUDA={} torch={} torch.version.cuda={} CUDA_HOME={} "
    "TORCH_CUDA_ARCH_LIST={} sources={}".format(
        WITH_CUDA, torch.__version__, torch.version.cuda, CUDA_HOME,
        os.environ.get("TORCH_CUDA_ARCH_LIST", "(torch default)"), len(sources),
    ),
    flush=True,
)

# What was built, for flycuda.build_info() and the GPU self-check: one file per
# interpreter (cpython-311, cpython-312, ...), like the extension itself.
with open(os.path.join(ROOT, "flycuda", cfg.build_info_name()), "w") as f:
    json.dump({"with_cuda": WITH_CUDA, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
               "cuda_home": CUDA_HOME, "archs": os.environ.get("TORCH_CUDA_ARCH_LIST") if WITH_CUDA else None,
               "host_flags": extra_compile_args["cxx"], "nvcc_flags": extra_compile_args.get("nvcc")}, f)

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
