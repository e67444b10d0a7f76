"""flycuda.ops.hybrid_senses on a real NeuroMechFly against FlyGym's own observation
(HybridControllerObservation.from_sim: get_body_positions, xmat, and
get_bodysegment_contact_forces(ground_only=True)). FlyGym's CPU Simulation walks the fly with its
own HybridTurningController. At checkpoints its MjData is brought up to date (mj_forward) and put
on MuJoCo Warp (put_data: the same state, in float32), and the op reads it there. Heights and
heading are FlyGym's rounded to float32. The forces agree to 1e-6 of the largest: measured 6e-7
on forces up to 43 (the model's units), as MuJoCo Warp keeps efc_force and the frames in float32.
FlyGym lane."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.needs_flygym, pytest.mark.needs_warp]


def _walking_fly():
    """FlyGym's locomotion fly on flat ground, CPU Simulation, warmed up; FlyGym's turning
    controller (seed 0) and its loop."""
    from flygym import Simulation
    from flygym.compose import FlatGroundWorld
    from flygym.utils.math import Rotation3D
    from flygym_demo.complex_terrain import (
        HybridControllerObservation,
        HybridTurningController,
        apply_locomotion_action,
        make_locomotion_fly,
        make_tripod_cpg_network,
    )

    fly = make_locomotion_fly()
    world = FlatGroundWorld()
    world.add_fly(fly, (0.0, 0.0, 0.7), Rotation3D("quat", (1, 0, 0, 0)))
    sim = Simulation(world, timestep=1e-4)
    ctrl = HybridTurningController(1e-4, cpg_network=make_tripod_cpg_network(1e-4, seed=0))
    sim.reset()
    sim.warmup()

    def step(drive):
        obs = HybridControllerObservation.from_sim(sim, fly.name)
        apply_locomotion_action(sim, fly.name, ctrl.step(np.asarray(drive), obs))
        sim.step()

    return sim, fly.name, step, HybridControllerObservation


def test_senses_equal_flygyms_observation_on_a_walking_fly():
    import mujoco
    import mujoco_warp as mjw

    from flycuda import ops
    from flycuda.flygym.senses import LEGS, HybridSenses
    from flycuda.sim import Sim

    sim, name, step, Observation = _walking_fly()
    senses = HybridSenses.of(sim, name)
    # the same op on the feet (tarsus3-5 in the segments' slots), which touch the ground at every
    # step: FlyGym's get_bodysegment_contact_forces on them is the reference of many nonzero forces
    fly = sim.world.fly_lookup[name]
    seg = type(fly).BODY_SEGMENT_CLASS
    feet_names = [f"{leg}_{link}" for leg in LEGS for link in ("tarsus3", "tarsus4", "tarsus5")]
    geom_of = sim._internal_geomid_by_bodyseg_by_fly[name]
    feet = HybridSenses(senses.body_ids, ops.geom_segments(sim.mj_model.ngeom, [geom_of[seg(n)] for n in feet_names],
                                                           sim._internal_ground_geom_ids), senses.cone)
    noslip, sim.mj_model.opt.noslip_iterations = sim.mj_model.opt.noslip_iterations, 0  # MuJoCo Warp has none
    model = mjw.put_model(sim.mj_model)  # (as GPUSimulation does; the CPU sim keeps its own)
    sim.mj_model.opt.noslip_iterations = noslip
    checked = touching = 0
    for t in range(1, 1201):
        step((1.0, 0.6) if t < 600 else (0.4, 1.1))
        if t % 150:
            continue
        # put_data recomputes the kinematics (mj_kinematics) but not the contacts or forces, and
        # after mj_step the Data describes the step's start: a forward pass first makes it all
        # describe the state now (it touches only the solver's warm start of FlyGym's next step)
        mujoco.mj_forward(sim.mj_model, sim.mj_data)
        want = Observation.from_sim(sim, name)
        want_feet = sim.get_bodysegment_contact_forces(name, feet_names, ground_only=True).reshape(6, 3, 3)
        data = mjw.put_data(sim.mj_model, sim.mj_data, nworld=2)  # two copies of the state: both worlds read it
        wsim = Sim.wrap(model, data, sim.mj_model)
        senses.read(wsim)
        feet.read(wsim)
        for w in range(2):
            assert senses.thorax_z[w].item() == float(np.float32(want.thorax_z))
            assert torch.equal(senses.tarsus5_z[w], torch.from_numpy(want.tarsus5_z.astype(np.float32).astype(float)))
            assert torch.equal(senses.heading[w], torch.from_numpy(want.fly_heading.astype(np.float32).astype(float)))
            for got, ref in ((senses.stumbling_forces[w].numpy(), want.stumbling_contact_forces),
                             (feet.stumbling_forces[w].numpy(), want_feet)):
                np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6 * max(1.0, float(np.abs(ref).max())))
                assert np.array_equal(got != 0, ref != 0), "the same segments touch the ground"
        checked += 1
        touching += int((np.abs(want_feet).sum(axis=2) > 0).sum())
    assert checked == 8 and touching >= 8 * 6, (checked, touching)  # at least six feet segments a checkpoint
