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
