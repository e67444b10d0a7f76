"""torchrun scale-out on CPU (gloo): shares, equality with one process, failing ranks."""

import os
import subprocess
import sys

import numpy as np
import pytest

from flycuda.distributed import split_worlds


@pytest.mark.parametrize("total,ranks,expect", [
    (4, 2, [(0, 2), (2, 2)]),
    (5, 2, [(0, 3), (3, 2)]),
    (7, 3, [(0, 3), (3, 2), (5, 2)]),
    (1, 2, [(0, 1), (1, 0)]),
])
def test_split_worlds_is_contiguous_and_uneven(total, ranks, expect):
    shares = split_worlds(total, ranks)
    assert shares == expect
    assert sum(n for _, n in shares) == total


def _torchrun(nproc, args, tmp_path, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", FLYCUDA_DIST_TIMEOUT="120")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "flycuda", "replay", "--no-progress", "--device", "cpu"] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)


@pytest.mark.needs_warp
def test_two_ranks_equal_one_process(tmp_path):
    from flycuda.replay import replay

    out = tmp_path / "rec.npz"
    proc = _torchrun(2, ["--worlds", "4", "--snippet", "0.1", "--duration", "0.006", "--record", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "on 2 ranks" in proc.stdout and "per-rank wall" in proc.stdout
    single = replay(worlds=4, snippet=0.1, duration=0.006, device="cpu", progress=False)
    got = np.load(out)["recorded"]
    assert got.shape == (4, 13, 42)
    assert np.array_equal(got, single.recorded.numpy())


@pytest.mark.needs_warp
def test_a_failing_rank_ends_the_job_with_its_error(tmp_path):
    """1 world over 2 ranks: rank 1 has nothing to run and fails in its own setup;
    rank 0 must report it and the job must end (no hang)."""
    proc = _torchrun(2, ["--worlds", "1", "--duration", "0.002"], tmp_path, timeout=240)
    assert proc.returncode != 0
    assert "flycuda: error: rank 1: no worlds to run" in proc.stderr
