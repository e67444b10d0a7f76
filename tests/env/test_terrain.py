"""make(..., terrain=, spawn_jitter=): FlyGym's complex terrains for every world, and what MuJoCo
Warp needs of them (flycuda.flygym.terrain). On any lane: what is refused, and the spawn jitter
(the hexapod). In the FlyGym lane: the one change to FlyGym's worlds (and that MuJoCo Warp
refuses them without it), the descending environment's fly (FlyGym's locomotion fly), and
walking on mixed terrain with no NaN reaching an observation, a non-finite world ended and
counted."""

from __future__ import annotations

import pytest
import torch

import flycuda.env as fe
from flycuda.errors import EnvError, ReplayError
from flycuda.worlds import resolve

NMF = dict(model="neuromechfly", device="cpu", action="descending", noise=0.0)


def test_terrains_are_refused_where_they_cannot_be_built():
    with pytest.raises(EnvError, match=r"unknown terrain 'hills'; the terrains are: flat, gapped, blocks, mixed"):
        fe.make("walk", worlds=2, device="cpu", terrain="hills")
    with pytest.raises(EnvError, match=r"terrain='gapped' is FlyGym's world around NeuroMechFly: .*model='hexapod'"):
        fe.make("walk", worlds=2, device="cpu", terrain="gapped")
    with pytest.raises(EnvError, match=r"spawn_jitter must be a finite length >= 0, got -1"):
        fe.make("walk", worlds=2, device="cpu", spawn_jitter=-1)
    with pytest.raises(EnvError, match=r"spawn_jitter must be a finite length >= 0, got inf"):
        fe.make("walk", worlds=2, device="cpu", spawn_jitter=float("inf"))
    with pytest.raises(ReplayError, match=r"terrain='blocks' builds FlyGym's world around NeuroMechFly"):
        resolve("hexapod", 2, device="cpu", terrain="blocks")
    with pytest.raises(ReplayError, match=r"locomotion=True builds FlyGym's world"):
        resolve("hexapod", 2, device="cpu", locomotion=True)
    with pytest.raises(ReplayError, match=r"unknown terrain 'ice'"):
        resolve("hexapod", 2, device="cpu", terrain="ice")


def test_spawn_jitter_starts_the_worlds_at_different_places():
    """Each of at least JITTER_STATES initial states has its root moved by up to the jitter along
    x and y before it settles (seeded); without a jitter the states keep the model's spawn."""
    j = 0.01  # m: the hexapod's unit
    env = fe.make("walk", worlds=3, device="cpu", spawn_jitter=j, init="default", settle=0.0)
    plain = fe.make("walk", worlds=3, device="cpu", init="default", settle=0.0)
    q, q0 = env._init[0], plain._init[0]
    adr = env.layout.root_adr
    assert q.shape[0] == fe.JITTER_STATES and q0.shape[0] == 1
    shift = q[:, adr:adr + 2] - q0[:, adr:adr + 2]
    assert (shift.abs() <= j + 1e-6).all() and shift.std(0).min() > j / 4, shift
    assert torch.equal(q[:, adr + 2:], q0[:, adr + 2:].expand_as(q[:, adr + 2:])), "only x and y move"
    again = fe.make("walk", worlds=3, device="cpu", spawn_jitter=j, init="default", settle=0.0)
    assert torch.equal(again._init[0], q), "the same seed, the same spawns"


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_fit_for_warp_changes_only_what_mujoco_warp_refuses():
    """On FlyGym's gapped world the margins of the fly's mesh x ground box pairs go to 0 (MuJoCo
    Warp refuses them with MULTICCD), the base plane's pairs keep theirs; a flat world and the
    capsule-fitted fly change nothing. Without the fit, MuJoCo Warp refuses the world."""
    import mujoco
    import mujoco_warp as mjw

    from flycuda.flygym import neuromechfly
    from flycuda.flygym.terrain import fit_for_warp, terrain_world

    _, world, _ = neuromechfly(terrain="gapped", locomotion=True)
    spec = world.mjcf_root
    boxes = sum(1 for g in world.ground_geoms if int(g.type) == int(mujoco.mjtGeom.mjGEOM_BOX))
    planes = len(world.ground_geoms) - boxes
    margins = {}
    for p in spec.pairs:
        margins.setdefault(int(spec.geom(p.geomname2).type), set()).add(p.margin)
    assert margins == {int(mujoco.mjtGeom.mjGEOM_BOX): {0.0}, int(mujoco.mjtGeom.mjGEOM_PLANE): {1e-3}}
    assert boxes == 27 and planes == 1
    def put(spec):  # as GPUSimulation: without the noslip solver MuJoCo Warp lacks
        m = spec.compile()
        m.opt.noslip_iterations = 0
        return mjw.put_model(m)

    put(spec)  # accepted
    raw = terrain_world("gapped")
    from flygym.utils.math import Rotation3D
    from flygym_demo.complex_terrain import make_locomotion_fly

    raw.add_fly(make_locomotion_fly(), (0, 0, 0.8), Rotation3D("quat", (1, 0, 0, 0)))
    with pytest.raises(NotImplementedError, match="MULTICCD"):
        put(raw.mjcf_root)
    assert fit_for_warp(raw.mjcf_root) == sum(1 for p in raw.mjcf_root.pairs if p.margin == 0)
    _, flat, _ = neuromechfly()
    assert fit_for_warp(flat.mjcf_root) == 0
    _, capsules, _ = neuromechfly(simplify_geom=True, terrain="blocks")
    assert fit_for_warp(capsules.mjcf_root) == 0 and {p.margin for p in capsules.mjcf_root.pairs} == {1e-3}


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_walking_on_mixed_terrain_keeps_every_observation_finite():
    """make("walk", model="neuromechfly", action="descending", terrain="mixed"): FlyGym's
    locomotion fly (its gains: kp 45) spawned at different places, walking forward on drives
    (1, 1) for 0.05 s; no observation or reward is NaN. A world whose state is made NaN ends in
    that step, its observation stays finite, and it is counted."""
    env = fe.make("walk", worlds=3, max_episode_steps=0, terrain="mixed", **NMF)
    assert "terrain='mixed'" in repr(env)
    mjm = env.sim.mjm
    kp = {float(mjm.actuator_gainprm[i, 0]) for i in env.descending.ids[:42].tolist()}
    assert kp == {45.0}, "make_locomotion_fly's actuator gain"
    adr = env.layout.root_adr
    starts = env._init[0][:, adr:adr + 2]
    assert starts.shape[0] >= fe.JITTER_STATES and starts.std(0).min() > 0.1, "spawns jittered (mm)"
    obs, _ = env.reset(seed=1)
    x0 = env.sim.view("qpos")[:, adr].clone()
    drive = torch.ones(3, 2)
    for k in range(50):
        if k == 30:
            env.sim.view("qvel")[1, 3] = float("nan")
        obs, rew, term, trunc, info = env.step(drive)
        assert torch.isfinite(obs).all() and torch.isfinite(rew).all() and torch.isfinite(info["final_obs"]).all(), k
        if k == 30:
            assert info["nonfinite_state"].tolist() == [False, True, False] and term[1]
            assert rew[1] == -env.task.c_fall and info["reward/forward"][1] == 0, "walk: a fall's cost"
    assert env.nonfinite_episodes.tolist() == [0, 1, 0]
    dx = env.sim.view("qpos")[:, adr] - x0
    assert dx[0] > 0.1 and dx[2] > 0.1, dx  # mm in 0.05 s


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_cli_walks_descending_flies_on_terrain(capsys):
    """flycuda env walk --action descending --terrain gapped with the random policy: drives drawn in
    the drives' action space [-1, 1], not the joints' ranges."""
    from flycuda.cli.main import main

    assert main(["env", "walk", "--model", "neuromechfly", "--action", "descending", "--terrain", "gapped",
                 "--worlds", "2", "--duration", "0.005", "--policy", "random", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "walk: 2 worlds of neuromechfly on gapped terrain on cpu, 5 control steps" in out
