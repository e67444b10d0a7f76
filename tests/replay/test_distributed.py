"""torchrun scale-out on CPU (gloo): shares, equality with one process, failing ranks."""

import os
import subprocess
import sys

import numpy as np
import pytest

from flycuda.replay.distributed import split_worlds


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
def test_two_ranks_write_one_store_equal_to_one_process(tmp_path):
    """5 worlds over 2 ranks (3 + 2: world chunks of 1 so no chunk straddles the ranks),
    several observables at their own rates: the ranks' store equals one process's bit for
    bit, is marked complete once, and rank 0's report holds the whole job's RMSE."""
    from flycuda.recording import Recording
    from flycuda.replay import replay

    out = tmp_path / "rec.zarr"
    observe = ["qpos@4", "body_pos:Thorax"]
    proc = _torchrun(2, ["--worlds", "5", "--snippet", "0.1", "--duration", "0.006", "--record", str(out),
                         "--observe", *observe], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "on 2 ranks" in proc.stdout and "per-rank wall" in proc.stdout
    single = replay(worlds=5, snippet=0.1, duration=0.006, device="cpu", progress=False, record="memory",
                    observe=["angles", *observe])
    got = Recording.open(out)
    assert got.complete and got.info["ranks"] == 2 and got["angles"].chunks[0] == 1
    assert got.names == single.recording.names
    for name in got.names:
        assert np.array_equal(np.asarray(got[name][:]), np.asarray(single.recording[name][:])), name
        assert got[name].attrs["rows_written"] == got[name].shape[1], name
    assert np.allclose(got.info["rmse_per_dof"], single.rmse_per_dof.numpy(), rtol=1e-5)


@pytest.mark.needs_warp
def test_npz_is_refused_under_torchrun(tmp_path):
    proc = _torchrun(2, ["--worlds", "2", "--duration", "0.002", "--record", str(tmp_path / "r.npz")], tmp_path)
    assert proc.returncode != 0 and "use a .zarr store with torchrun" in proc.stderr


@pytest.mark.needs_warp
def test_a_failing_rank_ends_the_job_with_its_error(tmp_path):
    """1 world over 2 ranks: rank 1 has nothing to run and fails in its own setup;
    rank 0 must report it and the job must end (no hang)."""
    out = tmp_path / "r.zarr"
    proc = _torchrun(2, ["--worlds", "1", "--duration", "0.002", "--record", str(out)], tmp_path, timeout=240)
    assert proc.returncode != 0
    assert "flycuda: error: rank 1: no worlds to run" in proc.stderr
    if out.exists():  # rank 0 may have created it: it must say it is incomplete
        from flycuda.recording import Recording

        rec = Recording.open(out)
        assert not rec.complete and "rank 1: no worlds to run" in rec.info["status"]
