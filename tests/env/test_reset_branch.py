"""The reset path only in the steps where a world ended (FlyVecEnv.reset_branch): a host branch,
a device flag read by a conditional graph node (Warp's capture_if), or every step (CUDA without
conditional nodes). The three give the same bits; the flag is any(done); the path runs exactly
when a world ended; a conditional capture that fails falls back to every step, with a warning."""

import functools
import warnings

import pytest
import torch

import flycuda.env as fe
from flycuda.env.core import reset_branch_for
from flycuda.errors import CaptureError
from flycuda.sim import streams

pytestmark = pytest.mark.needs_warp
BRANCHES = ("host", "device", "always")


@functools.lru_cache(maxsize=None)  # (each branch's run serves every test)
def _run(branch: str, steps: int = 9, device="cpu"):
    """A hexapod run whose episodes end at different steps (max 3 steps, two worlds reset by hand
    mid-run), random actions; returns everything each step gave, and the steps that reset."""
    env = fe.make("imitate", worlds=5, device=device, max_episode_steps=3, check_actions=False)
    env.reset_branch = branch
    calls, reset_done, current = [], env._reset_done, [None]
    env._reset_done = lambda: (current[0] is None or calls.append(current[0]), reset_done())[1]
    gen = torch.Generator().manual_seed(7)
    lo, hi = (torch.as_tensor(b, device=env.device) for b in (env.single_action_space.low,
                                                               env.single_action_space.high))
    env.reset(seed=3)
    out = []
    for k in range(steps):
        if k == 1:  # (a reset by hand is not a step's: current None)
            current[0] = None
            env.reset_worlds(torch.tensor([True, False, True, False, False], device=env.device))
        current[0] = k
        a = (lo + (hi - lo) * torch.rand(5, lo.numel(), generator=gen).to(env.device)).contiguous()
        obs, rew, term, trunc, info = env.step(a)
        flag = int(env._reset_flag.item()) if branch == "device" else None
        out.append([t.clone() for t in (obs, rew, term, trunc, info["final_obs"])] + [flag])
    return out, calls


def test_every_branch_gives_the_same_bits():
    runs = {b: _run(b) for b in BRANCHES}
    host, _ = runs["host"]
    for b in ("device", "always"):
        for k, (want, got) in enumerate(zip(host, runs[b][0])):
            for i, (x, y) in enumerate(zip(want[:5], got[:5])):
                assert torch.equal(x, y) and x.numpy().tobytes() == y.numpy().tobytes(), (b, k, i)


def test_the_reset_path_runs_exactly_when_a_world_ended():
    """The flag is any(done) after every step; "device" and "host" run the path only in the steps
    where a world ended, "always" in every step."""
    out, device_calls = _run("device")
    ended = [k for k, step in enumerate(out) if bool((step[2] | step[3]).any())]
    assert ended and len(ended) < len(out), "the run must have steps with and without an ended world"
    assert [step[5] for step in out] == [int(k in ended) for k in range(len(out))]
    assert device_calls == ended
    assert _run("host")[1] == device_calls
    assert _run("always")[1] == list(range(len(out)))


def test_run_if_reads_the_flag_and_refuses_another_type():
    ran = []
    flag = torch.zeros(1, dtype=torch.int32)
    streams.run_if(flag, lambda: ran.append(0))
    flag.fill_(3)
    streams.run_if(flag, lambda: ran.append(1))
    assert ran == [1]
    for bad in (torch.zeros(1, dtype=torch.bool), torch.zeros(2, dtype=torch.int32)):
        with pytest.raises(CaptureError, match="run_if's flag must be int32 with one element"):
            streams.run_if(bad, lambda: ran.append(2))
    assert ran == [1]


def test_each_device_gets_its_branch(monkeypatch):
    assert reset_branch_for(torch.device("cpu"), "cpu") == "host"
    for supported, want in ((True, "device"), (False, "always")):
        monkeypatch.setattr(streams, "device_branches", lambda wp_device, s=supported: s)
        assert reset_branch_for(torch.device("cuda", 0), "cuda:0") == want
    assert fe.make("imitate", worlds=2, device="cpu").reset_branch == "host"


def test_a_failed_conditional_capture_falls_back_to_every_step(monkeypatch):
    """A conditional body CUDA refuses (Warp raises RuntimeError) is captured again with the
    reset path in every step, with one warning; a capture error of flycuda's own is raised."""
    env = fe.make("imitate", worlds=2, device="cpu")
    env.reset_branch = "device"
    tries, graph = [], object()

    def capture(fn, wp_device):
        tries.append(env.reset_branch)
        if len(tries) == 1:
            raise RuntimeError("conditional body graph holds an unsupported node")
        return graph

    monkeypatch.setattr(streams, "capture_graph", capture)
    with pytest.warns(RuntimeWarning, match="runs in every step instead"):
        env._capture()
    assert tries == ["device", "always"] and env.reset_branch == "always" and env._graph is graph
    env.reset_branch, env._graph = "device", None
    monkeypatch.setattr(streams, "capture_graph", lambda fn, wp_device: (_ for _ in ()).throw(CaptureError("ours")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CaptureError, match="ours"):
            env._capture()
    assert env.reset_branch == "device"


@pytest.mark.needs_cuda
def test_the_captured_conditional_step_equals_every_step_on_cuda():
    """On a GPU: the captured step (a conditional node where CUDA 12.4+ allows it) gives the same
    bits as the reset path in every step, and as the CPU's host branch."""
    dev = "cuda"
    runs = {b: _run(b, device=dev) for b in ("always", reset_branch_for(torch.device(dev), "cuda:0"))}
    (a, _), (b, _) = runs.values()
    for k, (x, y) in enumerate(zip(a, b)):
        for i in range(5):
            assert torch.equal(x[i], y[i]), (k, i)
