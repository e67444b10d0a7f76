"""flycuda.env's per-world odor scenes (issue 41) on the built-in hexapod: the aversive sources
out, the peaks and the wind drawn at each reset by the reset's counter-based draw (held against
flycuda.reference.episode's hash), the sources not out moved away, the advection-diffusion odor
in each world's wind equal to the reference, the wind as MuJoCo Warp's per-world fluid force, and
the reward over the aversive sources that are out. NeuroMechFly: tests/flygym_lane/test_olfaction.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flycuda.env as fe
from flycuda.env.odor_draws import DRAW_SALT, FAR
from flycuda.env.odor_tasks import FLYGYM1_PEAKS
from flycuda.env.smell import sensor_sites
from flycuda.errors import EnvError
from flycuda.reference.episode import reset_key, reset_uniform
from flycuda.reference.odor import odor_intensity

L = 0.06  # the hexapod's body length (m)
SCENE = dict(aversive=(0, 2), peak_spread=0.5, wind=(20.0, 40.0), field="advection_diffusion")


@pytest.fixture(scope="module")
def env():
    return fe.make("odor_taxis", worlds=16, model="hexapod", device="cpu", seed=3, **SCENE)


def _u(seed: int, W: int, episodes: torch.Tensor, m: int) -> torch.Tensor:
    """The draws the reference's hash gives: world w's j-th uniform at its episode count after the reset."""
    return torch.tensor([[reset_uniform(reset_key(seed ^ DRAW_SALT, w, int(episodes[w])), j) for j in range(m)]
                         for w in range(W)])


def test_scenes_are_the_resets_counter_based_draws(env):
    env.reset(seed=11)
    d, W, n = env.task.draws, env.num_envs, len(FLYGYM1_PEAKS)
    u = _u(11, W, env.episodes, n + 3)
    torch.testing.assert_close(d.u, u, rtol=0, atol=0)
    count = torch.clamp(torch.floor((u[:, n] + 1) * 1.5), max=2)  # aversive=(0, 2): 0, 1 or 2 out
    assert torch.equal(d.out[:, 1:].sum(1), count) and set(count.tolist()) == {0.0, 1.0, 2.0}
    assert torch.equal(d.out[:, 0], torch.ones(W))
    want = torch.tensor(FLYGYM1_PEAKS) * ((u[:, :n] * 0.5 + 1) * d.out).unsqueeze(2)
    torch.testing.assert_close(d.peaks, want, rtol=1e-6, atol=0)
    speed = d.wind.norm(dim=1) / L
    torch.testing.assert_close(speed, 20 + (u[:, n + 1] + 1) * 10, rtol=1e-5, atol=1e-5)
    before = (d.u.clone(), d.wind.clone())
    env.reset(seed=11)
    assert torch.equal(d.u, before[0]) and torch.equal(d.wind, before[1]), "a seed gives the same scenes"
    env.reset()
    assert not torch.equal(d.u, before[0]), "without one each reset draws anew"


def test_sources_not_out_go_far_and_the_odor_is_the_references_in_each_worlds_wind(env):
    obs, _ = env.reset(seed=4)
    d, lay, q = env.task.draws, env.layout, env.sim.view("qpos")
    adrs = env.task._adrs(env)
    for i, (ax, _) in enumerate(adrs):
        gone = d.out[:, i] == 0
        torch.testing.assert_close(q[gone, ax], q[gone, lay.root_adr] + FAR * L)
        assert (q[~gone, ax] - q[~gone, lay.root_adr]).abs().max() < 5 * L  # 1.x's 24 mm at 1/3: 3.2 L
    env.sim.kinematics()
    src = torch.stack([torch.stack([q[:, ax], q[:, ay], torch.full((env.num_envs,), 1.5 * L / 2.5)], 1)
                       for ax, ay in adrs], 1)
    sensors = env.sim.view("site_xpos")[:, sensor_sites(env.sim.mjm)]
    want = odor_intensity(src, d.peaks, sensors, torch.empty(env.num_envs, 2, 4), field="advection_diffusion",
                          wind=d.wind[:, :2], diffusivity=3200.0 * L * L, decay=500.0)
    torch.testing.assert_close(obs[:, env.obs_slice("odor")], want.view(env.num_envs, -1), rtol=2e-6, atol=0)
    aversive = obs[:, env.obs_slice("odor")].view(-1, 2, 4)[:, 1]
    assert torch.equal(aversive.amax(1) == 0, d.out[:, 1:].sum(1) == 0), "no aversive odor where none is out"


def test_the_wind_blows_from_the_attractive_source_to_the_fly_within_the_spread():
    env = fe.make("odor_taxis", worlds=5, model="hexapod", device="cpu", wind=(30.0, 30.0), wind_spread=0.0)
    env.reset(seed=2)
    q, lay, (ax, ay) = env.sim.view("qpos").double(), env.layout, env.task._adrs(env)[0]
    d = torch.stack([q[:, lay.root_adr] - q[:, ax], q[:, lay.root_adr + 1] - q[:, ay]], 1)
    want = d / d.norm(dim=1, keepdim=True) * 30.0 * L
    torch.testing.assert_close(env.task.draws.wind[:, :2].double(), want, rtol=1e-5, atol=1e-6)
    assert torch.equal(env.task.draws.wind[:, 2], torch.zeros(5))


def test_the_wind_pushes_each_world_by_its_own(env):
    env.reset(seed=6)
    wp_wind = env.sim.model.opt.wind
    assert wp_wind.shape == (env.num_envs,) and wp_wind.ptr == env.task.draws.wind.data_ptr(), "shared, per world"
    for _ in range(3):
        env.step(torch.zeros(env.action_space.shape))
    root = env.layout.root_dof
    push = env.sim.data.qfrc_fluid.numpy()[:, root:root + 2]
    wind = env.task.draws.wind[:, :2].numpy()
    cos = (push * wind).sum(1) / (np.linalg.norm(push, axis=1) * np.linalg.norm(wind, axis=1))
    assert (cos > 0.8).all(), f"the fluid force on the root follows each world's wind: cos {cos}"
    still = fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", wind=(30.0, 30.0), wind_force=False)
    assert not still.sim.model.has_fluid and still.sim.mjm.opt.density == 0, "wind_force=False: no air"
    calm = fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu")
    assert not calm.sim.model.has_fluid, "still air costs no fluid forces"


def test_a_reset_of_some_worlds_redraws_only_theirs(env):
    env.reset(seed=8)
    d = env.task.draws
    u, wind, peaks = d.u.clone(), d.wind.clone(), d.peaks.clone()
    mask = torch.zeros(env.num_envs, dtype=torch.bool)
    mask[[1, 5]] = True
    env.reset_worlds(mask)
    assert torch.equal(d.u[~mask], u[~mask]) and torch.equal(d.wind[~mask], wind[~mask])
    assert torch.equal(d.peaks[~mask], peaks[~mask])
    assert not torch.equal(d.u[mask], u[mask])


def test_the_reward_averages_the_aversive_sources_that_are_out(env):
    env.reset(seed=9)
    _, rew, *_ = env.step(torch.randn(env.action_space.shape) * 0.3)
    q, v, lay, out = env.sim.view("qpos").double(), env.sim.view("qvel").double(), env.layout, env.task.draws.out
    closing = []
    for ax, ay in env.task._adrs(env):
        dx, dy = q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1]
        closing.append((v[:, lay.root_dof] * dx + v[:, lay.root_dof + 1] * dy) / torch.hypot(dx, dy) / L)
    away = (closing[1] * out[:, 1] + closing[2] * out[:, 2]) / out[:, 1:].sum(1).clamp(min=1)
    torch.testing.assert_close(rew.double(), closing[0] - away, rtol=1e-4, atol=1e-5)


def test_scene_options_are_checked_and_wind_needs_air():
    for bad in (dict(aversive=(1, 3)), dict(aversive=(2, 1)), dict(peak_spread=1.5), dict(wind=(5.0, 1.0)),
                dict(wind_spread=4.0)):
        with pytest.raises(EnvError, match="odor_taxis needs aversive=None or"):
            fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", **bad)
    with pytest.raises(EnvError, match="field 'power' or 'advection_diffusion'"):
        fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu", field="plume")
    airless = fe.make("odor_taxis", worlds=2, model="hexapod", device="cpu")  # worlds built without air
    with pytest.raises(EnvError, match="wind as a force needs air in the model"):
        fe.make("odor_taxis", sim=airless.sim, act_ids=airless.layout.act_ids, wind=(10.0, 10.0))
    assert math.isclose(fe.make("odor_taxis", worlds=1, model="hexapod", device="cpu",
                                wind=(1.0, 2.0)).sim.mjm.opt.density, 1.2)


def test_the_cli_passes_task_options(capsys):
    from flycuda.cli.main import main

    base = ["env", "odor_taxis", "--worlds", "2", "--duration", "0.01", "--no-progress"]
    assert main([*base, "--task-option", "wind=(10, 20)", "--task-option", "field=advection_diffusion"]) == 0
    assert main([*base, "--task-option", "windd=3"]) == 2
    assert "task 'odor_taxis' has no option 'windd'" in capsys.readouterr().err
    assert main([*base, "--task-option", "seed=3"]) == 2
    assert "--task-option seed is an option of every task: use --seed" in capsys.readouterr().err
    assert main([*base, "--task-option", "wind=fast"]) == 2  # a value of the wrong kind: one line
    err = capsys.readouterr().err
    assert "task 'odor_taxis' cannot take wind='fast'" in err and "Traceback" not in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit):
        main([*base, "--task-option", "wind"])
    assert "expected NAME=VALUE" in capsys.readouterr().err
