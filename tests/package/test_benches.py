"""The benchmarks gpu-check runs still run: each at a tiny size on the CPU, without a
row in bench/RESULTS.md (a GPU lease once lost bench_env to an observation set the env
had learned to refuse). Their numbers are not checked here: they live in bench/."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BENCHES = {  # name: (arguments, tables printed)
    "bench_env": (["--worlds", "4", "--steps", "2", "--rounds", "1", "--device", "cpu"], 2),
    "bench_connectome": (["--flies", "1", "--steps", "1", "--repeats", "1", "--no-memory"], 1),  # against flyvis
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.needs_flyvis] if n == "bench_connectome" else [])
                                  for n in sorted(BENCHES)])
def test_bench_runs_tiny_on_cpu(name):
    pytest.importorskip("mujoco_warp")
    args, tables = BENCHES[name]
    proc = subprocess.run([sys.executable, f"bench/{name}.py", *args, "--no-results"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("|---") >= tables, proc.stdout[-2000:]  # its tables


def test_bench_env_refuses_an_eager_fallback_as_the_captured_env(monkeypatch):
    """On CUDA, a flycuda.env row times the captured step: an env whose capture failed (so that
    it runs eagerly) is refused in one line, not reported under flycuda.env's name."""
    import types

    import torch

    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    bench_env = pytest.importorskip("bench_env")
    eager = types.SimpleNamespace(device=torch.device("cuda", 0), captured=False)
    with pytest.raises(SystemExit, match="flycuda.env's control step is not a CUDA graph .* refusing to report"):
        bench_env.require_graph(eager)
    bench_env.require_graph(types.SimpleNamespace(device=torch.device("cuda", 0), captured=True))
    bench_env.require_graph(types.SimpleNamespace(device=torch.device("cpu"), captured=False))  # no graphs there
