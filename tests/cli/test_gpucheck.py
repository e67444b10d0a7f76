"""The GPU self-check's host logic, on a machine without a GPU."""

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from flycuda import gpucheck
from flycuda.driver import driver_cuda

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_gpu_says_so_in_one_line_and_fails():
    proc = subprocess.run([sys.executable, "-m", "flycuda", "gpu-check"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("flycuda gpu-check")]
    assert len(lines) == 1 and "no CUDA GPU is visible" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


STEPS = ["CUDA tests", "compute-sanitizer memcheck", "compute-sanitizer synccheck", "compute-sanitizer initcheck",
         "sanitizer self-test build", "self-test: memcheck catches 'oob'", "self-test: memcheck passes 'clean'",
         "self-test: synccheck catches 'badmask'", "self-test: synccheck passes 'clean'",
         "self-test: initcheck catches 'uninit'", "self-test: initcheck passes 'clean'",
         "graph-captured replay with rendering", "bench_ops", "bench_control", "bench_replay", "bench_render", "bench_env",
         "bench_odor", "bench_connectome", "PPO on flycuda.env (a learning curve)", "bench_vision", "bench_terrain"]
LEASE = ["bench_connectome (against SpMM)", "bench_replay (NeuroMechFly)", "bench_render (NeuroMechFly)",
         "env with the eyes (NeuroMechFly, fast:2)", "env with the descending drives (NeuroMechFly)",
         "bench_env --reset-branch (NeuroMechFly)", "bench_odor (4,096 worlds)",
         "bench_brain (139,255 neurons, 1/32/256 brains)"]  # issue 53's device script, and issue 55's brains
NMF = LEASE[1:6]  # those that need NeuroMechFly (flycuda.gpucheck.lease)
STEPS = STEPS + LEASE


@pytest.fixture(autouse=True)
def frozen_fly(tmp_path_factory, monkeypatch):
    """A folder where a frozen NeuroMechFly would be, so that the plans do not depend on FlyGym."""
    path = tmp_path_factory.mktemp("nmf")
    (path / "neuromechfly-flat.tar.xz").write_bytes(b"")
    monkeypatch.setenv("FLYCUDA_NEUROMECHFLY", str(path))
    return path


@pytest.fixture(autouse=True)
def connectome_file(tmp_path_factory, monkeypatch):
    """bench_connectome's connectome file, so that the plans do not depend on an installed flyvis."""
    path = tmp_path_factory.mktemp("connectome") / "fib25-fib19_v2.2.json"
    path.write_text("{}")
    monkeypatch.setenv("FLYCUDA_CONNECTOME", str(path))
    return path


def test_bench_connectome_needs_the_connectome_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FLYCUDA_CONNECTOME", str(tmp_path / "missing.json"))
    steps = {s.name: s for s in gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc")}
    assert steps["bench_connectome"].skip.startswith("no flyvis connectome file")
    assert not steps["bench_odor"].skip


def test_plan_covers_every_part_of_the_check(tmp_path):
    steps = gpucheck.plan(str(tmp_path), python="py", have_warp=True, sanitizer="/cuda/bin/compute-sanitizer",
                          root="/repo", nvcc="/cuda/bin/nvcc")
    by = {s.name: s for s in steps}
    assert [s.name for s in steps] == STEPS
    assert all(not s.skip for s in steps) and all(s.cwd == "/repo" for s in steps)
    assert steps[0].argv[-2:] == ["needs_cuda", "tests"] and steps[0].pytest
    assert "racecheck" not in " ".join(" ".join(s.argv) for s in steps)  # it cannot fail on flycuda (no smem)
    for tool in ("memcheck", "synccheck", "initcheck"):
        st = by[f"compute-sanitizer {tool}"]
        assert st.argv[:5] == ["/cuda/bin/compute-sanitizer", "--tool", tool, "--error-exitcode", "1"]
        assert st.env == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} and st.pytest  # the caching allocator off
    assert "tests/ops/test_render_tiles.py" in by["compute-sanitizer memcheck"].argv  # render tests under memcheck
    assert "tests/ops/test_spline_to_ctrl.py" in by["compute-sanitizer initcheck"].argv
    assert "tests/ops/test_episode_ops.py" in by["compute-sanitizer memcheck"].argv
    assert by["bench_env"].argv[:2] == ["py", "bench/bench_env.py"] and "4096" in by["bench_env"].argv
    build = by["sanitizer self-test build"]
    assert build.argv[0] == "/cuda/bin/nvcc" and build.argv[-1] == gpucheck.SELFTEST_SOURCE
    exe = build.argv[build.argv.index("-o") + 1]
    for tool, (mode, report) in gpucheck.SANITIZER_TOOLS.items():
        caught, clean = by[f"self-test: {tool} catches '{mode}'"], by[f"self-test: {tool} passes 'clean'"]
        assert caught.argv[-2:] == [exe, mode] and caught.expect_report == report
        assert clean.argv[-2:] == [exe, "clean"] and not clean.expect_report
    assert "--device" in by["graph-captured replay with rendering"].argv and "--frames" in by[
        "graph-captured replay with rendering"].argv
    bare = gpucheck.plan(str(tmp_path), python="py", have_warp=False, sanitizer=None, root="/repo", nvcc=None)
    skipped = {s.name for s in bare if s.skip}
    assert skipped == set(STEPS) - {"CUDA tests", "bench_ops", "bench_control", "bench_odor", "bench_connectome",
                                    "bench_connectome (against SpMM)", LEASE[-1]}  # bench_brain: torch alone
    assert "--no-warp" in [s for s in bare if s.name == "bench_ops"][0].argv  # bench_ops still runs
    vision = by["bench_vision"]
    assert vision.argv[vision.argv.index("--worlds") + 1:][:2] == ["1000", "8192"] and vision.env["MUJOCO_GL"] == "osmesa"
    no_fly = {s.name: s.skip for s in gpucheck.plan(str(tmp_path), python="py", have_warp=True, sanitizer="cs",
                                                     root="/repo", nvcc="nvcc", have_flygym=False) if s.skip}
    assert list(no_fly) == ["bench_vision", "bench_terrain"] and "FlyGym is not installed" in no_fly["bench_vision"]
    # (the lease's NeuroMechFly steps run on the frozen fly: frozen_fly)
    assert "no terrain worlds are staged in .devstage/terrain" in no_fly["bench_terrain"]
    terrain = by["bench_terrain"].argv
    assert terrain[terrain.index("--worlds") + 1] == "1000" and terrain[terrain.index("--seconds") + 1] == "1.5"


def test_installed_package_skips_what_needs_a_checkout(tmp_path):
    """From an installed flycuda (no tests/, bench/): the tests and benchmarks say in
    one line that they need a checkout; the self-test and the replay still run."""
    assert gpucheck.checkout_root(str(tmp_path)) is None
    (tmp_path / "tests").mkdir()
    (tmp_path / "bench").mkdir()
    assert gpucheck.checkout_root(str(tmp_path)) == str(tmp_path)
    assert gpucheck.checkout_root() == os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(gpucheck.__file__))))
    steps = gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root=None, nvcc="nvcc")
    skipped = {s.name: s.skip for s in steps if s.skip}
    assert set(skipped) == {"CUDA tests", "compute-sanitizer memcheck", "compute-sanitizer synccheck",
                            "compute-sanitizer initcheck", "bench_ops", "bench_control", "bench_replay", "bench_render", "bench_env",
                            "bench_odor", "bench_connectome", "PPO on flycuda.env (a learning curve)", "bench_vision",
                            "bench_terrain"} | set(LEASE)
    assert all(v == gpucheck.NEEDS_CHECKOUT for k, v in skipped.items() if k not in NMF)
    assert all(s.cwd is None for s in steps)
    assert os.path.isfile(gpucheck.SELFTEST_SOURCE)  # shipped in the package (pyproject package-data)


def test_each_step_can_fail():
    """A pytest step where nothing passed fails; a self-test step passes only when the
    tool fails with its report; a clean self-test step passes on exit 0 only."""
    py = gpucheck.Step("t", ["x"], pytest=True)
    assert gpucheck.judge(py, 0, "12 passed, 3 skipped in 1.0s")[0]
    assert not gpucheck.judge(py, 0, "40 skipped in 1.0s")[0]
    assert not gpucheck.judge(py, 5, "no tests ran in 0.1s")[0]
    assert not gpucheck.judge(py, 1, "1 failed, 3 passed")[0]
    caught = gpucheck.Step("c", ["x"], expect_report="Invalid __global__ write")
    ok, summary = gpucheck.judge(caught, 1, "========= Invalid __global__ write of size 4 bytes\nERROR SUMMARY: 1 error")
    assert ok and "caught" in summary
    assert not gpucheck.judge(caught, 0, "ERROR SUMMARY: 0 errors")[0]  # the tool missed its bug
    assert not gpucheck.judge(caught, 1, "gpucheck_selftest: cudaMalloc: no CUDA-capable device")[0]
    plain = gpucheck.Step("p", ["x"])
    assert gpucheck.judge(plain, 0, "done")[0] and not gpucheck.judge(plain, 1, "boom")[0]


def test_selftest_steps_outcomes():
    """The self-test steps' outcomes, with a stand-in for compute-sanitizer."""
    fake = [sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(int(sys.argv[2]))"]
    caught = gpucheck.run_step(gpucheck.Step("c", fake + ["Barrier error detected", "1"], expect_report="Barrier error"))
    missed = gpucheck.run_step(gpucheck.Step("m", fake + ["ERROR SUMMARY: 0 errors", "0"], expect_report="Barrier error"))
    assert (caught.status, missed.status) == ("pass", "fail")
    assert "NOT caught" in missed.summary
    env = gpucheck.run_step(gpucheck.Step("e", [sys.executable, "-c",
                                                "import os; print(os.environ['PYTORCH_NO_CUDA_MEMORY_CACHING'], "
                                                "'1 passed')"], env=dict(gpucheck.NO_CACHING), pytest=True))
    assert env.status == "pass" and env.output.startswith("1 1 passed")


def test_selftest_program_compiles_for_sm90(tmp_path):
    """The broken kernels build with the toolkit's nvcc (no GPU needed to compile)."""
    nvcc = gpucheck.find_nvcc()
    if nvcc is None:
        pytest.skip("no CUDA toolkit")
    res = subprocess.run([nvcc, "-arch=sm_90", "-lineinfo", "-o", str(tmp_path / "selftest"), gpucheck.SELFTEST_SOURCE],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(tmp_path / "selftest")], capture_output=True, text=True)
    assert out.returncode == 2 and "usage" in out.stderr


def test_run_step_records_pass_fail_and_summary():
    ok = gpucheck.run_step(gpucheck.Step("ok", [sys.executable, "-c", "print('3 passed, 1 skipped in 0.1s')"]))
    bad = gpucheck.run_step(gpucheck.Step("bad", [sys.executable, "-c", "import sys; print('1 failed'); sys.exit(1)"]))
    missing = gpucheck.run_step(gpucheck.Step("missing", ["/no/such/program"]))
    skipped = gpucheck.run_step(gpucheck.Step("skipped", ["x"], skip="not here"))
    assert (ok.status, ok.summary) == ("pass", "3 passed, 1 skipped in 0.1s")
    assert (bad.status, bad.summary) == ("fail", "1 failed")
    assert missing.status == "fail" and "could not start" in missing.output
    assert (skipped.status, skipped.summary) == ("skip", "not here")


def test_report_text_json_and_results_section(tmp_path):
    env = {"date": "2026-11-22 12:00 UTC", "gpu": "NVIDIA H100 (sm_90, 80 GiB)", "torch": "2.11.0"}
    outcomes = [gpucheck.Outcome("CUDA tests", "pass", 12.0, "40 passed"),
                gpucheck.Outcome("bench_ops", "pass", 30.0, "done", "noise\n| worlds | us |\n|---|---|\n| 100 | 1.0 |\n"),
                gpucheck.Outcome("compute-sanitizer memcheck", "fail", 50.0, "1 failed", "ERROR SUMMARY: 1 error")]
    results = tmp_path / "RESULTS.md"
    results.write_text("# old\n")
    text = gpucheck.write_report(env, outcomes, str(tmp_path / "rep"), str(results))
    assert text.startswith("flycuda gpu-check, 2026-11-22 12:00 UTC: FAIL")
    assert "| compute-sanitizer memcheck | FAIL | 50 | 1 failed |" in text and "| 100 | 1.0 |" in text
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["passed"] is False and [s["status"] for s in doc["steps"]] == ["pass", "pass", "fail"]
    assert (tmp_path / "rep" / "report.txt").read_text() == text
    assert "ERROR SUMMARY" in (tmp_path / "rep" / "compute-sanitizer_memcheck.log").read_text()
    gpucheck.write_report(env, outcomes, str(tmp_path / "rep2"), None)  # no results file asked: none written
    assert not (tmp_path / "rep2" / "RESULTS.md").exists()
    assert gpucheck.default_results("/o", None) == "/o/RESULTS.md"
    assert gpucheck.default_results("/o", "/repo") == "/repo/bench/RESULTS.md"
    md = results.read_text()
    assert md.startswith("# old\n") and "## 2026-11-22 12:00 UTC — gpu-check on NVIDIA H100" in md
    assert not any(p.endswith(".part") for p in os.listdir(tmp_path / "rep"))


def test_environment_names_the_build():
    env = gpucheck.environment()
    for key in ("python", "torch", "torch_cuda_compiled", "cuda_runtime", "cuda_driver", "flycuda_build", "warp",
                "mujoco_warp", "driver", "compute_sanitizer"):
        assert key in env
    assert "host_flags" in env["flycuda_build"]


def test_true_runtime_and_driver_versions():
    """The runtime's own version (cudaRuntimeGetVersion of a real libcudart), not
    torch's compiled one; the driver's (cuDriverGetVersion), or why it is unknown."""
    rt = gpucheck.cuda_runtime_version()
    assert rt.startswith("unknown") or re.match(r"\d+\.\d+ \(libcudart", rt), rt
    assert gpucheck.cuda_runtime_version("/no/such/libcudart.so").startswith("unknown")
    drv = driver_cuda()
    assert re.match(r"\d+\.\d+$", drv) or drv.startswith("unknown"), drv
    assert "not loadable" in driver_cuda("/no/such/libcuda.so.1")


def test_main_from_an_installed_package(tmp_path, monkeypatch, capsys):
    """gpu-check run from an installed flycuda (no checkout) on a GPU machine (mocked):
    it says in one line what needs a checkout, writes its report where asked, and
    appends no section to a bench/RESULTS.md that does not exist."""
    import flycuda

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(flycuda, "has_cuda_ops", lambda: True)
    monkeypatch.setattr(gpucheck, "checkout_root", lambda root=None: None)
    monkeypatch.setattr(gpucheck, "environment", lambda: {"date": "2026-11-23 06:00 UTC", "gpu": "H100",
                                                          "compute_sanitizer": "cs", "mujoco_warp": "3.16"})
    ran = []
    monkeypatch.setattr(gpucheck, "run_step", lambda st, live_dir=None: ran.append(st) or gpucheck.Outcome(
        st.name, "skip" if st.skip else "pass", 0.0, st.skip or "ok"))
    assert gpucheck.main(str(tmp_path / "rep"), None) == 0
    err = capsys.readouterr().err
    assert err.count(gpucheck.NEEDS_CHECKOUT) == 1
    assert (tmp_path / "rep" / "report.txt").exists() and (tmp_path / "rep" / "RESULTS.md").exists()
    assert {st.name for st in ran if not st.skip} >= {"sanitizer self-test build", "graph-captured replay with rendering"}


def test_quick_plan_fits_a_short_lease(tmp_path):
    """--quick: the sanitizers sample each op test function's cases, every benchmark runs
    one size, PPO 5 iterations; with pytest-xdist the CUDA tests run in 8 processes, a hung
    test ending its own."""
    full = {s.name: s for s in gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc")}
    quick = {s.name: s for s in gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc",
                                              quick=True, xdist=True)}
    assert list(quick) == list(full) == STEPS
    for tool in gpucheck.SANITIZER_TOOLS:
        argv = quick[f"compute-sanitizer {tool}"].argv
        assert argv[argv.index("--sample-every") + 1] == str(gpucheck.QUICK_SAMPLE)
        assert "--sample-every" not in full[f"compute-sanitizer {tool}"].argv
    tests = quick["CUDA tests"].argv
    assert tests[-3:] == ["-n", "8", "tests"] and "-n" not in full["CUDA tests"].argv
    assert tests[tests.index("--hang-timeout") + 1] == str(gpucheck.HANG_S)
    assert tests[tests.index("--hang-log") + 1] == str(tmp_path / "hung-test")
    assert quick["CUDA tests"].env["OMP_NUM_THREADS"] == "2" and not full["CUDA tests"].env  # 8 workers share the cores
    worlds = quick["bench_ops"].argv
    assert worlds[worlds.index("--worlds") + 1:worlds.index("--steps")] == ["4096"]
    ppo = quick["PPO on flycuda.env (a learning curve)"].argv
    assert ppo[ppo.index("--iterations") + 1] == "5"
    assert {s.group for s in full.values()} == set(gpucheck.GROUPS)


def test_only_runs_the_groups_named(tmp_path):
    steps = gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc")
    picked = gpucheck.select(steps, ["selftest", "tests"])
    assert [s.name for s in picked] == [STEPS[0]] + STEPS[4:11]  # the CUDA tests, the sanitizers' self-test
    assert gpucheck.select(steps, None) == steps
    with pytest.raises(ValueError, match="unknown group.*nope"):
        gpucheck.select(steps, ["nope"])
    proc = subprocess.run([sys.executable, "-m", "flycuda", "gpu-check", "--only", "tests,nope"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "--only" in proc.stderr and "'tests,nope'" in proc.stderr


def test_sample_every_keeps_every_nth_case_of_each_function():
    """The tests' --sample-every N (the quick sanitizer runs): of each test function's
    cases that -m/-k leave, the 1st, (N+1)th, ...; every function keeps one."""
    def collected(*extra):
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "-m", "not emu", "tests/ops/test_spline_to_ctrl.py", *extra],
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        return [ln for ln in out.stdout.splitlines() if "::" in ln]

    every = collected()
    sampled = collected("--sample-every", "3")
    by_function: dict = {}
    for name in every:
        by_function.setdefault(name.split("[")[0], []).append(name)
    assert sampled == [n for cases in by_function.values() for n in cases[::3]]
    assert len(sampled) < len(every) and {n.split("[")[0] for n in sampled} == set(by_function)


def test_a_crash_is_named_and_scripts_see_the_checkout(tmp_path):
    """A step killed by a signal says so (a segfault prints no closing line); a step run
    from a checkout finds its flycuda through PYTHONPATH (bench/ scripts, no install)."""
    ok, summary = gpucheck.judge(gpucheck.Step("x", ["x"], pytest=True), -11, "")
    assert not ok and summary == "crashed (SIGSEGV)"
    ok, summary = gpucheck.judge(gpucheck.Step("x", ["x"]), -6, "Fatal Python error: Aborted\n")
    assert not ok and summary.startswith("crashed (SIGABRT)")
    probe = gpucheck.Step("probe", [sys.executable, "-c", "import os; print(os.environ['PYTHONPATH'])"],
                          cwd=str(tmp_path))
    out = gpucheck.run_step(probe)
    assert out.status == "pass" and out.output.split()[0].split(os.pathsep)[0] == str(tmp_path)


def test_a_step_past_its_limit_is_interrupted_then_killed():
    """Past its limit a step gets SIGINT (pytest prints what failed so far) and, if it
    goes on, SIGKILL after the grace period; either way it counts as timed out."""
    polite = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda *a: (print('summary so far'), sys.exit(2)))\n"
              "print('started', flush=True); time.sleep(60)")
    code, out = gpucheck.run_with_grace([sys.executable, "-c", polite], None, dict(os.environ), timeout=2, grace=20)
    assert code is None and "started" in out and "summary so far" in out
    stubborn = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    code, out = gpucheck.run_with_grace([sys.executable, "-c", stubborn], None, dict(os.environ), timeout=2, grace=1)
    assert code is None and "up" in out
    code, out = gpucheck.run_with_grace([sys.executable, "-c", "print('quick')"], None, dict(os.environ), timeout=30)
    assert code == 0 and out == "quick\n"


def test_nothing_of_a_step_outlives_it(tmp_path):
    """A step that leaves a child behind (a worker, a server) and exits: the child is ended
    with it, and the output comes back whatever its bytes."""
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(p.pid, flush=True); sys.stdout.buffer.write(b'bad byte: \\xff\\n')")
    code, out = gpucheck.run_with_grace([sys.executable, "-c", script], None, dict(os.environ), timeout=60)
    assert code == 0 and "bad byte: \ufffd" in out
    child = int(out.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{child}/stat") as f:  # a zombie (ended, not yet reaped by init) counts as ended
            if f.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"the step's child {child} outlived it")


def test_a_step_writes_its_log_as_it_runs(tmp_path):
    """A lease cut short (the device call's own limit ends gpu-check itself) still brings
    back what the running step had printed: its log is written under the report folder
    as it comes, stdout and stderr in the order they came."""
    script = ("import os, sys, time\nprint('built', flush=True); print('warn', file=sys.stderr, flush=True)\n"
              "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
              "time.sleep(60)")
    flag = tmp_path / "running"
    step = gpucheck.Step("bench thing", [sys.executable, "-c", script, str(flag)], timeout=30)
    proc = subprocess.Popen([sys.executable, "-c", "import sys, pickle; from flycuda import gpucheck; "
                             "gpucheck.run_step(pickle.loads(bytes.fromhex(sys.argv[1])), live_dir=sys.argv[2])",
                             pickle.dumps(step).hex(), str(tmp_path)], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists()
        assert (tmp_path / "bench_thing.log").read_text() == "built\nwarn\n"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if flag.exists():
            os.kill(int(flag.read_text()), signal.SIGKILL)  # the step, in a session of its own


def test_a_hung_test_is_named_and_the_tests_after_it_run(tmp_path):
    """tests/conftest.py's --hang-timeout (gpu-check's CUDA tests): under pytest-xdist a
    test past the limit ends its worker, which xdist reports by the test's name; the tests
    queued behind it still run; the stacks land in the --hang-log file, and no file is
    left for the tests that ended."""
    pytest.importorskip("xdist")
    (tmp_path / "test_hang.py").write_text("import time\n"
                                           "def test_quick(): pass\n"
                                           "def test_hangs(): time.sleep(120)\n"
                                           + "".join(f"def test_after_{i}(): pass\n" for i in range(6)))
    log = tmp_path / "logs" / "hung"
    log.parent.mkdir()
    argv = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-p", "conftest", "-n", "2",
            "--hang-timeout", "3", "--hang-log", str(log), str(tmp_path / "test_hang.py")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests"), ROOT]))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"FAILED .*test_hang.py::test_hangs - worker 'gw\d' crashed", proc.stdout), proc.stdout
    assert "1 failed, 7 passed" in proc.stdout
    files = list(log.parent.iterdir())
    assert len(files) == 1 and files[0].name.startswith("hung.")
    text = files[0].read_text()
    assert text.startswith("test_hang.py::test_hangs: still running after 3 s") and "in test_hangs" in text
    refused = subprocess.run(argv[:9] + argv[11:], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert refused.returncode == 4 and "use it with pytest-xdist" in refused.stderr


def test_the_device_script_measures_the_real_fly_and_its_anchors(tmp_path, monkeypatch):
    """Issue 53's steps: the replay at 1,000, 4,096 and 8,192 worlds, the renderer at both
    sizes on NeuroMechFly and fly-mesh, both envs at 4,096 worlds, the network at 1,024 and
    4,096 flies; without FlyGym or a frozen fly the NeuroMechFly steps say how to make one."""
    by = {s.name: s for s in gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc")}
    argv = lambda name: " ".join(by[name].argv)  # noqa: E731
    assert "--models neuromechfly --worlds 1000 4096 8192" in argv("bench_replay (NeuroMechFly)")
    assert "--scenes neuromechfly fly-mesh --worlds 1000 --sizes 64x64 320x240" in argv("bench_render (NeuroMechFly)")
    assert "--gpu-flies 1024 4096" in argv("bench_connectome (against SpMM)")
    assert "--vision fast:2" in argv(NMF[2]) and "--action descending" in argv(NMF[3])
    assert all("--worlds 4096" in argv(n) for n in NMF[2:])
    assert {by[n].group for n in LEASE} == {"connectome", "nmf", "brain"}
    assert "--neurons 139255 --full-brains 1 32 256 --full-duration 1.0" in argv(LEASE[-1])
    monkeypatch.setenv("FLYCUDA_NEUROMECHFLY", str(tmp_path / "none"))
    monkeypatch.setattr(gpucheck.lease.st, "installed", lambda m: m != "flygym")
    bare = {s.name: s.skip for s in gpucheck.plan(str(tmp_path), python="py", sanitizer="cs", root="/repo", nvcc="nvcc")}
    assert all("python -m flycuda.flygym.freeze DIR" in bare[n] for n in NMF)


def test_dry_run_lists_the_steps_without_a_gpu(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "flycuda", "gpu-check", "--dry-run", "--only", "nmf,connectome,brain",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    listed = re.findall(r"^\[(\w+)\] (.+?) \((?:limit|skip)", proc.stdout, re.M)
    assert [n for _, n in listed] == LEASE and {g for g, _ in listed} == {"nmf", "connectome", "brain"}
    assert f"gpu-check --dry-run: {len(LEASE)} steps" in proc.stdout and not list(tmp_path.iterdir())  # nothing ran
