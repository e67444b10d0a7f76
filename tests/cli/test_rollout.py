"""``flycuda env --record``: a rollout killed (SIGKILL at three points) or preempted (SIGTERM)
goes on with ``flycuda env --resume STORE`` into a store equal, bit for bit, to the store of a
run never stopped; what cannot be resumed is refused in one line with nothing written."""

import json
import os
import shutil
import signal

import pytest
from helpers.killed import assert_same_store, copy_run, killed, store_digest

pytestmark = pytest.mark.needs_warp

# 3 hexapod worlds walking on a random policy, 40 control steps; chunks of 8 KiB: 4 rows of
# observations (137 columns) a chunk, so a snapshot every 4 steps
ARGV = ["env", "walk", "--worlds", "3", "--duration", "0.2", "--seed", "3", "--chunk-kib", "8", "--no-progress"]


def flycuda(*argv) -> int:
    from flycuda.cli.main import main

    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref.zarr"
    assert flycuda(*ARGV, "--record", path, "--json", path.with_suffix(".json")) == 0
    return path


def _figures(path) -> dict:
    """The report's figures a rollout's running sums make (its JSON)."""
    f = json.loads(path.read_text())
    return {k: f[k] for k in ("mean_reward", "terminations", "truncations", "overflows", "nonfinite")}


def _resume(store, capsys) -> str:
    capsys.readouterr()
    assert flycuda("env", "--resume", store, "--no-progress") == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("at,n", [("step", 13), ("flush", 3), ("snapshot-part", 3), ("snapshot-marker", 3)],
                         ids=["mid-chunk", "after-a-flush", "in-a-snapshot-file", "before-its-marker"])
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, reference, at, n, capsys):
    from flycuda.recording.runs import open_run

    store = tmp_path / "run.zarr"
    assert killed(store, at, n, argv=ARGV) == -signal.SIGKILL
    assert open_run(store).state == "interrupted"
    out = _resume(store, capsys)
    # snapshots follow the chunks of observations (4 rows: steps 0-3, 4-7, ...) at steps 3, 7, 11, ...
    latest = {"step": 11, "flush": 7, "snapshot-part": 7, "snapshot-marker": 7}[at]  # (flush 3: before snapshot 11)
    assert f"from its snapshot at step {latest}\n" in out
    assert_same_store(store, reference)


def test_sigterm_marks_the_store_preempted_and_resumes(tmp_path, reference, capsys):
    from flycuda.recording.runs import open_run

    store = tmp_path / "run.zarr"
    assert killed(store, "step", 21, "TERM", argv=[*ARGV, "--json", tmp_path / "run.json"]) == 128 + signal.SIGTERM
    run = open_run(store)
    assert run.state == "preempted" and run.status == "preempted at step 21 (SIGTERM)"
    assert run.rows["obs"] == 22  # the filling chunk flushed too
    snaps = sorted(os.listdir(str(store) + ".resume"))
    assert snaps[-2:] == ["step-000000000021.json", "step-000000000021.pt"]  # the last snapshot is the stop's
    assert "from its snapshot at step 21" in _resume(store, capsys)
    assert_same_store(store, reference)
    assert _figures(tmp_path / "run.json") == _figures(reference.with_suffix(".json"))  # its sums went on too


def test_a_policy_of_the_observations_resumes_bit_for_bit(tmp_path, capsys):
    """The observations the policy reads after a resume are the snapshot's."""
    policy = tmp_path / "policy.py"
    policy.write_text("import torch\n\n\ndef policy(obs, env):\n"
                      "    return torch.tanh(obs[:, :env.actions.shape[1]]) * 0.5\n")
    argv = [*ARGV, "--policy", policy]
    ref = tmp_path / "ref.zarr"
    assert flycuda(*argv, "--record", ref) == 0
    store = tmp_path / "run.zarr"
    assert killed(store, "step", 13, argv=argv) == -signal.SIGKILL
    assert "from its snapshot at step 11" in _resume(store, capsys)
    assert_same_store(store, ref)


@pytest.fixture(scope="module")
def preempted(tmp_path_factory):
    store = tmp_path_factory.mktemp("preempted") / "run.zarr"
    assert killed(store, "step", 30, "TERM", argv=ARGV) == 128 + signal.SIGTERM
    return store


def test_a_corrupt_snapshot_falls_back_to_the_one_before_and_says_so(preempted, reference, tmp_path, capsys):
    store = copy_run(preempted, tmp_path)
    folder = str(store) + ".resume"
    newest = sorted(f for f in os.listdir(folder) if f.endswith(".pt"))[-1]
    with open(os.path.join(folder, newest), "r+b") as f:  # its marker's SHA-256 no longer matches
        f.seek(100)
        f.write(b"\x00" * 16)
    capsys.readouterr()
    assert flycuda("env", "--resume", store, "--no-progress") == 0
    captured = capsys.readouterr()
    assert f"snapshot {newest[:-3]} is" in captured.err and "falling back to the one before" in captured.err
    assert "from its snapshot at step 27" in captured.out  # the one before the stop's (at 30): a chunk ended at 27
    assert_same_store(store, reference)


def _refused(argv, match, capsys, store=None):
    before = store_digest(store) if store is not None else None
    capsys.readouterr()
    assert flycuda(*argv) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1, err
    if store is not None:
        assert store_digest(store) == before  # nothing written


def test_resume_refuses_a_complete_store(reference, capsys):
    _refused(["env", "--resume", reference], "its run is complete, there is nothing left to run", capsys, reference)


def test_resume_takes_no_other_setting(preempted, tmp_path, capsys):
    store = copy_run(preempted, tmp_path)
    _refused(["env", "--resume", store, "--worlds", "4"], "--resume takes the settings the store was recorded with; "
             "drop --worlds", capsys, store)
    _refused(["env", "walk", "--resume", store], "drop 'walk'", capsys, store)


def test_resume_refuses_another_commands_store(tmp_path, capsys):
    from flycuda.replay import replay

    store = tmp_path / "replay.zarr"
    replay(device="cpu", worlds=2, duration=0.01, record=str(store), progress=False)
    _refused(["env", "--resume", store], "it was not written by flycuda env", capsys, store)


def test_resume_refuses_a_snapshot_of_another_flycuda(preempted, tmp_path, capsys):
    import torch

    from flycuda.replay import snapshot

    store = copy_run(preempted, tmp_path)
    folder = snapshot.snapshot_dir(str(store))
    latest = snapshot.load_latest(str(store))
    meta = dict(latest.meta, fingerprint=dict(latest.meta["fingerprint"], flycuda="0.0.1"))
    shutil.rmtree(folder)
    snapshot.write_snapshot(folder, meta, latest.state)
    assert torch.load(os.path.join(folder, os.path.basename(latest.path)), weights_only=True)["meta"] == meta
    _refused(["env", "--resume", store], "it was recorded with flycuda='0.0.1'", capsys, store)


def test_task_or_resume_is_asked_for(capsys):
    _refused(["env", "--worlds", "2"], "give the task (one of", capsys)
