"""NeuroMechFly with its eyes and flyvis's network behind them, killed (SIGKILL mid-chunk),
resumes into a store equal bit for bit to an uninterrupted run's: the eyes' readouts and the
network's voltages included; its environment's state_dict too (issue 52)."""

import signal

import pytest
from helpers.killed import assert_same_store, killed

pytestmark = [pytest.mark.needs_flygym, pytest.mark.needs_flyvis, pytest.mark.needs_warp]

STEPS = 32
KW = dict(device="cpu", model="neuromechfly", worlds=2, vision="fast:1@8", progress=False,
          observe=["angles", "qpos@4", "connectome:T4a,Mi1"], chunk_bytes=2 * 42 * 4 * 8, snapshot_seconds=0)


@pytest.fixture(scope="module")
def fly_kw():
    from flycuda.worlds import resolve

    timestep = resolve("neuromechfly", 1, device="cpu", motion=False).sim.timestep
    return dict(KW, duration=STEPS * timestep)


@pytest.fixture(scope="module")
def fly_reference(tmp_path_factory, fly_kw):
    from flycuda.replay import replay

    path = tmp_path_factory.mktemp("fly") / "ref.zarr"
    replay(record=str(path), **fly_kw)
    return path


@pytest.mark.parametrize("sig,n", [("KILL", 21)])  # the hexapod's tests cover the other points and SIGTERM
def test_the_fly_with_eyes_resumes_bit_for_bit(tmp_path, fly_kw, fly_reference, sig, n):
    from flycuda.recording.runs import open_run
    from flycuda.replay import replay

    store = tmp_path / "fly.zarr"
    rc = killed(store, "step", n, sig, kw=fly_kw)
    assert rc == (-signal.SIGKILL if sig == "KILL" else 128 + signal.SIGTERM)
    assert open_run(store).state == ("interrupted" if sig == "KILL" else "preempted")
    res = replay(resume=str(store), **fly_kw)
    assert 0 < res.resumed_from <= n
    assert_same_store(store, fly_reference)


def test_the_fly_env_with_controllers_eyes_and_network_loads_its_state_bit_for_bit(tmp_path):
    """FlyVecEnv.state_dict on NeuroMechFly driven by descending drives (FlyGym's hybrid turning
    controller: its phases and stumbling state), with eyes and flyvis's network: a fresh
    environment loaded mid-episode steps on as the first, through an autoreset."""
    import torch

    import flycuda.env as fe

    kw = dict(worlds=2, model="neuromechfly", device="cpu", vision="fast:1", control_dt=0.002, action="descending",
              connectome=dict(cell_types=("T4a",), rate=500.0), max_episode_steps=3)
    g = torch.Generator().manual_seed(5)
    acts = [torch.rand(2, 2, generator=g) * 1.2 for _ in range(6)]
    first = fe.make("walk", **kw)
    first.reset(seed=2)
    for a in acts[:2]:
        first.step(a)
    torch.save(first.state_dict(), tmp_path / "env.pt")
    want = [[x.clone() for x in first.step(a)[:4]] for a in acts[2:]]
    second = fe.make("walk", **kw)
    second.reset(seed=9)
    second.load_state_dict(torch.load(tmp_path / "env.pt", weights_only=True))
    got = [[x.clone() for x in second.step(a)[:4]] for a in acts[2:]]
    for k, (g_, w) in enumerate(zip(got, want)):
        for name, a, b in zip(("obs", "reward", "terminated", "truncated"), g_, w):
            assert torch.equal(a.view(torch.int32) if a.dtype == torch.float32 else a,
                               b.view(torch.int32) if b.dtype == torch.float32 else b), (k, name)
    assert any(bool(w[3].any()) for w in want)  # the episodes of 3 ended after the load
