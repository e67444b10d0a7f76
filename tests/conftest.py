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


def pytest_addoption(parser):
    parser.addoption("--sample-every", type=int, default=1, metavar="N",
                     help="keep every N-th case of each test function (1: all); the GPU self-check's quick "
                          "sanitizer runs use it to cover every test function in a fraction of the time")


def sample_cases(items, every: int):
    """(kept, dropped): every ``every``-th case of each test function, in collection order;
    each function keeps its first case."""
    if every <= 1:
        return list(items), []
    seen: dict = {}
    kept, dropped = [], []
    for item in items:
        key = (str(item.path), getattr(item, "originalname", item.name))
        n = seen[key] = seen.get(key, -1) + 1
        (kept if n % every == 0 else dropped).append(item)
    return kept, dropped


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: sample what runs
def pytest_collection_modifyitems(config, items):
    every = config.getoption("--sample-every")
    if every < 1:
        raise pytest.UsageError(f"--sample-every: expected a count >= 1, got {every}")
    kept, dropped = sample_cases(items, every)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
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
