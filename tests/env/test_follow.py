"""flycuda.env's ``follow`` task (issue 40) on the built-in hexapod: the target's path equals
FlyGym 1.x's MovingObjArena step (transcribed below) world by world, from draws held against the
reset's counter-based hash; MuJoCo carries the target along the path through the physics; the
reward and success measures follow their docstring; a reset restarts one world's path alone.
NeuroMechFly with eyes and flyvis's network: tests/flygym_lane/test_connectome_env.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flycuda.env as fe
from flycuda.env.follow import FOLLOW_SALT
from flycuda.errors import EnvError
from flycuda.reference.episode import reset_key, reset_uniform

L = 0.06  # the hexapod's body length (m)
W = 5


@pytest.fixture(scope="module")
def env():
    return fe.make("follow", worlds=W, device="cpu", noise=0.0, speed_spread=0.5, seed=2)


def _draws(env) -> np.ndarray:
    """[W, 3]: each world's draws of its current episode, from the reference's hash."""
    return np.array([[reset_uniform(reset_key(env.seed_value ^ FOLLOW_SALT, w, int(env.episodes[w])), j)
                      for j in range(3)] for w in range(env.num_envs)])


def _moving_obj_arena(start, forward, side, phase, speed, lateral, omega, dt, steps) -> np.ndarray:
    """FlyGym 1.x's ``MovingObjArena.step`` (examples/vision/arena.py), in float64 and in the
    frame whose x axis is ``forward``: the ball's places after 1..steps steps [steps, 2]."""
    left = np.array([-forward[1], forward[0]])
    pos, t, out = np.array(start, dtype=np.float64), 0.0, []
    for _ in range(steps):
        heading_vec = np.array([1, lateral * np.cos(omega * t + phase) * side])
        heading_vec /= np.linalg.norm(heading_vec)
        pos = pos + speed * (heading_vec[0] * np.asarray(forward) + heading_vec[1] * left) * dt
        t += dt
        out.append(pos.copy())
    return np.array(out)


def test_the_path_is_flygym_1x_moving_object_in_every_world(env):
    _, info = env.reset(seed=7)
    task, q, lay = env.task, env.sim.view("qpos"), env.layout
    ax, ay = task._target_adrs(env)
    start = q[:, [ax, ay]].double().numpy().copy()
    fly = q[:, lay.root_adr:lay.root_adr + 2].double().numpy().copy()
    u = _draws(env)
    assert np.allclose(info["distance"].numpy(), 2.0, atol=0.2 * math.sqrt(2) + 1e-4)  # 2 L, jittered
    steps, a = 12, torch.zeros(W, env.single_action_space.shape[0])
    seen = []
    for _ in range(steps):
        env.step(a)
        seen.append(q[:, [ax, ay]].double().numpy().copy())
    seen = np.stack(seen, 1)  # [W, steps, 2]: where MuJoCo carried each target
    sides = set()
    for w in range(W):
        d = start[w] - fly[w]
        side = 1.0 if u[w, 0] >= 0 else -1.0
        sides.add(side)
        want = _moving_obj_arena(start[w], d / np.linalg.norm(d), side, math.pi * u[w, 1],
                                 4.0 * L * (1 + 0.5 * u[w, 2]), 2.0, 3.0, env.control_dt, steps)
        np.testing.assert_allclose(seen[w], want, rtol=0, atol=2e-6)  # float32 places (~0.2 m)
        np.testing.assert_allclose(task.path[w, :2].double().numpy(), want[-1], rtol=0, atol=2e-6)
    assert sides == {-1.0, 1.0}, "worlds go left and right first"
    speed = np.linalg.norm(np.diff(seen, axis=1), axis=2) / env.control_dt
    assert speed.min() > 0.5 * 4 * L * 0.99 and speed.max() < 1.5 * 4 * L * 1.01


def test_reward_and_measures_follow_the_docstring(env):
    env.reset(seed=1)
    _, r, _, _, info = env.step(torch.zeros(W, env.single_action_space.shape[0]))
    q, lay = env.sim.view("qpos").double(), env.layout
    ax, ay = env.task._target_adrs(env)
    dx, dy = q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1]
    d = torch.hypot(dx, dy) / L
    w, x, y, z = (q[:, lay.root_adr + 3 + i] for i in range(4))
    b = torch.remainder(torch.atan2(dy, dx) - torch.atan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z)) + math.pi,
                        2 * math.pi) - math.pi
    torch.testing.assert_close(info["distance"].double(), d, rtol=0, atol=1e-4)
    torch.testing.assert_close(info["bearing"].double(), b, rtol=0, atol=1e-4)
    assert torch.equal(info["ahead"], (info["bearing"].abs() <= math.pi / 4).float())
    want = torch.cos(b) * torch.exp(-torch.clamp(d - 2.0, min=0) / 2.0)
    torch.testing.assert_close(r.double(), want, rtol=0, atol=1e-4)
    assert env.task.reward_unit == "1"


def test_a_reset_restarts_only_its_worlds_path(env):
    env.reset(seed=3)
    a = torch.zeros(W, env.single_action_space.shape[0])
    for _ in range(4):
        env.step(a)
    before = env.task.path.clone()
    mask = torch.tensor([False, True, False, False, True])
    env.reset_worlds(mask)
    path = env.task.path
    assert torch.equal(path[~mask], before[~mask])
    ax, ay = env.task._target_adrs(env)
    q = env.sim.view("qpos")
    assert torch.equal(path[mask, :2], q[mask][:, [ax, ay]])  # the new path starts at the new place
    u = torch.tensor(_draws(env), dtype=torch.float32)
    torch.testing.assert_close(path[mask, 5], math.pi * u[mask, 1], rtol=0, atol=1e-6)
    assert int(env.world_steps[mask].max()) == 0


def test_a_seed_gives_the_same_paths_and_none_draws_anew(env):
    env.reset(seed=5)
    p = env.task.path.clone()
    env.reset(seed=5)
    assert torch.equal(env.task.path, p)
    env.reset()
    assert not torch.equal(env.task.path[:, 4:], p[:, 4:])


@pytest.mark.parametrize("bad", [dict(speed=-1.0), dict(spread=4.0), dict(phase_spread=-0.1),
                                 dict(speed_spread=2.0), dict(ahead=0.0), dict(omega=math.inf),
                                 dict(distance=0.1, radius=0.4), dict(arrangements=0), dict(speed=True)])
def test_bad_options_are_refused_in_one_line(bad):
    with pytest.raises(EnvError, match="follow needs finite numbers") as e:
        fe.make("follow", worlds=1, device="cpu", **bad)
    assert "\n" not in str(e.value)


def _example():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "follow.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_follow", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_follow_example_turns_toward_the_eye_that_sees_the_object():
    """examples/follow.py's rule (FlyGym 1.x's follow_fly_closed_loop): columns whose mean |z| over
    the cell types exceeds the threshold see the object; the bias is right less left over their sum;
    the drive on the side to turn to is lowered to max(0.4, 1 - 0.6 |g b|), the other stays 1."""
    ex = _example()
    z = torch.zeros(3, 2, 2, 5)  # [W, eyes, types, columns]
    z[0, 0, :, :3] = 6.0  # world 0: three columns of the left eye
    z[0, 1, 0, 0] = 6.0  # ... and one of the right eye whose mean over the types is 3: not marked
    z[1, 1, :, :2] = 9.0  # world 1: two of the right eye
    b = ex.object_bias(z, 5.0)
    assert b.tolist() == [-1.0, 1.0, 0.0]  # world 2: nothing seen, straight on
    d = ex.turning_drives(torch.tensor([-1.0, 0.25, 0.0]), gain=2.0)
    torch.testing.assert_close(d, torch.tensor([[0.4, 1.0], [1.0, 0.7], [1.0, 1.0]]))
    with pytest.raises(SystemExit, match="steers by the descending drives"):
        ex.make_policy(fe.make("follow", worlds=1, device="cpu"))


def test_the_cli_runs_follow_and_checks_the_network_options(capsys):
    """``flycuda env follow`` on the hexapod (its eyes and network: tests/flygym_lane); a
    checkpoint without --connectome, and --connectome without eyes, are refused in one line."""
    from flycuda.cli.main import main

    base = ["env", "follow", "--model", "hexapod", "--worlds", "2", "--duration", "0.02", "--no-progress"]
    assert main([*base, "--task-option", "speed=2"]) == 0
    assert "follow: 2 worlds of hexapod" in capsys.readouterr().out
    assert main([*base, "--connectome-checkpoint", "x.pt"]) == 2
    assert "--connectome-checkpoint is the network's: add --connectome" in capsys.readouterr().err
    assert main([*base, "--connectome"]) == 2
    assert "connectome= needs the eyes" in capsys.readouterr().err
