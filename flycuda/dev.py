"""Kernel development helpers: JIT builds, inline kernels, the grid emulator.

The workflow of notebooks/01_kernel_from_python.ipynb: write a kernel in Python
and run it on an emulated grid (:func:`launch`), move it to C++/CUDA with
:func:`load_inline`, check it against :mod:`flycuda.reference`, then promote it
into csrc/ and rebuild the package. :func:`build` JIT-compiles flycuda's own
csrc/ (or a subset) without reinstalling, into a separate op namespace
(``torch.ops.flycuda_jit`` by default) so it never clashes with the installed
``torch.ops.flycuda`` ops loaded in the same process.

CUDA is used when torch is a CUDA build and a CUDA toolkit is found (a GPU is
only needed to *run* the CUDA kernels); otherwise the C++ (CPU) sources alone.
"""

from __future__ import annotations

import glob
import os

import torch

from . import _buildcfg
from .reference.grid import ThreadCtx, cdiv, dim3, launch

__all__ = ["build", "load_inline", "cuda_toolkit", "launch", "dim3", "cdiv", "ThreadCtx", "CSRC"]

CSRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")


def cuda_toolkit() -> str | None:
    """The CUDA toolkit flycuda would build with (CUDA_HOME, else the one holding nvcc)."""
    return _buildcfg.find_cuda_home()


def _use_cuda(with_cuda: bool | None) -> bool:
    can = torch.version.cuda is not None and cuda_toolkit() is not None
    if with_cuda and not can:
        raise RuntimeError("flycuda.dev: with_cuda=True needs a CUDA build of torch and a CUDA toolkit "
                           f"(torch.version.cuda={torch.version.cuda}, toolkit={cuda_toolkit()})")
    return can if with_cuda is None else bool(with_cuda)


def _prepare_env(use_cuda: bool) -> None:
    if use_cuda:
        os.environ.setdefault("CUDA_HOME", cuda_toolkit())
        if not os.environ.get("TORCH_CUDA_ARCH_LIST") and not torch.cuda.is_available():
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"  # one arch (+PTX): JIT builds should be quick


def build(ops: list[str] | None = None, *, namespace: str = "flycuda_jit", with_cuda: bool | None = None,
          name: str | None = None, build_directory: str | None = None, verbose: bool = False):
    """JIT-builds flycuda's csrc/ into ``torch.ops.<namespace>`` and returns that namespace.

    Args:
        ops: op families to build (e.g. ``["motion_to_ctrl"]``); default all.
        namespace: the op namespace (must differ from ``flycuda`` while the
            installed extension is loaded in this process).
        with_cuda: build the .cu files too; None = when torch has CUDA and a toolkit is found.
        name: the extension's name (default ``<namespace>_<cpu|cuda>``).
        build_directory: where to build (default torch's extensions cache).
        verbose: show the compiler commands.
    """
    from torch.utils import cpp_extension  # noqa: PLC0415  (lazy: only dev builds need the toolchain)

    if namespace == "flycuda" and "flycuda._C" in __import__("sys").modules:
        raise RuntimeError("flycuda.dev.build: namespace 'flycuda' is taken by the installed extension "
                           "in this process; use another namespace (default 'flycuda_jit')")
    use_cuda = _use_cuda(with_cuda)
    _prepare_env(use_cuda)
    # op family -> its host sources: csrc/<family>.cpp, or the renderer's csrc/render/*.cpp
    families = {os.path.basename(p)[:-4]: [p] for p in glob.glob(os.path.join(CSRC, "*.cpp"))
                if os.path.basename(p) not in ("registration.cpp", "common.cpp")}
    families["render_tiles"] = sorted(glob.glob(os.path.join(CSRC, "render", "*.cpp")))
    all_ops = sorted(families)
    chosen = all_ops if ops is None else list(ops)
    unknown = sorted(set(chosen) - set(all_ops))
    if unknown:
        raise ValueError(f"flycuda.dev.build: unknown op families {unknown}; csrc/ has {all_ops}")
    # the step counter's checks live with advance_step (csrc/advance_step.h) and every family that
    # reads the counter links them: a subset always brings advance_step along
    chosen = sorted(set(chosen) | {"advance_step"})
    sources = [os.path.join(CSRC, "registration.cpp"), os.path.join(CSRC, "common.cpp")]
    sources += [src for op in chosen for src in families[op]]
    if use_cuda:
        sources += [os.path.join(CSRC, "cuda", f"{op}.cu") for op in chosen]
    ns = f"-DFLYCUDA_NS={namespace}"
    cpp_extension.load(
        name=name or f"{namespace}_{'cuda' if use_cuda else 'cpu'}", sources=sources,
        extra_include_paths=[CSRC], extra_cflags=[ns] + _buildcfg.HOST_FLAGS,
        extra_cuda_cflags=[ns] + _buildcfg.NVCC_FLAGS if use_cuda else None,
        build_directory=build_directory, is_python_module=False, verbose=verbose)
    return getattr(torch.ops, namespace)


def load_inline(name: str, cpp_source: str, functions: list[str], *, cuda_source: str | None = None,
                with_cuda: bool | None = None, verbose: bool = False, build_directory: str | None = None):
    """``torch.utils.cpp_extension.load_inline`` for notebook kernels.

    ``cpp_source`` holds the C++ (CPU) kernels or, with ``cuda_source``, the
    declarations of the functions defined there; ``functions`` are bound with
    pybind11 and returned as a module. ``cuda_source`` is compiled only when
    CUDA is usable (see :func:`build`); then the module is built from both.
    ``-O2`` and, for CUDA, ``-lineinfo``; set ``CUDA_LAUNCH_BLOCKING=1`` before
    launching to get errors at the failing launch while debugging.
    """
    from torch.utils import cpp_extension  # noqa: PLC0415  (lazy: only dev builds need the toolchain)

    use_cuda = cuda_source is not None and _use_cuda(with_cuda)
    _prepare_env(use_cuda)
    return cpp_extension.load_inline(
        name=name, cpp_sources=[cpp_source], cuda_sources=[cuda_source] if use_cuda else None,
        functions=functions, extra_cflags=["-O2", "-ffp-contract=off"],
        extra_cuda_cflags=["-O2", "-lineinfo", "--fmad=false"] if use_cuda else None,
        with_cuda=use_cuda, verbose=verbose, build_directory=build_directory)
