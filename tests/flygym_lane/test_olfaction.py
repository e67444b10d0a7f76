"""The fly's odor sensors on FlyGym 2.x's NeuroMechFly (flycuda.flygym.olfaction, issue 41): FlyGym
1.x's four sites, in its order, read for every world from MuJoCo Warp's site_xpos (zero-copy) equal
to MuJoCo's; where they sit on the head; what is refused. FlyGym lane, except the refusals that need
no FlyGym."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from flycuda.errors import FlyGymError
from flycuda.flygym.olfaction import ODOR_SENSORS, add_odor_sensors, odor_sensor_sites


def test_what_is_refused_without_flygym():
    with pytest.raises(FlyGymError, match=r"add_odor_sensors needs a FlyGym fly .* got object"):
        add_odor_sensors(object())
    mjm = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><geom size='1'/></body></worldbody></mujoco>")
    with pytest.raises(FlyGymError, match=r"no odor sensor site nmf/l_maxillary_palp_sensor, .*"
                                          r"nmf/r_antenna_sensor in the model"):
        odor_sensor_sites(mjm)


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_every_worlds_sensors_on_the_device_are_mujocos():
    """Two worlds of FlyGym's locomotion fly with the sensors, its GPUSimulation wrapped: the four
    sites from MuJoCo Warp's site_xpos equal MuJoCo's own site_xpos of the same state (float32);
    the palps and antennae are mirror images across the body's midplane, the palps below and
    behind the antennae; relative to the thorax (spawned unrotated) they sit where measured:
    the palps where 1.x put them (0.3087, +-0.15, -0.424 mm), the antennae 0.07 mm wider than
    1.x's (FlyGym 2.x turns the pedicel)."""
    from flygym.compose import FlatGroundWorld
    from flygym.utils.math import Rotation3D
    from flygym_demo.complex_terrain import make_locomotion_fly

    from flycuda import flygym as fg

    fly = make_locomotion_fly()
    add_odor_sensors(fly)
    with pytest.raises(FlyGymError, match="has its odor sensors already"):
        add_odor_sensors(fly)
    world = FlatGroundWorld()
    world.add_fly(fly, (0.0, 0.0, 0.8), Rotation3D("quat", (1, 0, 0, 0)))
    gpu_sim = fg.gpu_simulation(world, 2, device="cpu")
    sim = fg.wrap(gpu_sim)
    ids = odor_sensor_sites(sim.mjm)
    assert ids.tolist() == sorted(set(ids.tolist())) and len(ids) == len(ODOR_SENSORS) == 4
    d = mujoco.MjData(gpu_sim.mj_model)
    mujoco.mj_resetDataKeyframe(gpu_sim.mj_model, d, mujoco.mj_name2id(gpu_sim.mj_model, mujoco.mjtObj.mjOBJ_KEY,
                                                                           "neutral"))
    mujoco.mj_forward(gpu_sim.mj_model, d)
    sensors = sim.view("site_xpos")[:, ids]  # [W, 4, 3] on the sim's device
    want = torch.from_numpy(d.site_xpos[ids.numpy()]).float()
    for w in range(2):
        torch.testing.assert_close(sensors[w], want, rtol=0, atol=2e-6)
    thorax = d.xpos[mujoco.mj_name2id(gpu_sim.mj_model, mujoco.mjtObj.mjOBJ_BODY, "nmf/c_thorax")]
    rel = d.site_xpos[ids.numpy()] - thorax
    palps, antennae = rel[:2], rel[2:]
    for pair in (palps, antennae):
        assert pair[0, 1] > 0 > pair[1, 1], "left then right"
        np.testing.assert_allclose(pair[0] * [1, -1, 1], pair[1], atol=1e-9)  # mirror images
    assert (palps[:, 0] < antennae[:, 0]).all() and (palps[:, 2] < antennae[:, 2]).all()
    np.testing.assert_allclose(palps[0], [0.3087, 0.15, -0.4233], atol=1e-3)
    np.testing.assert_allclose(antennae[0], [0.5091, 0.1584, -0.0502], atol=1e-3)


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_odor_taxis_on_neuromechfly_with_descending_drives():
    """make("odor_taxis", model="neuromechfly", action="descending"): the sensors on FlyGym's head
    where 1.x put them (sites on the rostrum and funiculi, compiled into the thorax, equal to
    flycuda.env.smell.ROOT_OFFSETS: what the hexapod gets, scaled), the odor observations equal
    to the reference at the observed state, and FlyGym 1.x's rule (examples/odor_taxis.py) steps
    every world."""
    import importlib.util
    import os

    import flycuda.env as fe
    from flycuda.env.odor_tasks import FLYGYM1_PEAKS
    from flycuda.env.smell import ROOT_OFFSETS, sensor_sites
    from flycuda.reference.odor import odor_intensity

    env = fe.make("odor_taxis", worlds=3, model="neuromechfly", action="descending", device="cpu", seed=1)
    mjm = env.sim.mjm
    ids = sensor_sites(mjm)
    assert [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SITE, i) for i in ids] == \
        [f"nmf/{name}_sensor" for name, _, _ in ODOR_SENSORS]
    thorax = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "nmf/c_thorax")
    assert all(int(mjm.site_bodyid[i]) == thorax for i in ids)
    np.testing.assert_allclose(mjm.site_pos[ids], ROOT_OFFSETS, atol=2e-4)
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "odor_taxis.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_odor_taxis", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    policy = example.make_policy(env)
    obs, _ = env.reset(seed=2)
    for _ in range(3):
        env.sim.kinematics()
        q = env.sim.view("qpos")
        src = torch.stack([torch.stack([q[:, ax], q[:, ay], torch.full((3,), 1.5)], 1) for ax, ay in env.task._adrs(env)],
                          1)
        want = odor_intensity(src, torch.tensor(FLYGYM1_PEAKS), env.sim.view("site_xpos")[:, ids], torch.empty(3, 2, 4))
        torch.testing.assert_close(obs[:, env.obs_slice("odor")], want.view(3, -1), rtol=2e-6, atol=0)
        drives = policy(obs)
        assert drives.shape == (3, 2) and ((drives >= 0.2 - 1e-6) & (drives <= 1.0)).all()
        obs, rew, *_ = env.step(drives)
        assert rew.isfinite().all()


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_odor_obstacles_sees_and_smells():
    """make("odor_obstacles", model="neuromechfly", action="descending", vision="fast:2"): both eyes
    and the odor observed (NeuroMechFly v2 Fig. 5's inputs); the dark pillars darken what the eyes
    read where they stand, against the same worlds with the pillars moved far away."""
    import flycuda.env as fe

    env = fe.make("odor_obstacles", worlds=2, model="neuromechfly", action="descending", vision="fast:2",
                  device="cpu", seed=0, jitter=0.0)
    obs, info = env.reset(seed=0)
    vis, odor = env.obs_slice("vision"), env.obs_slice("odor")
    assert odor.stop - odor.start == 4 and (obs[:, odor] > 0).all() and info["hit"].eq(0).all()
    seen = obs[:, vis].clone()
    q = env.sim.view("qpos")
    for ax, ay in env.task._placed_adrs(env)[1:]:
        q[:, ax] += 1000.0  # the pillars out of sight
    env.sim.kinematics()
    env.vision.update()
    far = env.vision.readouts.reshape(2, -1)
    assert (seen.sum(1) < far.sum(1)).all(), "the pillars are dark in the eyes"
    obs, rew, *_ = env.step(torch.ones(2, 2))
    assert rew.isfinite().all()


@pytest.mark.needs_flygym
@pytest.mark.needs_warp
def test_the_wind_drags_neuromechfly_in_air_of_its_units():
    """odor_taxis with a wind on NeuroMechFly (mm and g): the model gets air's density in g/mm^3,
    and each world's wind (400 body lengths/s: 1 m/s) drags the fly along it through MuJoCo Warp's
    fluid forces, by about what air does to a fly (of the order of 1 uN = 1 g mm/s^2 at 1 m/s,
    a tenth of its weight or less); the odor is the advection-diffusion field in that wind."""
    import flycuda.env as fe
    from flycuda.env.smell import sensor_sites
    from flycuda.reference.odor import odor_intensity

    env = fe.make("odor_taxis", worlds=2, model="neuromechfly", device="cpu", seed=1, field="advection_diffusion",
                  wind=(400.0, 400.0), aversive=(0, 2), peak_spread=0.3)
    assert env.sim.mjm.opt.density == pytest.approx(1.2e-6) and env.sim.model.has_fluid
    obs, _ = env.reset(seed=2)
    d = env.task.draws
    torch.testing.assert_close(d.wind.norm(dim=1), torch.full((2,), 1000.0), rtol=1e-5, atol=0)  # mm/s
    env.sim.kinematics()
    q = env.sim.view("qpos")
    src = torch.stack([torch.stack([q[:, ax], q[:, ay], torch.full((2,), 1.5)], 1) for ax, ay in env.task._adrs(env)],
                      1)
    want = odor_intensity(src, d.peaks, env.sim.view("site_xpos")[:, sensor_sites(env.sim.mjm)], torch.empty(2, 2, 4),
                          field="advection_diffusion", wind=d.wind[:, :2], diffusivity=20000.0, decay=500.0)
    torch.testing.assert_close(obs[:, env.obs_slice("odor")], want.view(2, -1), rtol=2e-6, atol=0)
    for _ in range(5):
        env.step(torch.zeros(env.action_space.shape))
    root = env.layout.root_dof
    push = torch.as_tensor(env.sim.data.qfrc_fluid.numpy()[:, root:root + 2]).double()
    cos = (push * d.wind[:, :2].double()).sum(1) / (push.norm(dim=1) * 1000.0)
    assert (cos > 0.8).all(), f"the drag follows each world's wind: cos {cos.tolist()}"
    assert ((push.norm(dim=1) > 0.05) & (push.norm(dim=1) < 5.0)).all(), f"drag (uN) {push.norm(dim=1).tolist()}"
