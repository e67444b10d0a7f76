"""pytest configuration: device parametrization, GPU/Warp skips, seeded RNG."""

import ctypes.util
import faulthandler
import importlib
import os
import sys

import pytest
import torch

import flycuda
from flycuda.errors import installed

# FlyGym's own vision (MuJoCo's OpenGL renderer) in software where there is no display.
# Tests run it in a subprocess with MUJOCO_GL=osmesa: libOSMesa brings its own LLVM,
# which crashes a process that also loads Triton's (torch.compile, opcheck).
OSMESA = ctypes.util.find_library("OSMesa") is not None


def pytest_addoption(parser):
    parser.addoption("--sample-every", type=int, default=1, metavar="N",
                     help="keep every N-th case of each test function (1: all); the GPU self-check's quick "
                          "sanitizer runs use it to cover every test function in a fraction of the time")
    parser.addoption("--hang-timeout", type=float, default=0.0, metavar="S",
                     help="with pytest-xdist (-n): a test still running after S seconds writes every thread's "
                          "stack to a --hang-log file and ends its worker, which xdist reports by the test's name and "
                          "replaces, so the run goes on (0: never; gpu-check uses it)")
    parser.addoption("--lane-sensitive", action="store_true",
                     help="keep only the tests whose outcome can differ between CI's lanes (see ONE_LANE): the "
                          "second lane runs these, the first lane everything")
    parser.addoption("--hang-log", default="hung-test", metavar="PATH",
                     help="--hang-timeout's files: PATH.<pid> for a worker whose test hung, with the test's name "
                          "and the stacks (default: hung-test in the current folder)")


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest-xdist's workers share the cores: one thread each
        torch.set_num_threads(1)
    limit = config.getoption("--hang-timeout")
    if limit < 0:
        raise pytest.UsageError(f"--hang-timeout: expected seconds >= 0, got {limit:g}")
    if limit and not (hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None)):
        raise pytest.UsageError("--hang-timeout ends the process of a hung test: use it with pytest-xdist (-n N), "
                                "which names that test and goes on")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """--hang-timeout: faulthandler's timer around each test (set up, call, tear down). Each
    worker keeps one file, ``<--hang-log>.<pid>``, that holds the running test's name while it
    runs and is emptied when it ends: a hung test's file keeps its name and the stacks."""
    limit = item.config.getoption("--hang-timeout")
    if not limit or not hasattr(item.config, "workerinput"):
        yield
        return
    log = _hang_file(item.config)
    log.seek(0), log.truncate()
    log.write(f"{item.nodeid}: still running after {limit:g} s; its worker ended. Every thread's stack:\n")
    log.flush()
    faulthandler.dump_traceback_later(limit, exit=True, file=log)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        log.seek(0), log.truncate()


def _hang_file(config):
    if not hasattr(config, "_flycuda_hang_file"):
        config._flycuda_hang_file = open(f"{config.getoption('--hang-log')}.{os.getpid()}", "w+")
    return config._flycuda_hang_file


def pytest_unconfigure(config):
    log = getattr(config, "_flycuda_hang_file", None)
    if log is not None:  # the worker ended normally: nothing hung in it
        log.close()
        os.remove(log.name)


# Tests that cannot differ between CI's two lanes (same torch; neither MuJoCo, MuJoCo Warp, zarr
# nor FlyGym in them): pure ops against their references, the launch plans, ptxas budgets, the
# package's layers and docs. The FlyGym lane runs them; the latest lane (--lane-sensitive) does
# not run them again. A test here that needs MuJoCo Warp (needs_warp) still runs in both.
ONE_LANE = ("tests/ops/", "tests/csrc/test_launch_plan.py", "tests/csrc/test_ptxas.py", "tests/control/",
            "tests/package/test_layers.py", "tests/package/test_docs.py", "tests/package/test_dev.py", "tests/csrc/test_sass.py",
            "tests/vision/test_connectome.py", "tests/cli/test_gpucheck.py", "tests/cli/test_doctor.py",
            "tests/brain/")
# Run once though they use MuJoCo Warp: the notebooks, demos of calls that both lanes' tests hold
# (their NeuroMechFly cells need the FlyGym lane, which runs them whole).
ONE_LANE_ALWAYS = ("tests/package/test_notebooks.py",)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The slowest files (the FlyGym lane, 2026-11-28: 330 s down to 45 s each) go first: pytest-xdist
# hands a worker a file at a time in this order (run.sh: --dist loadfile --no-loadscope-reorder;
# its default reorder, by number of tests, put these few-test files last), and a run that ends on
# one of them keeps the other core idle for minutes.
HEAVY_FIRST = ("tests/package/test_notebooks.py", "tests/env/test_settle.py", "tests/flygym_lane/test_resume_fly.py",
               "tests/flygym_lane/test_connectome_env.py", "tests/replay/test_resume.py", "tests/cli/test_rollout.py",
               "tests/control/test_control.py",
               "tests/sim/test_determinism.py", "tests/package/test_benches.py", "tests/env/test_descending.py",
               "tests/control/test_rules.py", "tests/vision/test_vision.py", "tests/flygym_lane/test_flygym.py",
               "tests/flygym_lane/test_connectome_flyvis.py", "tests/env/test_terrain.py", "tests/package/test_dev.py",
               "tests/ops/test_rule_step.py", "tests/env/test_env.py", "tests/replay/test_distributed.py",
               "tests/cli/test_gpucheck.py", "tests/brain/test_brian2.py")


def _rel(item) -> str:
    return os.path.relpath(str(item.path), ROOT).replace(os.sep, "/")


def _imports(module: str) -> bool:
    """Does ``module`` import? (Brian2 2.9, Python 3.11's, is installed but fails with NumPy 2.)"""
    if not installed(module):
        return False
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001  (any failure to import: the tests that need it skip)
        return False
    return True


def lane_sensitive(item) -> bool:
    """Can ``item``'s outcome differ between the lanes (Python, MuJoCo, MuJoCo Warp, zarr)?"""
    if _rel(item).startswith(ONE_LANE_ALWAYS):
        return False
    return "needs_warp" in item.keywords or not _rel(item).startswith(ONE_LANE)


def heaviest_first(items) -> list:
    """``items`` with HEAVY_FIRST's files first, in its order; each file's tests keep theirs."""
    rank = {f: i for i, f in enumerate(HEAVY_FIRST)}
    return sorted(items, key=lambda item: rank.get(_rel(item), len(rank)))


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
    if config.getoption("--lane-sensitive"):
        dropped += [i for i in kept if not lane_sensitive(i)]
        kept = [i for i in kept if lane_sensitive(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = heaviest_first(kept)
    cuda_ok = flycuda.cuda_ready()
    warp_ok = all(installed(m) for m in ("warp", "mujoco_warp"))
    skip_cuda = pytest.mark.skip(reason="needs a CUDA GPU and flycuda built with CUDA")
    skip_warp = pytest.mark.skip(reason="needs mujoco_warp and warp")
    flygym_ok = sys.version_info >= (3, 12) and installed("flygym")
    if not flygym_ok and os.environ.get("FLYCUDA_REQUIRE_FLYGYM") == "1":
        raise pytest.UsageError("FLYCUDA_REQUIRE_FLYGYM=1 (the FlyGym lane) but FlyGym cannot be imported "
                                f"on Python {sys.version.split()[0]}")
    flyvis_ok = sys.version_info < (3, 13) and installed("flyvis")
    if flygym_ok and not flyvis_ok and os.environ.get("FLYCUDA_REQUIRE_FLYGYM") == "1":
        raise pytest.UsageError("FLYCUDA_REQUIRE_FLYGYM=1 (the FlyGym lane) but flyvis is not installed: "
                                "pip install --no-deps -r requirements-flyvis.txt (run.sh does)")
    skip_flyvis = pytest.mark.skip(reason="needs flyvis (the FlyGym lane: requirements-flyvis.txt)")
    brian2_ok = not any("needs_brian2" in i.keywords for i in items) or _imports("brian2")  # (its import: 2 s)
    if flygym_ok and not brian2_ok and os.environ.get("FLYCUDA_REQUIRE_FLYGYM") == "1":
        raise pytest.UsageError("FLYCUDA_REQUIRE_FLYGYM=1 (the FlyGym lane) but brian2 cannot be imported: "
                                "pip install -r requirements-flygym.txt (run.sh does)")
    skip_brian2 = pytest.mark.skip(reason="needs Brian2 >= 2.10 (the FlyGym lane: requirements-flygym.txt)")
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
        if "needs_flyvis" in item.keywords and not flyvis_ok:
            item.add_marker(skip_flyvis)
        if "needs_brian2" in item.keywords and not brian2_ok:
            item.add_marker(skip_brian2)


@pytest.fixture(autouse=True)
def prevent_leaking_rng():
    """Seed every test and restore torch's RNG afterwards (torchvision's habit)."""
    state = torch.get_rng_state()
    torch.manual_seed(0)
    yield
    torch.set_rng_state(state)
