"""One judge of driver against kernels (flycuda.driver), with the machine's facts stubbed:
the device choice, the replay's CLI and ``flycuda doctor`` refuse a driver too old for
flycuda's kernels before any work, in the same one line."""

from __future__ import annotations

import pytest
import torch

from flycuda import _ext
from flycuda.cli.doctor import diagnose
from flycuda.driver import kernel_support, kernels_problem, version_tuple


@pytest.mark.parametrize("driver,kernels,ptx,refused", [
    ("12.2", "12.9", False, False),  # minor-version compatibility: SASS of 12.9 on a 12.2 driver
    ("12.2", "12.9", True, True),    # ... but its PTX needs a 12.9 driver to compile it
    ("12.9", "13.0", False, True),   # an older major runs none of it
    ("12.0", "12.4", False, False),  # R525, the first CUDA 12 driver, runs the cu12 wheel's SASS
    ("13.0", "12.4", True, False),   # a newer driver runs everything
    ("12.4", "12.4", True, False),
    ("unknown (no NVIDIA driver)", "13.0", False, False),  # nothing to judge
    ("12.8", None, False, False),
])
def test_kernel_support(driver, kernels, ptx, refused):
    why = kernel_support(driver, kernels, ptx=ptx)
    assert (why is not None) == refused, why
    if refused:
        assert f"CUDA {driver}" in why and f"CUDA {kernels}" in why, why
        assert "update the driver" in why and "device='cpu'" in why and "\n" not in why


def test_an_uncovered_gpu_is_refused_by_the_device_choice_too():
    why = kernels_problem((7, 5), driver="12.8", info=WHEEL)
    assert why.startswith("this GPU is sm_75, which flycuda's kernels (8.0;8.6;8.9;9.0+PTX) do not cover")
    assert "TORCH_CUDA_ARCH_LIST=7.5" in why


def test_an_older_major_names_the_driver_branch_and_the_cu12_wheel():
    why = kernel_support("12.9", "13.0")
    assert "a driver for CUDA >= 13.0, R580+" in why and "built with CUDA 12" in why and "R525" in why


def test_version_tuple():
    assert version_tuple("12.8") == (12, 8) and version_tuple("12.8 (libcudart.so)") == (12, 8)
    assert version_tuple("9.0+PTX") == (9, 0) and version_tuple("unknown (x)") is None and version_tuple(None) is None


WHEEL = {"with_cuda": True, "cuda": "12.4", "archs": "8.0;8.6;8.9;9.0+PTX"}
CU13 = {"with_cuda": True, "cuda": "13.0", "archs": "8.0;8.6;8.9;9.0;10.0;12.0+PTX"}


@pytest.mark.parametrize("info,driver,capability,refused", [
    (WHEEL, "12.2", (9, 0), False),   # H100 runs the wheel's sm_90 SASS
    (WHEEL, "12.2", (10, 0), True),   # B200 needs its compute_90 PTX: a 12.4 driver
    (WHEEL, "12.8", (10, 0), False),
    (CU13, "12.9", (9, 0), True),
    (CU13, "13.0", (12, 0), False),
    ({"with_cuda": False}, "11.0", (9, 0), False),  # CPU-only extension: nothing to judge
    (WHEEL, "12.8", (7, 5), True),    # a T4: no SASS, and no PTX it can run (compute_90 > sm_75)
])
def test_kernels_problem_reads_the_build_record(info, driver, capability, refused):
    assert (kernels_problem(capability, driver=driver, info=info) is not None) == refused


def _gpu_machine(monkeypatch, driver: int, info: dict):
    """A GPU machine as Warp and torch would report it, the driver and build record stubbed."""
    import warp as wp

    monkeypatch.setattr(wp, "is_cuda_available", lambda: True)
    monkeypatch.setattr(wp, "get_cuda_driver_version", lambda: driver)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(_ext, "has_cuda_ops", lambda: True)
    monkeypatch.setattr(_ext, "build_info", lambda: dict(info))


@pytest.mark.needs_warp
def test_device_choice_replay_and_doctor_refuse_in_one_wording(monkeypatch, capsys):
    from flycuda.cli import main
    from flycuda.cli.replay import in_options
    from flycuda.sim import BridgeError
    from flycuda.sim import mjwarp as bridge

    _gpu_machine(monkeypatch, 12090, CU13)
    want = kernel_support("12.9", "13.0")
    for device in (None, "cuda", "cuda:0"):
        with pytest.raises(BridgeError) as e:
            bridge.warp_device_for(device)
        assert str(e.value) == want
    assert bridge.warp_device_for("cpu") == "cpu"
    assert main(["replay", "--duration", "0.001", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert in_options(want) in err and err.rstrip().endswith("or pass --device cpu")
    lines, ok = diagnose({"torch": "2.10.0+cu128", "torch_cuda": "12.8", "driver_cuda": "12.9",
                          "gpus": [{"name": "NVIDIA H100", "capability": (9, 0)}], "toolkit": None, "nvcc": None,
                          "cuda_kernels": True, "archs": CU13["archs"], "built_cuda": "13.0", "build": {}})
    assert not ok and f"problem        {want}" in lines


@pytest.mark.needs_warp
def test_a_cu12_wheel_on_an_older_cu12_driver_is_chosen(monkeypatch):
    from flycuda.sim import mjwarp as bridge

    _gpu_machine(monkeypatch, 12020, WHEEL)
    assert bridge.unusable_gpu() is None and bridge.warp_device_for(None) == "cuda:0"
