"""flycuda.env's ``connectome`` observation group (issue 40) on NeuroMechFly with its eyes: flyvis's
network behind both eyes of every world, stepped at its rate on each control step's readouts,
equal to the same network run by hand on the same readouts; resets restart a world's eyes at the
steady state; the step allocates nothing (what a CUDA graph capture refuses); bad settings are
refused in one line. (flyvis's connectome file comes from its installed wheel: the FlyGym lane.)"""

from __future__ import annotations

import pytest
import torch

import flycuda.env as fe
from flycuda.errors import EnvError
from flycuda.vision import Connectome, ConnectomeNetwork, flyvis_column_order, photoreceptors
from flycuda.vision.network import initial_parameters

pytestmark = [pytest.mark.needs_flyvis, pytest.mark.needs_flygym, pytest.mark.needs_warp]

TYPES = ("T4a", "Mi1", "L1")


@pytest.fixture(scope="module")
def env():
    return fe.make("walk", worlds=2, model="neuromechfly", device="cpu", vision="fast:2", control_dt=0.004,
                   connectome=dict(cell_types=TYPES, rate=500.0), max_episode_steps=0)


def test_the_observations_are_the_network_run_by_hand_on_the_same_eyes(env):
    c = Connectome.build()
    params = initial_parameters(c)
    by_hand = ConnectomeNetwork(c, params, 4, dt=1 / 500)
    rest = ConnectomeNetwork(c, params, 1, dt=1 / 500)
    by_hand.voltages.copy_(rest.steady_state().expand(4, -1))
    order = torch.as_tensor(flyvis_column_order(env.vision.retina.id_map))
    nodes = [c.central_node(t) for t in TYPES]
    stimulus, scratch = torch.empty(4, 721), torch.empty(2, 2, 721)
    obs, _ = env.reset(seed=1)
    sl = env.obs_slice("connectome")
    assert env.obs_names[sl] == [f"connectome:{t}:{eye}" for eye in ("left", "right") for t in TYPES]
    assert env.connectome.k == 2  # 4 ms at 500 Hz
    g = torch.Generator().manual_seed(2)
    for step in range(4):
        want = by_hand.voltages.view(2, 2, -1)[:, :, nodes].reshape(2, -1)
        assert torch.equal(obs[:, sl], want), step
        obs, *_ = env.step(torch.randn(env.action_space.shape, generator=g) * 0.2)
        photoreceptors(env.vision.readouts, order, stimulus, scratch)
        for _ in range(2):
            by_hand.step(stimulus)
    assert not torch.equal(by_hand.voltages, rest.voltages.expand(4, -1)), "the eyes' input moved the network"
    assert {env.obs_units[i] for i in range(sl.start, sl.stop)} == {"voltage (flyvis's units; its activity)"}


def test_a_reset_restarts_that_worlds_eyes_at_the_steady_state(env):
    env.reset(seed=3)
    for _ in range(3):
        env.step(torch.zeros(env.action_space.shape))
    stage = env.connectome
    before = stage.net.voltages.clone()
    mask = torch.tensor([False, True])
    obs = env.reset_worlds(mask)
    v = stage.net.voltages.view(2, 2, -1)
    assert torch.equal(v[1], stage.steady.expand(2, -1)) and torch.equal(v[0], before.view(2, 2, -1)[0])
    assert torch.equal(obs[1, env.obs_slice("connectome")], stage.steady[0, stage.nodes].repeat(2))


def test_the_control_step_allocates_nothing(env):
    from flycuda.sim.streams import allocation_guard  # noqa: PLC0415

    env.reset(seed=0)
    for _ in range(2):
        with allocation_guard(env.device, "a control step"):
            env._advance()


def test_bad_settings_are_refused():
    kw = dict(worlds=1, model="neuromechfly", device="cpu", control_dt=0.002)
    with pytest.raises(EnvError, match="connectome= needs the eyes"):
        fe.make("walk", connectome=True, **kw)
    with pytest.raises(EnvError, match=r"fit a whole number of times in the control step \(0.001 s\): e.g. "
                                       r"make\(..., control_dt=0.002\)"):
        fe.make("walk", vision="fast:2", connectome=True, **dict(kw, control_dt=None))
    with pytest.raises(EnvError, match=r"connectome rate 300 Hz: its step 1/rate must be a whole number of physics "
                                       r"steps"):
        fe.make("walk", vision="fast:2", connectome=dict(rate=300.0), **kw)
    with pytest.raises(EnvError, match="connectome: unknown cell type 'T9'; the cell types are: R1, R2"):
        fe.make("walk", vision="fast:2", connectome=dict(cell_types=("T9",)), **kw)
    with pytest.raises(EnvError, match="connectome has no option 'rates'"):
        fe.make("walk", vision="fast:2", connectome=dict(rates=5), **kw)
    with pytest.raises(EnvError, match="observation 'connectome' needs flyvis's network behind the eyes"):
        fe.make("walk", vision="fast:2", observe=("joints", "connectome"), **kw)
    every = fe.make("walk", vision="fast:2", connectome=dict(cell_types=("T5b",), columns="all"), **kw)
    assert every.obs_names[every.obs_slice("connectome")][:2] == ["connectome:T5b:left:0", "connectome:T5b:left:1"]
    assert every.obs_slice("connectome").stop - every.obs_slice("connectome").start == 2 * 721


def test_follow_runs_on_the_connectome_with_the_example_controller():
    """The follow task (issue 40) on NeuroMechFly with descending drives, its eyes and flyvis's
    network over all columns: examples/follow.py's controller reads the connectome group, its drives
    stay in the action space, the target moves along its path and the network responds."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "follow.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_follow_nmf", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    env = fe.make("follow", worlds=2, model="neuromechfly", action="descending", vision="fast:2", control_dt=0.002,
                  connectome=dict(columns="all", cell_types=("T4a", "T5a")), max_episode_steps=0, noise=0.0)
    obs, info = env.reset(seed=0)
    mean, std = ex.calibrate(env, "connectome", seconds=0.004)  # two steps, the target out of sight
    assert mean.shape == std.shape == (2, 2, 721) and bool((std > 0).all())
    policy = ex.make_policy(env, baseline=(mean, std))
    obs, info = env.reset(seed=0)
    sl = env.obs_slice("connectome")
    assert sl.stop - sl.start == 2 * 2 * 721 and env.connectome.k == 1
    start, first = env.task.path[:, :2].clone(), obs[:, sl].clone()
    for _ in range(3):
        drives = policy(obs)
        assert drives.shape == (2, 2) and float(drives.min()) >= 0.4 and float(drives.max()) <= 1.0
        obs, r, term, _, info = env.step(drives)
    assert not term.any() and torch.isfinite(r).all() and set(info) >= {"distance", "bearing", "ahead"}
    moved = (env.task.path[:, :2] - start).norm(dim=1)
    assert torch.allclose(moved, torch.full((2,), 3 * 0.002 * 4 * 2.5), rtol=1e-3)  # 3 steps at 10 mm/s
    assert not torch.equal(obs[:, sl], first)


def test_start_in_the_scene_is_flygym_1x_fade_in_of_the_first_frame():
    """connectome=dict(start="scene"): at the first reset every eye's network is flyvis's fade-in
    (1 s from rest) of the frame world 0's eyes see (FlyGym 1.x's RealisticVisionFly), by hand;
    a later reset of one world restarts its eyes there."""
    env = fe.make("walk", worlds=2, model="neuromechfly", device="cpu", vision="fast:2", control_dt=0.004,
                  connectome=dict(cell_types=("T4a",), start="scene"), max_episode_steps=0)
    obs, _ = env.reset(seed=1)
    c = Connectome.build()
    by_hand = ConnectomeNetwork(c, initial_parameters(c), 2, dt=1 / 500)
    order = torch.as_tensor(flyvis_column_order(env.vision.retina.id_map))
    stimulus, scratch = torch.empty(4, 721), torch.empty(2, 2, 721)
    photoreceptors(env.vision.readouts, order, stimulus, scratch)
    want = by_hand.fade_in(stimulus[:2]).clone()
    stage = env.connectome
    assert torch.equal(stage.net.voltages.view(2, 2, -1), want.expand(2, 2, -1))
    assert not torch.equal(want[0], stage.steady[0]), "the scene is not grey"
    assert torch.equal(obs[:, env.obs_slice("connectome")], want[:, stage.nodes].reshape(1, -1).expand(2, -1))
    env.step(torch.zeros(env.action_space.shape))
    env.reset_worlds(torch.tensor([True, False]))
    assert torch.equal(stage.net.voltages.view(2, 2, -1)[0], want)
    with pytest.raises(EnvError, match="start 'grey' or 'scene', got .* start='movie'"):
        fe.make("walk", worlds=1, model="neuromechfly", device="cpu", vision="fast:2", control_dt=0.002,
                connectome=dict(start="movie"))


def test_all_columns_of_a_type_without_one_node_per_column_are_refused():
    """flyvis's Lawf1 and Lawf2 have 123 nodes, not 721: columns="all" is refused naming the type."""
    with pytest.raises(EnvError, match=r"connectome: cell type 'Lawf1' has 123 nodes, not one per column \(721\)"):
        fe.make("walk", worlds=1, model="neuromechfly", device="cpu", vision="fast:2", control_dt=0.002,
                connectome=dict(cell_types=("T4a", "Lawf1"), columns="all"))
