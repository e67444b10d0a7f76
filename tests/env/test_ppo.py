"""examples/ppo.py beyond one process and one action kind: two torchrun ranks on the CPU train one
policy (gloo all-reduce of every minibatch's gradients: the ranks end with the same parameters,
their worlds their own), and PPO over descending drives on NeuroMechFly (FlyGym lane)."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PPO = os.path.join(ROOT, "examples", "ppo.py")


def test_two_ranks_train_one_policy():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p),
               OMP_NUM_THREADS="1")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", PPO,
            "--task", "walk", "--worlds", "3", "--iterations", "2", "--horizon", "4", "--device", "cpu"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines if ln.startswith("iteration")] == ["iteration 0", "iteration 1"]
    sums = {m.group(1): m.group(2) for m in re.finditer(r"rank (\d): parameter sum (-?\d\.\d+e[+-]\d+)", proc.stdout)}
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"], sums  # all-reduced: one policy
    assert "env steps/s" in proc.stdout


@pytest.mark.needs_flygym
def test_ppo_over_descending_drives():
    spec = importlib.util.spec_from_file_location("flycuda_example_ppo", PPO)
    ppo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ppo)
    curve = ppo.main(["--task", "walk", "--model", "neuromechfly", "--action", "descending", "--worlds", "2",
                      "--iterations", "1", "--horizon", "3", "--device", "cpu"])
    assert len(curve) == 1 and math.isfinite(curve[0])


def test_a_checkpointed_run_resumes_bit_for_bit(tmp_path):
    """--checkpoint after every iteration, --resume from it: a run stopped after 2 iterations and
    resumed for a third ends where one run of 3 does (every iteration's mean reward equal), its
    environment, policy, optimizer and generators restored."""
    spec = importlib.util.spec_from_file_location("flycuda_example_ppo_ckpt", PPO)
    ppo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ppo)
    args = ["--task", "walk", "--worlds", "3", "--horizon", "4", "--device", "cpu"]
    whole = ppo.main(args + ["--iterations", "3", "--checkpoint", str(tmp_path / "a.pt")])
    ppo.main(args + ["--iterations", "2", "--checkpoint", str(tmp_path / "b.pt")])
    resumed = ppo.main(args + ["--iterations", "3", "--checkpoint", str(tmp_path / "b.pt"), "--resume"])
    assert len(whole) == 3 and resumed == whole
