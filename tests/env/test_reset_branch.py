"""The reset path only in the steps where a world ended (FlyVecEnv.reset_branch): a host branch,
a device flag read by a conditional graph node (Warp's capture_if), or every step (CUDA without
conditional nodes). The three give the same bits; the flag is any(done); the path runs exactly
when a world ended; a conditional node that CUDA refuses, at the capture or at the graph's first
launch, falls back to every step with a warning. (On the CPU "device" reads the flag through
capture_if on the host: what is held there is the flag and the branch; the conditional node itself
is held on a GPU, below.)"""

import functools
import warnings

import pytest
import torch

import flycuda.env as fe
from flycuda.env.core import reset_branch_for
from flycuda.errors import CaptureError, ConditionalCaptureError, EnvError
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


def test_a_refused_conditional_node_falls_back_to_every_step(monkeypatch):
    """A conditional node CUDA refuses at the capture (run_if's ConditionalCaptureError) is
    captured again with the reset path in every step, with one warning; any other capture error is
    raised as it is, and nothing changes."""
    env = fe.make("imitate", worlds=2, device="cpu")
    env.reset_branch = "device"
    tries, graph = [], object()

    def capture(fn, wp_device):
        tries.append(env.reset_branch)
        if len(tries) == 1:
            raise ConditionalCaptureError("conditional body graph holds an unsupported node")
        return graph

    monkeypatch.setattr(streams, "capture_graph", capture)
    with pytest.warns(RuntimeWarning, match="runs in every step instead"):
        env._capture()
    assert tries == ["device", "always"] and env.reset_branch == "always" and env._graph is graph
    for error in (CaptureError("ours"), RuntimeError("CUDA error: out of memory")):
        env.reset_branch = "device"
        monkeypatch.setattr(streams, "capture_graph", lambda fn, wp_device, e=error: (_ for _ in ()).throw(e))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(type(error), match=str(error)):
                env._capture()
        assert env.reset_branch == "device" and env._graph is None


def test_a_graph_refused_at_its_first_launch_runs_the_step_eagerly(monkeypatch):
    """CUDA instantiates a graph at its first launch: a conditional node refused there (nothing
    ran) warns, falls back to every step and runs the step eagerly, the same bits as a plain step."""
    a, b = (fe.make("imitate", worlds=3, device="cpu", max_episode_steps=2, check_actions=False) for _ in range(2))
    for env in (a, b):
        env.reset(seed=1)
    act = a.obs[:, a.obs_slice("reference")].clone()
    b.reset_branch = "device"
    b._graph, b._launched = object(), False
    monkeypatch.setattr(streams, "launch_graph", lambda g: (_ for _ in ()).throw(RuntimeError("instantiate")))
    for k in range(3):
        if k == 0:
            with pytest.warns(RuntimeWarning, match="runs in every step instead"):
                got = b.step(act)
        else:
            got = b.step(act)
        want = a.step(act)
        assert all(torch.equal(x, y) for x, y in zip(got[:4], want[:4])), k
    assert b.reset_branch == "always" and b._graph is None
    b._graph, b._launched = object(), True  # a later launch's error is not the node's: raised
    with pytest.raises(RuntimeError, match="instantiate"):
        b.step(act)


def test_reset_branch_is_checked_and_run_if_passes_the_bodys_errors():
    env = fe.make("imitate", worlds=2, device="cpu")
    with pytest.raises(EnvError, match="reset_branch must be one of host, device, always, got 'sometimes'"):
        env.reset_branch = "sometimes"
    assert env.reset_branch == "host"

    def body():
        raise ValueError("the body's own")

    with pytest.raises(ValueError, match="the body's own"):
        streams.run_if(torch.ones(1, dtype=torch.int32), body)


@pytest.mark.needs_cuda
def test_the_captured_conditional_step_equals_every_step_on_cuda():
    """On a GPU with conditional graph nodes: the step is captured with the reset path as a
    conditional node (no warning, no fallback) and gives the same bits as the path in every step."""
    if reset_branch_for(torch.device("cuda"), "cuda:0") != "device":
        pytest.skip("this CUDA toolkit or driver has no conditional graph nodes (12.4+)")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        device, _ = _run("device", device="cuda")
    always, _ = _run("always", device="cuda")
    for k, (x, y) in enumerate(zip(device, always)):
        for i in range(5):
            assert torch.equal(x[i], y[i]), (k, i)
    env = fe.make("imitate", worlds=2, device="cuda")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.obs[:, env.obs_slice("reference")].clone())
    assert env.captured and env.reset_branch == "device"
