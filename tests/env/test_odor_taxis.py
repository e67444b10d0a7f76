"""flycuda.env's smell (issue 41) on the built-in hexapod: the odor_taxis task's sources and the
fly's four sensors in the model, the ``odor`` observations equal to the reference at the observed
state (sources from qpos, sensors from the kinematics), per-world arrangements drawn at reset,
the reward's closing speeds and the success measures. NeuroMechFly with FlyGym's head and the
descending drives: tests/flygym_lane/test_olfaction.py."""

from __future__ import annotations

import math

import mujoco
import pytest
import torch

import flycuda.env as fe
from flycuda.env.odor_tasks import FLYGYM1_PEAKS, FLYGYM1_SOURCES
from flycuda.env.smell import ROOT_OFFSETS, sensor_sites
from flycuda.errors import EnvError
from flycuda.reference.odor import SENSORS, odor_intensity

L = 0.06  # the hexapod's body length (m)


@pytest.fixture(scope="module")
def env():
    return fe.make("odor_taxis", worlds=6, model="hexapod", device="cpu", seed=3)


def _want(env) -> torch.Tensor:
    """The odor the reference computes at the state now: sources from qpos at their fixed height,
    the sensors from the kinematics."""
    W = env.num_envs
    env.sim.kinematics()
    q = env.sim.view("qpos")
    adrs = env.task._adrs(env)
    src = torch.stack([torch.stack([q[:, ax], q[:, ay], torch.full((W,), 1.5 * L / 2.5)], 1) for ax, ay in adrs], 1)
    sensors = env.sim.view("site_xpos")[:, sensor_sites(env.sim.mjm)]
    return odor_intensity(src, torch.tensor(FLYGYM1_PEAKS), sensors, torch.empty(W, 2, 4)).view(W, -1)


def test_sensors_are_on_the_root_at_neuromechflys_places_scaled(env):
    mjm = env.sim.mjm
    ids = sensor_sites(mjm)
    root = int(mjm.jnt_bodyid[0])  # the free joint's body
    assert [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SITE, i) for i in ids] == [f"{s}_sensor" for s in SENSORS]
    assert all(int(mjm.site_bodyid[i]) == root for i in ids)
    torch.testing.assert_close(torch.as_tensor(mjm.site_pos[ids]), torch.tensor(ROOT_OFFSETS, dtype=torch.float64)
                               * L / 2.5)
    assert env.obs_names[env.obs_slice("odor")] == [f"odor:{d}:{s}" for d in range(2) for s in SENSORS]
    assert {env.obs_units[i] for i in range(*env.obs_slice("odor").indices(len(env.obs_names)))} == \
        {"odor intensity (the sources' peak units)"}


def test_odor_observations_equal_the_reference_after_reset_and_steps(env):
    obs, _ = env.reset(seed=5)
    odor = env.obs_slice("odor")
    torch.testing.assert_close(obs[:, odor], _want(env), rtol=2e-6, atol=0)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        obs, *_ = env.step(torch.randn(env.action_space.shape, generator=g) * 0.2)
        torch.testing.assert_close(obs[:, odor], _want(env), rtol=2e-6, atol=0)
    assert (obs[:, odor] > 0).all() and obs[:, odor].isfinite().all()


def test_sources_are_flygym1s_turned_per_world_and_jittered_at_reset(env):
    env.reset(seed=7)
    q = env.sim.view("qpos").double()
    lay, adrs = env.layout, env.task._adrs(env)
    rel = torch.stack([torch.stack([q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1]], 1)
                       for ax, ay in adrs], 1) / (L / 2.5 / 3)  # in 1.x's mm at scale 1/3
    want = torch.tensor(FLYGYM1_SOURCES, dtype=torch.float64).norm(dim=1)
    jitter = 4 * 0.2 * L / (L / 2.5 / 3)  # the noise: 0.2 body lengths, well inside 4 of them
    assert ((rel.norm(dim=2) - want).abs() < jitter).all()
    bearing = torch.atan2(rel[:, 0, 1], rel[:, 0, 0])  # the attractive source's direction
    assert bearing.abs().max() < math.pi / 4 + 0.2 and bearing.std() > 0.05, "arrangements differ between worlds"
    _, info = env.reset(seed=8)
    assert not torch.equal(env.sim.view("qpos")[:, adrs[0][0]].double(), q[:, adrs[0][0]]), "a new draw per reset"


def test_reward_is_the_closing_speed_to_the_attractive_less_the_aversive(env):
    env.reset(seed=9)
    _, rew, _, _, info = env.step(torch.randn(env.action_space.shape) * 0.3)
    q, v, lay = env.sim.view("qpos").double(), env.sim.view("qvel").double(), env.layout
    closing = []
    for ax, ay in env.task._adrs(env):
        dx, dy = q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1]
        closing.append((v[:, lay.root_dof] * dx + v[:, lay.root_dof + 1] * dy) / torch.hypot(dx, dy) / L)
    want = closing[0] - (closing[1] + closing[2]) / 2
    torch.testing.assert_close(rew.double(), want, rtol=1e-4, atol=1e-5)
    assert rew.abs().max() > 0
    dist = torch.hypot(q[:, env.task._adrs(env)[0][0]] - q[:, lay.root_adr],
                       q[:, env.task._adrs(env)[0][1]] - q[:, lay.root_adr + 1]) / L
    torch.testing.assert_close(info["distance"].double(), dist, rtol=1e-5, atol=1e-6)
    assert torch.equal(info["reached"], (dist * L < 2.0 * L / 2.5).float())


def test_a_world_on_its_source_has_reached_it(env):
    env.reset(seed=2)
    q, lay = env.sim.view("qpos"), env.layout
    ax, ay = env.task._adrs(env)[0]
    q[1, ax], q[1, ay] = q[1, lay.root_adr], q[1, lay.root_adr + 1] + 0.5 * 2.0 * L / 2.5
    env.task.measure(env)
    assert env.task.reached[1] == 1 and env.task.reached.sum() == 1


def test_the_markers_are_drawn(env):
    mjm = env.sim.mjm
    for i, peak in enumerate(FLYGYM1_PEAKS):
        g = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, f"odor_source_{i}")
        assert g >= 0 and mjm.geom_contype[g] == 0 and mjm.geom_conaffinity[g] == 0
        assert (mjm.geom_rgba[g][0] > mjm.geom_rgba[g][2]) == (peak[0] > peak[1])  # orange attracts, blue repels


def test_odor_needs_a_task_with_sources_and_options_are_checked():
    with pytest.raises(EnvError, match="observation 'odor' needs a task with odor sources"):
        fe.make("walk", worlds=2, model="hexapod", device="cpu", observe=("joints", "odor"))
    with pytest.raises(EnvError, match="odor_taxis needs scale > 0"):
        fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", scale=0.0)
    env = fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", observe="odor", spread=0.0, jitter=0.0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 8)
    blind = fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", observe="joints")
    assert blind.smell is None and blind.own.shape[1] == env.own.shape[1] - 8, "no odor read where none is observed"


def test_the_examples_rule_turns_toward_the_attractive_and_away_from_the_aversive():
    """examples/odor_taxis.py (FlyGym 1.x's rule): more attractive odor on the left lowers the left
    drive (a left turn); more aversive odor on the left lowers the right one; symmetric odor
    walks straight on at (1, 1)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "odor_taxis.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_odor_taxis", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    sym = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    left_attr = sym.clone()
    left_attr[0, [0, 2]] *= 1.01
    left_aver = sym.clone()
    left_aver[1, [0, 2]] *= 1.05
    d = example.odor_drives(torch.stack([sym, left_attr, left_aver]))
    assert torch.equal(d[0], torch.ones(2))
    assert d[1, 0] < d[1, 1] == 1.0 and d[1, 0] >= 0.2 - 1e-6  # toward: the left drive lowered (at most 0.8)
    assert d[2, 1] < d[2, 0] == 1.0  # away: the right drive lowered


def test_odor_obstacles_places_pillars_on_the_way_and_counts_hits():
    """odor_obstacles (NeuroMechFly v2 Fig. 5's task): one attractive source ([1, 4] odor), two dark
    pillars between the fly and it (the straight line passes within a pillar's hit radius), a
    thorax inside a pillar's radius is a hit, and the reward is the closing speed less c_hit."""
    env = fe.make("odor_obstacles", worlds=5, model="hexapod", device="cpu", seed=1, jitter=0.0, c_hit=2.0)
    obs, info = env.reset(seed=1)
    assert env.obs_names[env.obs_slice("odor")] == [f"odor:0:{s}" for s in SENSORS]
    assert set(info) >= {"distance", "reached", "hit"} and info["hit"].eq(0).all()
    q, lay = env.sim.view("qpos").double(), env.layout
    adrs = env.task._placed_adrs(env)
    fly = q[:, lay.root_adr:lay.root_adr + 2]
    src = torch.stack([q[:, adrs[0][0]], q[:, adrs[0][1]]], 1)
    for ax, ay in adrs[1:]:  # each pillar's distance from the straight line to the source
        p = torch.stack([q[:, ax], q[:, ay]], 1)
        line = (src - fly) / (src - fly).norm(dim=1, keepdim=True)
        off = ((p - fly) - ((p - fly) * line).sum(1, keepdim=True) * line).norm(dim=1)
        assert (off < (0.4 + 0.2) * L).all(), "the pillar blocks the straight path"
    qp = env.sim.view("qpos")
    qp[2, adrs[1][0]], qp[2, adrs[1][1]] = qp[2, lay.root_adr], qp[2, lay.root_adr + 1]  # a pillar on world 2's fly
    env.task.measure(env)
    assert env.task.hit.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    env.task.reward(env)
    v = env.sim.view("qvel").double()
    d = src - fly
    closing = (v[:, lay.root_dof:lay.root_dof + 2] * d).sum(1) / d.norm(dim=1) / L
    torch.testing.assert_close(env.rewards.double(), closing - 2.0 * env.task.hit.double(), rtol=1e-4, atol=1e-5)
    with pytest.raises(EnvError, match="odor_obstacles needs pillar_radius > 0"):
        fe.make("odor_obstacles", worlds=2, model="hexapod", device="cpu", pillar_radius=0.0)


def test_arrangements_turn_with_the_flys_own_heading(env):
    """A fly spawned facing 60 degrees left: its sources turn with it (the arrangement's bearing is
    from the fly's heading, not from +x)."""
    K = 5
    qpos = env._init[0][:1].cpu().repeat(K, 1)
    root = env.layout.root_adr
    yaw = math.radians(60)
    qpos[:, root + 3:root + 7] = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
    qpos = env.task._place(env, qpos)
    ax, ay = env.task._adrs(env)[0]
    got = torch.atan2(qpos[:, ay] - qpos[:, root + 1], qpos[:, ax] - qpos[:, root]).double()
    want = env.task.bearings(K) + yaw
    torch.testing.assert_close(torch.remainder(got - want + math.pi, 2 * math.pi) - math.pi,
                               torch.zeros(K, dtype=torch.float64), atol=1e-5, rtol=0)
