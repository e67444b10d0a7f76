"""flycuda's GPU self-check: ``flycuda gpu-check`` (or ``bash run.sh gpu-check``).

On a machine with an NVIDIA GPU it prints the environment (the CUDA runtime and
driver versions as they report themselves, not torch's compiled version), then
runs, each as its own process so that one failure does not hide the others, and
every step able to fail:
1. the CUDA tests (``pytest -m needs_cuda``; a run where nothing passed fails);
2. compute-sanitizer on the op tests with torch's caching allocator off
   (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``: otherwise an access past a tensor but
   inside a cached block is invisible): memcheck (the render tests too, at their
   small sizes), synccheck (barriers) and initcheck (reads of unwritten memory).
   racecheck is not run: it checks shared-memory hazards only, and flycuda's
   kernels use no shared memory, so it could not fail;
3. the sanitizer self-test: a program with one deliberately broken kernel per
   tool (flycuda/gpucheck/selftest.cu, built with the toolkit's nvcc): each tool
   must report its kernel, and pass the clean one;
4. a short graph-captured replay with rendering (``flycuda replay --device cuda``);
5. the benchmarks at a small size (bench_ops, bench_control (the walking controllers' ops in
   a graph), bench_replay, bench_render, bench_env at 1024 and 4096 worlds, bench_odor (odor at the
   sensors in a graph, its share of a physics step), bench_connectome (flyvis's network for 4,096
   flies x 2 eyes at 500 Hz in a graph: flies x steps/s, device memory; needs flyvis's connectome
   file: an installed flyvis or $FLYCUDA_CONNECTOME)), a PPO learning curve on flycuda.env (examples/ppo.py), and the
   fly's eyes at 1000 and 8192 worlds (bench_vision; needs FlyGym), and FlyGym's walking
   controllers on its terrains, 1000 worlds x 1.5 s per cell, the controllers' share of the
   physics' time (bench_terrain; FlyGym, or its worlds staged by ``--export``).

The tests and benchmarks live in a checkout (tests/, bench/), not in an installed
package: from an installed flycuda those steps are skipped, each with one line
saying so, and the rest (environment, self-test, replay) runs. It writes
``report.txt``, ``report.json`` and a log per step into the output folder, and a
dated section into ``--results`` (default: bench/RESULTS.md in a checkout, else
RESULTS.md in the output folder); it ends with PASS or FAIL (exit status 0 or 1).
Without a GPU it says so in one line and exits 1. ``--quick`` sizes the plan for a short
lease and ``--only GROUPS`` runs some groups of steps alone (a lease split over calls);
``--dry-run`` lists the steps without running any.

Its rooms: this module (the plan, the report, the entry), :mod:`.machine` (the environment it
reports, the toolkit's tools), :mod:`.steps` (a step and its runner), :mod:`.benches` (the benchmark
steps) and :mod:`.lease` (issue 53's device script: NeuroMechFly on the GPU).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys

import torch

import flycuda

from ..errors import installed
from . import lease
from .benches import TERRAIN_MODELS, benchmarks, no_connectome  # noqa: F401  (re-exported)
from .machine import compute_sanitizer, cuda_runtime_version, environment, find_nvcc  # noqa: F401  (re-exported)
from .steps import GRACE_S, Outcome, Step, judge, log_name, run_step, run_with_grace  # noqa: F401  (re-exported)

HERE = os.path.dirname(os.path.abspath(__file__))   # flycuda/gpucheck
ROOT = os.path.dirname(os.path.dirname(HERE))       # the checkout (when run from one)
OP_TESTS = ["tests/ops/test_motion_to_ctrl.py", "tests/ops/test_spline_to_ctrl.py", "tests/ops/test_record_qpos.py",
            "tests/ops/test_record_chunk.py", "tests/ops/test_pool_ommatidia.py",
            "tests/ops/test_advance_step.py", "tests/ops/test_cuda_graph.py", "tests/sim/test_streams.py",
            "tests/ops/test_episode_ops.py", "tests/ops/test_hybrid_step.py", "tests/ops/test_rule_step.py",
            "tests/ops/test_hybrid_senses.py", "tests/ops/test_connectome_step.py", "tests/ops/test_brain_step.py"]
RENDER_TESTS = ["tests/ops/test_render_tiles.py", "tests/render/test_render_top.py"]  # CPU-sized scenes: small on a GPU
SELFTEST_SOURCE = os.path.join(HERE, "selftest.cu")
NO_CACHING = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
XDIST_THREADS = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"}
# Each tool, the self-test kernel it must catch, and the words of its report.
SANITIZER_TOOLS = {"memcheck": ("oob", "Invalid __global__ write"),
                   "synccheck": ("badmask", "Barrier error"),
                   "initcheck": ("uninit", "Uninitialized __global__ memory read")}
# What ``--only`` takes: each step belongs to one group.
GROUPS = ("tests", "sanitizer", "selftest", "replay", "bench", "control", "ppo", "vision", "terrain") + lease.GROUPS
HANG_S = 120     # with xdist: a test still running after this long ends its worker (named, with its stack)
QUICK_SAMPLE = 16  # --quick: the sanitizers run every 16th case of each op test function
NEEDS_CHECKOUT = "needs a flycuda checkout (tests/ and bench/ are not installed with the package)"


def checkout_root(root: str = ROOT) -> str | None:
    """The repository root when flycuda runs from a checkout (tests/ and bench/ next
    to the package), else None (an installed package)."""
    ok = all(os.path.isdir(os.path.join(root, d)) for d in ("tests", "bench"))
    return root if ok else None


def plan(out_dir: str, python: str = sys.executable, have_warp: bool = True,
         sanitizer: str | None = None, root: str | None = ROOT, nvcc: str | None = None,
         arch: str = "native", have_flygym: bool = True, quick: bool = False, xdist: bool = False) -> list[Step]:
    """The steps of the self-check, in order. ``root``: the checkout (None: an
    installed package, whose test and benchmark steps are skipped); ``nvcc``: the
    toolkit's nvcc for the sanitizer self-test (None: skipped, said why);
    ``have_flygym``: FlyGym (NeuroMechFly's eyes, its retina and CPU vision) for the
    vision benchmark's GPU rows. ``quick``: the plan sized for a short lease (about 5
    minutes on an H100/H200 without the benchmarks' long runs): the sanitizers run every
    QUICK_SAMPLE-th case of each op test function (every function still runs), the
    benchmarks one size, the PPO curve 5 iterations, and each test step a shorter time
    limit (4 minutes for the CUDA tests, 100 s for each sanitizer: a step that needs more
    fails as timed out); ``xdist``: pytest-xdist is there, so
    the CUDA tests run in 8 processes, and a test still running after HANG_S seconds ends its
    process, named (tests/conftest.py's --hang-timeout; its stacks go to ``hung-test.<pid>``
    in ``out_dir``) instead of holding back the tests queued behind it."""
    # -rfE: the failed tests by name at the end (a crashed xdist worker's test too)
    pytest = [python, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-m", "needs_cuda"]
    no_warp = "" if have_warp else "mujoco_warp/warp are not installed"
    no_tests = "" if root else NEEDS_CHECKOUT
    no_san = "" if sanitizer else "compute-sanitizer not found"
    tool = sanitizer or "compute-sanitizer"
    sample = ["--sample-every", str(QUICK_SAMPLE)] if quick else []
    hangs = ["--hang-timeout", str(HANG_S), "--hang-log", os.path.join(out_dir, "hung-test"), "-n", "8"]
    # 8 workers each with every core's worth of CPU threads starved the CPU references (a
    # 300-world rule_step test ran past 120 s on 16 cores): 2 threads a worker.
    steps = [Step("CUDA tests", pytest + (hangs if xdist else []) + ["tests"], skip=no_tests, pytest=True,
                  group="tests", timeout=240.0 if quick else 1800.0, env=XDIST_THREADS if xdist else {})]
    for name in SANITIZER_TOOLS:
        tests = OP_TESTS + (RENDER_TESTS if name == "memcheck" else [])
        steps.append(Step(f"compute-sanitizer {name}",
                          [tool, "--tool", name, "--error-exitcode", "1"] + pytest + sample + tests,
                          skip=no_san or no_tests, env=dict(NO_CACHING), pytest=True,
                          timeout=100.0 if quick else 3600.0,
                          group="sanitizer"))
    exe = os.path.join(out_dir, "gpucheck_selftest")
    no_nvcc = "" if nvcc else "nvcc not found (the CUDA toolkit builds the self-test)"
    steps.append(Step("sanitizer self-test build", [nvcc or "nvcc", f"-arch={arch}", "-lineinfo", "-o", exe,
                                                    SELFTEST_SOURCE], skip=no_san or no_nvcc, timeout=600.0,
                      group="selftest"))
    for name, (mode, report) in SANITIZER_TOOLS.items():
        steps.append(Step(f"self-test: {name} catches '{mode}'", [tool, "--tool", name, "--error-exitcode", "1", exe, mode],
                          skip=no_san or no_nvcc, expect_report=report, timeout=60.0, group="selftest"))
        steps.append(Step(f"self-test: {name} passes 'clean'", [tool, "--tool", name, "--error-exitcode", "1", exe, "clean"],
                          skip=no_san or no_nvcc, timeout=60.0, group="selftest"))
    steps.append(Step("graph-captured replay with rendering",
                      [python, "-m", "flycuda", "replay", "--device", "cuda", "--worlds", "64", "--duration", "0.05",
                       "--steps-per-graph", "5", "--render-every", "25", "--frames",
                       os.path.join(out_dir, "replay_frame.png"), "--json", os.path.join(out_dir, "replay.json"),
                       "--no-progress"], skip=no_warp, group="replay"))
    staged = root is not None and os.path.isdir(os.path.join(root, TERRAIN_MODELS))
    steps += benchmarks(python, quick, no_warp=no_warp, no_tests=no_tests,
                        no_flygym="" if have_flygym else "FlyGym is not installed (NeuroMechFly's eyes, FlyGym's "
                                                         "retina and vision)",
                        no_terrain="" if have_flygym or staged else
                        f"FlyGym is not installed and no terrain worlds are staged in {TERRAIN_MODELS} (where FlyGym "
                        f"is: python bench/bench_terrain.py --export {TERRAIN_MODELS})", out_dir=out_dir)
    steps += lease.steps(python, out_dir, no_warp=no_warp, no_tests=no_tests, no_connectome=no_connectome())
    if root:
        for st in steps:
            st.cwd = root
    return steps


def select(steps: list[Step], only: list[str] | None) -> list[Step]:
    """The steps of the groups in ``only`` (all when None), in plan order."""
    if only is None:
        return steps
    unknown = sorted(set(only) - set(GROUPS))
    if unknown:
        raise ValueError(f"gpu-check --only: unknown group(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(GROUPS)}")
    return [st for st in steps if st.group in only]


def write_report(env: dict, outcomes: list[Outcome], out_dir: str, results_md: str) -> str:
    """report.txt + report.json in ``out_dir`` and a dated section in ``results_md``;
    returns the text report."""
    os.makedirs(out_dir, exist_ok=True)
    passed = all(o.status != "fail" for o in outcomes)
    lines = [f"flycuda gpu-check, {env['date']}: {'PASS' if passed else 'FAIL'}", ""]
    lines += [f"  {k:22s} {v}" for k, v in env.items() if k != "date"]
    lines += ["", "| step | result | seconds | summary |", "|---|---|---|---|"]
    lines += [f"| {o.name} | {o.status.upper()} | {o.seconds:.0f} | {o.summary.replace('|', '/')} |"
              for o in outcomes]
    bench = [o for o in outcomes if o.name.startswith("bench_") and o.status == "pass"]
    for o in bench:  # the benchmark tables themselves
        table = [ln for ln in o.output.splitlines() if ln.startswith("|")]
        lines += ["", f"{o.name}:", ""] + table
    text = "\n".join(lines) + "\n"
    for name, data in (("report.txt", text),
                       ("report.json", json.dumps({"env": env, "passed": passed,
                                                   "steps": [dict(dataclasses.asdict(o), output=o.output[-20000:])
                                                             for o in outcomes]}, indent=1))):
        tmp = os.path.join(out_dir, name + ".part")
        with open(tmp, "w") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out_dir, name))
    for o in outcomes:
        if o.output:
            with open(os.path.join(out_dir, log_name(o.name)), "w") as f:
                f.write(o.output)
    if results_md:
        os.makedirs(os.path.dirname(os.path.abspath(results_md)), exist_ok=True)
        with open(results_md, "a") as f:
            f.write(f"\n## {env['date']} — gpu-check on {env.get('gpu', 'no GPU')}\n\n"
                    f"- command: `flycuda gpu-check` (report: {os.path.abspath(out_dir)})\n\n"
                    + "\n".join(lines[2:]) + "\n")
    return text


def default_results(out_dir: str, root: str | None) -> str:
    """Where the dated section goes by default: bench/RESULTS.md in a checkout, else
    RESULTS.md in the output folder."""
    return os.path.join(root, "bench", "RESULTS.md") if root else os.path.join(out_dir, "RESULTS.md")


def _plan_here(out_dir: str, root: str | None, have_warp: bool, sanitizer: str | None, quick: bool) -> list[Step]:
    """:func:`plan` for this machine: its toolkit's nvcc, FlyGym and pytest-xdist as installed."""
    return plan(out_dir, have_warp=have_warp, sanitizer=sanitizer, root=root, nvcc=find_nvcc(),
                have_flygym=sys.version_info >= (3, 12) and installed("flygym"), quick=quick,
                xdist=installed("xdist"))


def dry_run(out_dir: str, quick: bool = False, only: list[str] | None = None) -> int:
    """Prints the steps ``only`` selects (all by default), each with its limit, its command and
    why it would be skipped here, without running any (no GPU needed); 1 when a step's script
    is missing from the checkout."""
    root = checkout_root()
    steps = select(_plan_here(out_dir, root, installed("mujoco_warp") and installed("warp"), compute_sanitizer(),
                              quick), only)
    missing = []
    for step in steps:
        script = next((a for a in step.argv[1:3] if a.endswith(".py")), None)
        if script and root and not os.path.isfile(os.path.join(root, script)):
            missing.append(script)
        where = f"skip: {step.skip}" if step.skip else f"limit {step.timeout:.0f} s"
        print(f"[{step.group}] {step.name} ({where})\n    {' '.join(step.argv)}")
    print(f"gpu-check --dry-run: {len(steps)} steps" + (f"; missing scripts: {', '.join(missing)}" if missing else ""))
    return 1 if missing else 0


def main(out_dir: str | None = None, results_md: str | None = None, quick: bool = False,
         only: list[str] | None = None, dry: bool = False) -> int:
    """Runs the self-check; returns the exit status. ``quick``: the plan sized for a short
    lease (see :func:`plan`); ``only``: run the steps of these GROUPS alone; ``dry``: list
    them (:func:`dry_run`)."""
    if dry:
        return dry_run(os.path.abspath(out_dir or os.environ.get("OUT") or "out/gpu-check-dry-run"), quick, only)
    if not torch.cuda.is_available():
        print("flycuda gpu-check: no CUDA GPU is visible to torch (torch.cuda.is_available() is False); "
              "nothing to check here", file=sys.stderr)
        return 1
    if not flycuda.has_cuda_ops():
        print("flycuda gpu-check: flycuda was built without its CUDA kernels (FLYCUDA_FORCE_CPU=1 or no "
              "toolkit at build time); rebuild with CUDA_HOME set", file=sys.stderr)
        return 1
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    root = checkout_root()
    out_dir = os.path.abspath(out_dir or os.environ.get("OUT") or
                              os.path.join(root or os.getcwd(), "out", f"gpu-check-{stamp}"))
    os.makedirs(out_dir, exist_ok=True)
    results_md = results_md or default_results(out_dir, root)
    if not root:
        print(f"flycuda gpu-check: the CUDA tests, sanitizer runs of the tests and benchmarks {NEEDS_CHECKOUT}; "
              f"running the rest", file=sys.stderr)
    env = environment()
    print("\n".join(f"{k:22s} {v}" for k, v in env.items()), flush=True)
    have_warp = not str(env.get("mujoco_warp", "")).startswith("not importable")
    outcomes = []
    for step in select(_plan_here(out_dir, root, have_warp, env["compute_sanitizer"], quick), only):
        print(f"gpu-check: {step.name} ...", flush=True)
        o = run_step(step, live_dir=out_dir)
        print(f"gpu-check: {step.name}: {o.status.upper()} ({o.seconds:.0f} s) {o.summary}", flush=True)
        outcomes.append(o)
    print(write_report(env, outcomes, out_dir, results_md))
    failed = [o.name for o in outcomes if o.status == "fail"]
    print(f"gpu-check: {'PASS' if not failed else 'FAIL: ' + ', '.join(failed)} (report in {out_dir})")
    return 1 if failed else 0
