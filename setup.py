"""Build flycuda's extension `flycuda._C`: one abi3 binary on PyTorch's stable ABI.

The host code uses only torch/csrc/stable (targeting torch 2.10) and Python's
limited API (3.11), so the one `_C.abi3.so` loads on every torch >= 2.10 and
CPython >= 3.11 (3.11: zarr 3, which recordings need, needs it); `python -m build --no-isolation` makes an sdist and an abi3 wheel.

CUDA build (CUDAExtension over csrc/*.cpp, csrc/render/*.cpp and csrc/cuda/*.cu) when a CUDA toolkit is found
(CUDA_HOME, CUDA_PATH, the toolkit of the nvcc on PATH, /usr/local/cuda, /usr/local/cuda-*;
against a CUDA build of torch the first of torch's own major CUDA version, or one line
saying which to install), or when FLYCUDA_FORCE_CUDA=1;
otherwise a CppExtension over the .cpp files only, said in one line. The CUDA runtime
is linked statically and no torch CUDA library is linked, so even a CUDA build
loads on a CPU build of torch. No GPU is needed to build: the decision never asks
`torch.cuda.is_available()`. FLYCUDA_FORCE_CPU=1 forces the CPU-only build.

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

import torch  # noqa: E402

FORCE_CPU = os.getenv("FLYCUDA_FORCE_CPU", "0") == "1"
FORCE_CUDA = os.getenv("FLYCUDA_FORCE_CUDA", "0") == "1"
# A toolkit of torch's own major CUDA (any one for a CPU torch): see cfg.choose_cuda_home.
CUDA_HOME, NO_TOOLKIT = (None, None) if FORCE_CPU else cfg.choose_cuda_home(torch.version.cuda,
                                                                            cfg.toolkit_candidates())
if NO_TOOLKIT:
    sys.exit("flycuda: " + NO_TOOLKIT)
if CUDA_HOME:
    os.environ["CUDA_HOME"] = CUDA_HOME  # before torch.utils.cpp_extension reads it

from torch.utils.cpp_extension import (  # noqa: E402
    BuildExtension,
    CppExtension,
    CUDAExtension,
)

if FORCE_CPU and FORCE_CUDA:
    sys.exit("flycuda: FLYCUDA_FORCE_CPU=1 and FLYCUDA_FORCE_CUDA=1 contradict each other")
if FORCE_CUDA and CUDA_HOME is None:
    sys.exit("flycuda: FLYCUDA_FORCE_CUDA=1 needs a CUDA toolkit: set CUDA_HOME to its folder (the one holding "
             "bin/nvcc and include/cuda_runtime.h)")
# The stable ABI needs no CUDA build of torch to compile the CUDA kernels: a
# toolkit is enough (the headers torch ships are the same for every build).
WITH_CUDA = not FORCE_CPU and CUDA_HOME is not None
if FORCE_CPU:
    print("flycuda: building the CPU-only extension (FLYCUDA_FORCE_CPU=1)", flush=True)
elif not WITH_CUDA:
    print("flycuda: no CUDA toolkit found, building the CPU-only extension (the same API; the ops run on the "
          "CPU): for flycuda's CUDA kernels set CUDA_HOME to a CUDA toolkit and reinstall", flush=True)
if WITH_CUDA and torch.utils.cpp_extension.CUDA_HOME is None:
    # A CPU build of torch never looks for a toolkit (its cpp_extension.CUDA_HOME is None);
    # on the stable ABI the kernels need none of torch's CUDA, so give it ours.
    torch.utils.cpp_extension.CUDA_HOME = CUDA_HOME
if WITH_CUDA:
    # Without a visible GPU torch would guess; pick the generations flycuda
    # targets. Either way the newest listed arch also gets PTX.
    archs = os.getenv("TORCH_CUDA_ARCH_LIST") or (
        None if torch.cuda.is_available() else cfg.default_archs(cfg.toolkit_version(CUDA_HOME)))
    if archs:
        os.environ["TORCH_CUDA_ARCH_LIST"] = cfg.with_newest_ptx(archs)

# The host side: csrc/*.cpp (schemas, common helpers, one file per op family) and the
# renderer's host files, csrc/render/*.cpp.
sources = sorted(glob.glob(os.path.join("csrc", "*.cpp"))) + sorted(glob.glob(os.path.join("csrc", "render", "*.cpp")))
if WITH_CUDA:
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "*.cu")))
extra_compile_args = {"cxx": list(cfg.HOST_FLAGS)}
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


class BuildExt(BuildExtension):
    """torch's BuildExtension that also records what it built (flycuda.build_info(), the
    GPU self-check; packaged in the wheel) and removes what earlier builds left. Only a
    finished build writes the record (after it, so a failed build leaves no record that
    claims it), and only where it put the extension: an sdist, a metadata step or a wheel
    build leaves an in-place build's record alone."""

    def run(self):
        # Artifacts of the builds before the stable ABI: a per-interpreter _C would
        # shadow the abi3 one (Python tries .cpython-3xx-*.so before .abi3.so).
        for stale in glob.glob(os.path.join(ROOT, "flycuda", "_C.cpython-*.so")) + glob.glob(
                os.path.join(ROOT, "flycuda", "_build_info.cpython-*.json")):
            os.remove(stale)
        record = {"with_cuda": WITH_CUDA, "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                  "torch_target": "{}.{}".format(*cfg.TORCH_TARGET),
                  "python_target": "{}.{}".format(*cfg.PYTHON_TARGET), "cuda_home": CUDA_HOME,
                  "cuda": cfg.toolkit_version(CUDA_HOME) if WITH_CUDA else None,
                  "archs": os.environ.get("TORCH_CUDA_ARCH_LIST") if WITH_CUDA else None,
                  "host_flags": extra_compile_args["cxx"], "nvcc_flags": extra_compile_args.get("nvcc")}
        stale_record = os.path.join(ROOT, "flycuda", cfg.build_info_name())
        if self.inplace and os.path.exists(stale_record):
            os.remove(stale_record)  # until this build has finished
        super().run()
        where = os.path.join(ROOT if self.inplace else self.build_lib, "flycuda")
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, cfg.build_info_name()), "w") as f:
            json.dump(record, f)


extension = Extension(
    "flycuda._C",
    sources,
    include_dirs=[os.path.join(ROOT, "csrc")],
    extra_compile_args=extra_compile_args,
    define_macros=[("WITH_CUDA", None)] if WITH_CUDA else [],
    py_limited_api=True,
)
if WITH_CUDA:
    # CUDAExtension links cudart, c10_cuda and torch_cuda; keep torch's CPU
    # libraries only (the stable ABI's symbols are in torch_cpu) and the static
    # CUDA runtime (flycuda/_buildcfg.py CUDA_LIBRARIES says why).
    extension.libraries = [lib for lib in extension.libraries if lib not in ("cudart", "c10_cuda", "torch_cuda")]
    extension.libraries += cfg.CUDA_LIBRARIES

# Name, version, dependencies and the `flycuda` console script live in
# pyproject.toml; this file only adds the extension and the abi3 wheel tag.
# FLYCUDA_NO_BUILD=1 (run.sh, a second lane's venv): register the checkout without compiling,
# when the abi3 extension already built in place is the build that venv asks for.
setup(
    ext_modules=[] if os.getenv("FLYCUDA_NO_BUILD") == "1" else [extension],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp{}{}".format(*cfg.PYTHON_TARGET)}},
)
