"""make(..., action="descending"): two descending drives per world into FlyGym's hybrid turning
controller, run every physics step inside the environment's step. On NeuroMechFly (the FlyGym
lane): the controller's wiring (the same ctrl as flycuda.control's HybridTurningController fed the
same senses, step for step), its observation groups, a reset world's controller restart, no
allocation in the control step, and a fly that walks forward on positive drives. On any lane:
what is refused."""

from __future__ import annotations

import pytest
import torch

import flycuda.env as fe
from flycuda.errors import EnvError

NMF = dict(model="neuromechfly", device="cpu", action="descending", noise=0.0)


def test_descending_is_refused_where_it_cannot_run():
    with pytest.raises(EnvError, match=r"unknown action 'legs'; the actions are: joints, descending"):
        fe.make("walk", worlds=2, device="cpu", action="legs")
    with pytest.raises(EnvError, match=r"action='descending' .* needs NeuroMechFly's legs .*model='hexapod'"):
        fe.make("walk", worlds=2, device="cpu", action="descending")
    with pytest.raises(EnvError, match=r"observations 'drive', 'cpg', 'corrections' are the walking controller's"):
        fe.make("walk", worlds=2, device="cpu", observe=("joints", "cpg"))


def test_the_steering_example_lowers_the_drive_on_the_dark_side():
    """examples/steer.py with descending actions: the eye that reads less light (the pillar's
    side) gets the lower drive; the drives stay in the action space."""
    import importlib.util
    import os
    from types import SimpleNamespace

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "steer.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_steer_drives", path)
    steer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steer)
    env = SimpleNamespace(descending=object(), device="cpu", obs_slice=lambda group: slice(1, 9))
    policy = steer.make_policy(env)
    obs = torch.full((3, 10), 0.5)
    obs[0, 1:5] = 0.3   # world 0: the left eye darker (the pillar on the left)
    obs[1, 5:9] = 0.3   # world 1: the right eye darker
    d = policy(obs)
    assert d.shape == (3, 2) and (d.abs() <= 1).all()
    assert d[0, 0] < d[0, 1] and d[1, 0] > d[1, 1] and d[2, 0] == d[2, 1] == steer.DRIVE


@pytest.mark.needs_flygym
def test_the_controller_is_flycuda_controls_fed_the_same_senses():
    """Control step = physics step here: before each step the test reads the senses itself and
    steps flycuda.control's HybridTurningController (the same seeds) with the same drives (clamped
    to the action space, as the environment clamps them); the environment must write the same 42
    joint targets and six adhesions into ctrl. (The environment reads its senses after each step:
    the same Data the test reads before the next.)"""
    from flycuda.control import HybridTurningController
    from flycuda.env.descending import locomotion_actuators
    from flycuda.flygym.senses import HybridSenses

    env = fe.make("walk", worlds=3, control_dt=1e-4, max_episode_steps=0, seed=7, **NMF)
    assert env.single_action_space.shape == (2,) and env.action_space.shape == (3, 2)
    env.reset(seed=7)
    senses = HybridSenses.of_model(env.sim.mjm)
    ours = HybridTurningController(3, 1e-4, seed=7)
    ids = locomotion_actuators(env.sim).long()
    g = torch.Generator().manual_seed(0)
    for t in range(40):
        drive = (torch.rand(3, 2, generator=g) * 2.4 - 1.2 if t % 10 else torch.zeros(3, 2)).float()
        senses.read(env.sim)
        angles, adhesion = ours.step(drive.double().clamp(-1, 1), *senses.inputs())  # the env clamps to [-1, 1]
        env.step(drive)
        ctrl = env.sim.view("ctrl")[:, ids]
        assert torch.equal(ctrl[:, :42], angles), t
        assert torch.equal(ctrl[:, 42:] > 0.5, adhesion), t
        assert torch.equal(env.descending.state, ours.state), t


@pytest.mark.needs_flygym
def test_observations_resets_and_no_allocation():
    from flycuda.sim.streams import allocation_guard

    env = fe.make("walk", worlds=2, max_episode_steps=3, observe=("joints", "drive", "cpg", "corrections"), **NMF)
    obs, _ = env.reset(seed=0)
    names = env.obs_names
    assert names[env.obs_slice("drive")] == ["drive:left", "drive:right"]
    assert names[env.obs_slice("cpg")][:2] == ["cpg_phase:lf", "cpg_phase:lm"] and len(names[env.obs_slice("cpg")]) == 12
    assert names[env.obs_slice("corrections")][-1] == "stumbling:rh"
    assert env.obs_units[env.obs_slice("cpg")][0] == "rad"
    drive = torch.tensor([[1.0, 0.5], [-0.7, 0.2]])
    env.actions.copy_(drive)
    for _ in range(5):  # an episode ends at 3 steps: a reset inside
        with allocation_guard(env.device, "a descending control step"):
            env._advance()
    obs = env.obs
    assert torch.isfinite(obs).all()
    assert torch.equal(obs[:, env.obs_slice("drive")], drive)
    phases = obs[:, env.obs_slice("cpg")][:, :6]
    assert (phases >= 0).all() and (phases < 6.2832).all()
    env.descending.state[:, 2:].fill_(3.0)
    senses = env.descending.senses
    senses.stumbling_forces.fill_(5.0)  # as if both worlds touched the ground
    kept = [t[1].clone() for t in senses.inputs()]
    env.reset_worlds(torch.tensor([True, False]))
    assert torch.equal(env.descending.state[0], env.descending.init_state[0])
    assert env.descending.state[1, 2:].eq(3.0).all(), "the other world's controller is untouched"
    # MuJoCo Warp's reset of world 0 zeroes the contact count all worlds share: the other world keeps
    # what it sensed after its last step; the reset one senses its new pose, with no ground force yet
    assert all(torch.equal(t[1], k) for t, k in zip(senses.inputs(), kept))
    assert senses.stumbling_forces[0].eq(0).all()
    z = env.sim.view("qpos")[0, env.layout.root_adr + 2].double()
    assert abs(senses.thorax_z[0] - z) < 1e-6, (senses.thorax_z[0], z)


@pytest.mark.needs_flygym
def test_drives_walk_and_steer_the_fly():
    """0.2 s of walking (2,000 physics steps) on drives (1, 1), (0, 0), (0.4, 1) and (1, 0.4):
    the first fly walks forward (measured 12.3 mm/s, FlyGym's locomotion fly), the still one stays near its start, a weaker
    left drive turns the fly left (its yaw grows) and a weaker right drive turns it right; no
    observation is NaN."""
    env = fe.make("walk", worlds=4, max_episode_steps=0, **NMF)
    env.reset(seed=0)
    adr = env.layout.root_adr
    x0, yaw0 = env.sim.view("qpos")[:, adr].clone(), env.sim.view("qpos")[:, adr + 6].clone()
    drive = torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.4, 1.0], [1.0, 0.4]])
    for _ in range(200):
        obs, *_ = env.step(drive)
        assert torch.isfinite(obs).all()
    q = env.sim.view("qpos")
    dx, yaw = q[:, adr] - x0, q[:, adr + 6] - yaw0  # the quaternion's z: sin(yaw / 2) for a fly upright
    assert dx[0] > 1.0 and abs(dx[1]) < 0.3, dx  # mm
    assert yaw[2] > 0.08 and yaw[3] < -0.08, yaw  # measured +0.16 and -0.27 (the still fly: 0.03)
