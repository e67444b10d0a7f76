"""Which device things run on: Sims bound to their own device, replay's default
device, and the build that decides whether CUDA can be picked at all."""

import contextlib
import functools
import json
import os

import pytest
import torch

import flycuda
from flycuda import _buildcfg


class _RecordingMjw:
    """Stands in for mujoco_warp: records Warp's device at each launch."""

    def __init__(self, wp):
        self.wp, self.seen = wp, []

    def step(self, model, data):
        self.seen.append(("step", str(self.wp.get_device())))

    def forward(self, model, data):
        self.seen.append(("forward", str(self.wp.get_device())))


@pytest.mark.needs_warp
def test_sim_launches_on_its_own_device(monkeypatch):
    """MuJoCo Warp launches on Warp's current device: Sim.step/forward must make the
    Sim's device current (a Sim on cuda:1 would otherwise run on cuda:0)."""
    import warp as wp

    from flycuda.sim import Sim

    sim = Sim.build(None, 1, device="cpu")
    scoped = []
    real = wp.ScopedDevice

    @contextlib.contextmanager
    def spy(device):
        scoped.append(str(device))
        with real(device):
            yield

    monkeypatch.setattr(wp, "ScopedDevice", spy)
    sim._mjw = _RecordingMjw(wp)
    sim.step()
    sim.forward()
    assert scoped == ["cpu", "cpu"]
    assert sim._mjw.seen == [("step", "cpu"), ("forward", "cpu")]


@pytest.mark.needs_warp
def test_default_device_needs_cuda_kernels(monkeypatch):
    """device=None picks CUDA only when Warp and torch see a GPU *and* flycuda has its
    CUDA kernels (a FLYCUDA_FORCE_CPU=1 build must replay on the CPU)."""
    import warp as wp

    from flycuda import _ext
    from flycuda.sim import mjwarp as bridge

    monkeypatch.setattr(wp, "is_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_ext, "has_cuda_ops", lambda: False)
    assert bridge.warp_device_for(None) == "cpu"
    monkeypatch.setattr(_ext, "has_cuda_ops", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert bridge.warp_device_for(None) == "cuda:0"
    assert bridge.warp_device_for("cpu") == "cpu"


@pytest.mark.needs_warp
def test_cuda_means_the_current_device(monkeypatch):
    """"cuda" (and None) is torch's current CUDA device, as torch reads it, not cuda:0;
    an explicit index is kept."""
    import warp as wp

    from flycuda import _ext
    from flycuda.sim import mjwarp as bridge

    monkeypatch.setattr(wp, "is_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_ext, "has_cuda_ops", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert bridge.warp_device_for("cuda") == "cuda:3"
    assert bridge.warp_device_for(torch.device("cuda")) == "cuda:3"
    assert bridge.warp_device_for(None) == "cuda:3"
    assert bridge.warp_device_for("cuda:0") == "cuda:0"
    assert bridge.warp_device_for("cuda:1") == "cuda:1"


@pytest.mark.needs_cuda
@pytest.mark.needs_warp
def test_replay_on_second_gpu():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from flycuda.replay import replay

    res = replay(worlds=2, duration=0.002, device="cuda:1", progress=False, record="memory")
    assert res.device == "cuda:1" and res.recorded.isfinite().all()


# --- how the extension is built --------------------------------------------------

def test_cuda_version_reads_integers_and_warps_tuples():
    """CUDA's integer versions and Warp 1.19's (major, minor) driver version (an H200 run
    found the tuple: the replay's GPU check failed on it)."""
    assert _buildcfg.cuda_version(12080) == "12.8" and _buildcfg.cuda_version(13000) == "13.0"
    assert _buildcfg.cuda_version((13, 0)) == "13.0" and _buildcfg.cuda_version([12, 4]) == "12.4"


def test_newest_arch_gets_ptx():
    assert _buildcfg.with_newest_ptx("8.0;8.6;8.9;9.0") == "8.0;8.6;8.9;9.0+PTX"
    assert _buildcfg.with_newest_ptx("9.0 8.0") == "9.0+PTX;8.0"
    assert _buildcfg.with_newest_ptx("9.0a;10.0") == "9.0a;10.0+PTX"
    assert _buildcfg.with_newest_ptx("8.0;9.0+PTX") == "8.0;9.0+PTX"
    assert _buildcfg.DEFAULT_ARCHS.endswith("+PTX")
    assert _buildcfg.default_archs("12.4") == "8.0;8.6;8.9;9.0+PTX"  # no Blackwell before CUDA 12.8
    assert _buildcfg.default_archs("12.8") == _buildcfg.default_archs("13.0") == _buildcfg.DEFAULT_ARCHS


def test_the_toolkit_matches_torchs_major_cuda():
    """setup.py builds with a toolkit of torch's own major CUDA (torch's build check refuses
    another, and kernels of CUDA 13 would not run on the drivers a cu12 torch serves); a CPU
    torch takes the first found; none that fits is said in one line naming what was found."""
    versions = {"/opt/cuda-13": "13.0", "/opt/cuda-12": "12.4", "/opt/odd": None}
    choose = functools.partial(_buildcfg.choose_cuda_home, version=versions.get)
    assert choose("12.8", ["/opt/cuda-13", "/opt/cuda-12"]) == ("/opt/cuda-12", None)
    assert choose("13.0", ["/opt/cuda-13", "/opt/cuda-12"]) == ("/opt/cuda-13", None)
    assert choose(None, ["/opt/cuda-13", "/opt/cuda-12"]) == ("/opt/cuda-13", None)
    assert choose("12.8", []) == (None, None)
    home, why = choose("12.8", ["/opt/cuda-13", "/opt/odd"])
    assert home is None and "\n" not in why
    assert why.startswith("torch is built for CUDA 12.8 but the CUDA toolkits found are 13.0 at /opt/cuda-13, ? at "
                          "/opt/odd: install a CUDA 12.x toolkit and set CUDA_HOME to it")


def test_toolkit_candidates_put_cuda_home_first(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "include").mkdir(parents=True)
        (tmp_path / name / "include" / "cuda_runtime.h").write_text("")
    env = {"CUDA_HOME": str(tmp_path / "b"), "CUDA_PATH": str(tmp_path / "a"), "PATH": ""}
    cands = _buildcfg.toolkit_candidates(env)
    assert cands[:2] == [str(tmp_path / "b"), str(tmp_path / "a")]
    assert str(tmp_path / "missing") not in _buildcfg.toolkit_candidates({"CUDA_HOME": str(tmp_path / "missing")})


def test_no_fma_contraction_anywhere():
    """Host code without -ffp-contract=off contracts a*b+c (GCC on aarch64, or
    x86 with -march=haswell): CPU and CUDA would then round differently."""
    assert "-ffp-contract=off" in _buildcfg.HOST_FLAGS
    assert "--fmad=false" in _buildcfg.NVCC_FLAGS and "-ffp-contract=off" in _buildcfg.NVCC_FLAGS
    info_path = os.path.join(os.path.dirname(flycuda.__file__), _buildcfg.build_info_name())
    with open(info_path) as f:
        info = json.load(f)  # what setup.py really passed for the extension in use
    assert "-ffp-contract=off" in info["host_flags"]
    if info["with_cuda"]:
        assert "--fmad=false" in info["nvcc_flags"] and "+PTX" in info["archs"]


@pytest.mark.needs_warp
@pytest.mark.parametrize("torch_cuda,words", [("13.0", "torch is built for CUDA 13.0 and the NVIDIA driver supports CUDA 12.8"),
                                              (None, "is a CPU build")])
def test_a_gpu_torch_cannot_use_is_an_error_not_a_silent_cpu_run(monkeypatch, capsys, torch_cuda, words):
    """torch built for CUDA 13 on a CUDA 12.8 driver reports no GPU: device=None says so
    (driver, torch's CUDA, what to do) instead of running on the CPU; device="cpu" and
    --device cpu still run there."""
    import warp as wp

    from flycuda.cli import main
    from flycuda.sim import BridgeError
    from flycuda.sim import mjwarp as bridge

    monkeypatch.setattr(wp, "is_cuda_available", lambda: True)
    monkeypatch.setattr(wp, "get_cuda_driver_version", lambda: 12080)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", torch_cuda)
    with pytest.raises(BridgeError, match=words + ".*device='cpu'"):
        bridge.warp_device_for(None)
    assert bridge.warp_device_for("cpu") == "cpu"
    assert main(["replay", "--duration", "0.001", "--no-progress"]) == 2
    assert words in capsys.readouterr().err
