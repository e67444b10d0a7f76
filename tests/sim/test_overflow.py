"""MuJoCo Warp's overflow is never silent: a step that drops constraint rows (nefc > njmax)
or contacts ends its world in the environment (truncated, info["overflow"], the store's
episode/overflow column) and is reported by the replay (its report and store)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.needs_warp


def _tiny_sim(worlds: int, njmax: int):
    from flycuda.sim import Sim

    return Sim.build(None, worlds, device="cpu", njmax=njmax)  # the hexapod standing: ~30 rows per world


def test_a_real_overflow_sets_the_bits_and_words():
    from flycuda.sim.mjwarp import overflow_words

    sim = _tiny_sim(2, njmax=4)
    assert sim.overflowed() == {}
    sim.view("qpos")[:, 2] = 0.01  # pressed into the floor: the legs' contacts need ~24 rows
    sim.step()
    assert set(sim.overflowed()) == {0, 1} and "constraint rows > njmax" in sim.overflowed()[0]
    assert overflow_words(1 | 8) == "constraint rows > njmax, contacts > naconmax"
    assert overflow_words(0) == "none" and overflow_words(0x800) == "tactile sensor pairs"
    assert "bits 0x1000" in overflow_words(0x1000)


def test_the_env_ends_an_overflowed_world_and_says_why():
    from flycuda import env as fenv

    sim = _tiny_sim(3, njmax=4)
    from flycuda.sim import tripod_gait

    env = fenv.make("walk", sim=sim, motion=tripod_gait(), control_dt=60 * sim.timestep)  # lands after ~40 steps
    env.reset(seed=0)
    hold = torch.zeros(env.action_space.shape)
    _, _, term, trunc, info = env.step(hold)
    assert trunc.all() and not term.any()  # not the task's terminal state: no fall penalty, bootstrapped
    assert (info["overflow"] & 1).all() and info["_overflow"].all()
    assert torch.equal(env.status[:, 1], torch.ones(3)) and (env.status[:, 2] > 0).all()
    assert env.sim.overflowed() == {}  # the same step's reset cleared MuJoCo Warp's flags


def test_an_env_that_does_not_overflow_reports_none():
    from flycuda import env as fenv

    env = fenv.make("walk", 2, device="cpu", control_dt=0.002)
    env.reset(seed=0)
    for _ in range(3):
        _, _, _, _, info = env.step(torch.zeros(env.action_space.shape))
        assert not info["_overflow"].any() and (info["overflow"] == 0).all()


def test_flagged_worlds_only_are_ended_and_only_for_dropped_physics():
    """A flag of one world (as MuJoCo Warp sets it) ends that world alone; a solver's iteration
    limit (512) or a sensor's buffer (2048) is reported but ends nothing."""
    from flycuda import env as fenv

    env = fenv.make("walk", 4, device="cpu", control_dt=0.002, max_episode_steps=100)
    env.reset(seed=0)
    env.sim.view("overflow")[1:] = torch.tensor([8, 512, 2048 | 128], dtype=torch.int32)
    _, _, term, trunc, info = env.step(torch.zeros(env.action_space.shape))
    assert trunc.tolist() == [False, True, False, True] and not term.any()
    assert info["overflow"].tolist() == [0, 8, 512, 2048 | 128]
    assert info["_overflow"].tolist() == [False, True, False, True]


def test_the_replay_reports_an_overflow(tmp_path):
    from flycuda.recording import Recording
    from flycuda.replay import replay

    res = replay(worlds=2, duration=0.05, njmax=4, progress=False, record=str(tmp_path / "r.zarr"))
    assert set(res.overflow) == {0, 1} and "OVERFLOW" in res.report() and "njmax" in res.report()
    facts = Recording.open(str(tmp_path / "r.zarr")).info
    assert set(facts["mjw_overflow"]) == {"0", "1"}
    ok = replay(worlds=2, duration=0.002, progress=False, record="memory")
    assert ok.overflow == {} and "OVERFLOW" not in ok.report()


def test_the_bit_table_names_every_bit_of_mujoco_warps():
    import mujoco_warp as mjw

    from flycuda.sim.mjwarp import DROPPED_BITS, OVERFLOW_BITS

    bits = {int(b) for b in mjw.OverflowType if int(b) and int(b) & (int(b) - 1) == 0}  # single bits
    assert bits == set(OVERFLOW_BITS)
    assert DROPPED_BITS & int(mjw.OverflowType.NEFC) and DROPPED_BITS & int(mjw.OverflowType.NARROWPHASE)
    assert not DROPPED_BITS & (int(mjw.OverflowType.ITERATIONS) | int(mjw.OverflowType.LS_ITERATIONS))


def test_sim_reset_restarts_the_marked_worlds_and_clears_their_bits():
    sim = _tiny_sim(3, njmax=4)
    sim.view("qpos")[:, 2] = 0.01
    sim.step()
    assert set(sim.overflowed()) == {0, 1, 2}
    before = sim.view("qpos").clone()
    sim.reset(torch.tensor([False, True, False]))
    q = sim.view("qpos")
    assert torch.equal(q[[0, 2]], before[[0, 2]]) and torch.equal(q[1], torch.as_tensor(sim.mjm.qpos0, dtype=torch.float32))
    assert set(sim.overflowed()) == {0, 2}


@pytest.mark.needs_cuda
def test_the_captured_step_ends_overflowed_worlds_on_cuda():
    """On a GPU the overflow check runs inside the captured control step (graph launches)."""
    from flycuda import env as fenv
    from flycuda.sim import Sim, tripod_gait

    sim = Sim.build(None, 3, device="cuda", njmax=4)
    env = fenv.make("walk", sim=sim, motion=tripod_gait(), control_dt=60 * sim.timestep, settle=0.0)
    env.reset(seed=0)
    hold = torch.zeros(3, 42, device="cuda")
    ended = 0
    for _ in range(4):  # eager, captured, then graph launches
        _, _, term, trunc, info = env.step(hold)
        ended += int(trunc.sum())
        assert not term.any() and torch.equal(info["_overflow"], trunc)
    assert env._graph is not None and ended > 0
