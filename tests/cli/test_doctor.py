"""flycuda doctor: the facts judged into one line per problem, with what to do."""

from __future__ import annotations

import pytest

from flycuda.cli.doctor import diagnose
from flycuda.driver import arch_coverage

H100 = {"name": "NVIDIA H100", "capability": (9, 0)}
B200 = {"name": "NVIDIA B200", "capability": (10, 0)}
A10 = {"name": "NVIDIA A10", "capability": (8, 6)}


def _facts(**kw):
    f = {"torch": "2.14.1+cu130", "torch_cuda": "13.0", "driver_cuda": "13.0", "gpus": [H100],
         "toolkit": "/usr/local/cuda", "nvcc": "13.0", "cuda_kernels": True, "archs": "8.0;8.6;8.9;9.0+PTX",
         "build": {}}
    f.update(kw)
    return f


def _problems(f):
    lines, ok = diagnose(f)
    return [ln for ln in lines if ln.startswith("problem")], ok, lines


def test_a_covered_gpu_is_ready():
    problems, ok, lines = _problems(_facts())
    assert ok and not problems
    assert any("runs flycuda's kernels as SASS 9.0" in ln for ln in lines) and "ready" in lines[-1]


def test_torch_built_for_a_newer_cuda_than_the_driver():
    problems, ok, _ = _problems(_facts(driver_cuda="12.8", gpus=[]))
    assert not ok and len(problems) == 1
    assert "torch is built for CUDA 13.0 but the driver supports CUDA 12.8" in problems[0]
    assert "update the NVIDIA driver" in problems[0] and "torch built for CUDA <= 12.8" in problems[0]


def test_a_cpu_torch_next_to_a_driver():
    problems, ok, _ = _problems(_facts(torch_cuda=None, gpus=[]))
    assert not ok and "is a CPU build" in problems[0] and "CUDA <= 13.0" in problems[0]


def test_a_cpu_only_extension_on_a_gpu_machine():
    problems, ok, _ = _problems(_facts(cuda_kernels=False))
    assert not ok and "built without its CUDA kernels" in problems[0] and "CUDA_HOME" in problems[0]


@pytest.mark.parametrize("gpu,archs,want", [
    (A10, "8.0;8.6;8.9;9.0+PTX", "SASS 8.6"),
    (B200, "8.0;8.6;8.9;9.0+PTX", "PTX 9.0"),      # newer than every SASS: the PTX JIT-compiles
    (H100, "8.0;8.6", None),                       # no sm_90 SASS, no PTX: cannot run
    ((lambda: {"name": "x", "capability": (8, 9)})(), "8.0;8.6", "SASS 8.6"),  # same major, lower minor runs
])
def test_arch_coverage(gpu, archs, want):
    how = arch_coverage(gpu["capability"], archs)
    assert (how is None) if want is None else how.startswith(want)


def test_an_uncovered_arch_names_the_arch_to_build_for():
    problems, ok, _ = _problems(_facts(archs="8.0;8.6"))
    assert not ok and "sm_90" in problems[0] and "TORCH_CUDA_ARCH_LIST=9.0" in problems[0]


def test_no_gpu_runs_on_the_cpu_and_the_command_says_so(capsys):
    problems, ok, lines = _problems(_facts(driver_cuda="unknown (libcuda.so.1 not loadable: no NVIDIA driver)",
                                           gpus=[]))
    assert ok and not problems and "runs on the CPU" in lines[-1]
    from flycuda.cli import main

    rc = main(["doctor"])
    out = capsys.readouterr().out
    assert out.startswith("flycuda doctor") and "torch " in out and "flycuda._C" in out
    assert rc == (0 if "problem" not in out else 1)


def test_kernels_built_for_a_newer_cuda_than_the_driver():
    """The extension links the CUDA runtime statically: its kernels need a driver for the
    toolkit it was built with, whatever CUDA torch was built for."""
    problems, ok, _ = _problems(_facts(torch_cuda="12.8", driver_cuda="12.8", built_cuda="13.0"))
    assert not ok and len(problems) == 1
    assert "flycuda's kernels are built with CUDA 13.0; the NVIDIA driver supports CUDA 12.8" in problems[0]
    assert "update the driver (a driver for CUDA >= 13.0, R580+)" in problems[0] and "CUDA 12.x" in problems[0]


def test_cuda12_kernels_run_on_an_older_cuda12_driver():
    """CUDA's minor-version compatibility: 12.4 kernels (the wheel's) on a 12.2 driver run
    as SASS; a GPU that needs their PTX (a B200: no sm_100 SASS) needs a 12.4 driver."""
    problems, ok, _ = _problems(_facts(torch_cuda="12.1", driver_cuda="12.2", built_cuda="12.4"))
    assert ok and not problems
    problems, ok, _ = _problems(_facts(torch_cuda="12.1", driver_cuda="12.2", built_cuda="12.4", gpus=[B200]))
    assert not ok and "runs flycuda's PTX, built with CUDA 12.4" in problems[0] and "CUDA 12.2" in problems[0]


def test_the_extension_line_names_the_stable_abi():
    _, ok, lines = _problems(_facts(built_cuda="13.0", built_torch="2.14.1+cu130", torch_target="2.10"))
    ext = next(ln for ln in lines if ln.startswith("flycuda._C"))
    assert ok and "CUDA 13.0 kernels for 8.0;8.6;8.9;9.0+PTX" in ext
    assert "stable ABI: built on torch 2.14.1+cu130, runs on torch >= 2.10" in ext
