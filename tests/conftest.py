"""pytest configuration: device parametrization, GPU/Warp skips, seeded RNG."""

import ctypes.util
import importlib.util
import os
import sys

import pytest
import torch

import flycuda

# FlyGym's own vision (MuJoCo's OpenGL renderer) in software where there is no display.
# Tests run it in a subprocess with MUJOCO_GL=osmesa: libOSMesa brings its own LLVM,
# which crashes a process that also loads Triton's (torch.compile, opcheck).
OSMESA = ctypes.util.find_library("OSMesa") is not None


def pytest_collection_modifyitems(config, items):
    cuda_ok = flycuda.cuda_ready()
    warp_ok = all(importlib.util.find_spec(m) is not None for m in ("warp", "mujoco_warp"))
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU and flycuda built with CUDA")
    skip_warp = pytest.mark.skip(reason="needs mujoco_warp and warp")
    flygym_ok = sys.version_info >= (3, 12) and importlib.util.find_spec("flygym") is not None
    if not flygym_ok and os.environ.get("FLYCUDA_REQUIRE_FLYGYM") == "1":
        raise pytest.UsageError("FLYCUDA_REQUIRE_FLYGYM=1 (the FlyGym lane) but FlyGym cannot be imported "
                                f"on Python {sys.version.split()[0]}")
    gl_ok = OSMESA
    skip_gl = pytest.mark.skip(reason="needs an OpenGL for MuJoCo's renderer (here: apt-get install libosmesa6)")
    skip_flygym = pytest.mark.skip(reason="needs FlyGym 2.x (Python >= 3.12; the FlyGym lane)")
    for item in items:
        if "needs_flygym" in item.keywords and not flygym_ok:
            item.add_marker(skip_flygym)
        if "needs_cuda" in item.keywords and not cuda_ok:
            item.add_marker(skip_cuda)
        if "needs_warp" in item.keywords and not warp_ok:
            item.add_marker(skip_warp)
        if "needs_opengl" in item.keywords and not gl_ok:
            item.add_marker(skip_gl)


@pytest.fixture(autouse=True)
def prevent_leaking_rng():
    """Seed every test and restore torch's RNG afterwards (torchvision's habit)."""
    state = torch.get_rng_state()
    torch.manual_seed(0)
    yield
    torch.set_rng_state(state)
