"""FlyGym's walking controllers, batched (flycuda.control): held equal to FlyGym's own classes
world by world in the FlyGym lane (W worlds against W instances of
flygym_demo.complex_terrain's controllers, fed the same inputs, over 2,000 steps with drives
that change every 100 steps, negative ones included: bit for bit where NumPy's sin is the C
library's, else within 1e-9 and 1 float32 ulp); in every lane, the pieces against
plain-Python transcriptions, batching (world w is a controller of its own), masked resets and
bad input."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch
from helpers.cases import ulps32

from flycuda.control import ControlError, CPGController, HybridController, HybridTurningController, load_steps
from flycuda.control.steps import DOF_ORDER
from flycuda.reference.walking import TWO_PI, psi, py_mod

needs_flygym = pytest.mark.needs_flygym
DT = 1e-4


def _inputs(rng: np.random.Generator, W: int, hanging: np.ndarray | None = None):
    """Sensory inputs that make both rules fire now and then: one leg's tarsus hanging
    0-0.3 mm lower (retraction), or leg ``hanging[w]`` of world w 0.2 mm lower for as long
    as the caller says (long enough for the persistence rule); ground forces of ~1.3
    (stumbling below -1 along the heading); now and then a NaN height and a NaN force."""
    thorax = 1.0 + 0.05 * rng.standard_normal(W)
    tarsi = 0.3 + 0.02 * rng.standard_normal((W, 6))
    hang = rng.random(W) < 0.3
    tarsi[hang, rng.integers(0, 6, hang.sum())] -= 0.3 * rng.random(hang.sum())
    if hanging is not None:
        held = hanging >= 0
        tarsi[held, hanging[held]] -= 0.2
    nan = rng.random() < 0.05  # now and then a NaN height (FlyGym: no leg retracts) and a NaN force (no stumble)
    if nan:
        tarsi[0, 1] = np.nan
    forces = 1.3 * rng.standard_normal((W, 6, 3, 3)) * (rng.random((W, 6, 1, 1)) < 0.2)
    if nan:
        forces[0, 4, 1, 2] = np.nan
    heading = rng.standard_normal((W, 3))
    heading /= np.linalg.norm(heading, axis=1, keepdims=True)
    return thorax, tarsi, forces, heading


def _numpy_sin_is_libm() -> bool:
    """Is NumPy's float64 sin the C library's here (math.sin)? Then flycuda's CPU op, which calls
    the C library's, must equal FlyGym bit for bit; elsewhere within the issue's tolerances."""
    xs = np.random.default_rng(9).uniform(-1e3, 1e3, 20000)
    return bool(np.array_equal(np.sin(xs), np.array([math.sin(x) for x in xs.tolist()])))


EXACT = _numpy_sin_is_libm()


def _t(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


# --- against FlyGym's own classes (the FlyGym lane) ---------------------------------------

@needs_flygym
@pytest.mark.parametrize("seed", [0, 11])
def test_the_turning_controller_is_flygyms_world_by_world(seed):
    from flygym_demo.complex_terrain import HybridControllerObservation, make_tripod_cpg_network
    from flygym_demo.complex_terrain import HybridTurningController as FlyGymTurning

    W, steps = 5, 2000
    ours = HybridTurningController(W, DT, seed=seed)
    theirs = [FlyGymTurning(DT, cpg_network=make_tripod_cpg_network(DT, seed=seed + w)) for w in range(W)]
    assert torch.equal(ours.phases, torch.tensor(np.stack([c.cpg_network.curr_phases for c in theirs])))
    rng = np.random.default_rng(seed)
    drive = rng.uniform(-1.2, 1.2, (W, 2))
    fired = {"retraction": 0, "stumbling": 0, "persistence": 0, "backwards": 0}
    for step in range(steps):
        if step % 100 == 99:
            drive = rng.uniform(-1.2, 1.2, (W, 2))
        if step % 400 == 0:  # a leg hangs for 300 of every 400 steps: retraction grows past persistence
            hanging = rng.integers(0, 6, W)
        thorax, tarsi, forces, heading = _inputs(rng, W, hanging if step % 400 < 300 else None)
        angles, adhesion = ours.step(*_t(drive, thorax, tarsi, forces, heading))
        for w, c in enumerate(theirs):
            obs = HybridControllerObservation(float(thorax[w]), tarsi[w], forces[w], heading[w])
            action = c.step(drive[w], obs)
            net = c.last_info["net_corrections"]
            tol, ulps = (0.0, 0) if EXACT else (1e-9, 1)
            assert np.abs(ours.phases[w].numpy() - c.cpg_network.curr_phases).max() <= tol, (step, w)
            assert np.abs(ours.magnitudes[w].numpy() - c.cpg_network.curr_magnitudes).max() <= tol, (step, w)
            assert ulps32(angles[w], action.joint_angles) <= ulps, (step, w)
            assert np.array_equal(adhesion[w].numpy(), action.adhesion_onoff), (step, w)
            assert np.array_equal(ours.retraction[w].numpy(), c.retraction_correction), (step, w)
            assert np.array_equal(ours.stumbling[w].numpy(), c.stumbling_correction), (step, w)
            assert np.array_equal(ours.persistence[w].numpy(), c.retraction_persistence_counter), (step, w)
            assert np.abs(ours.net_corrections[w].numpy() - net).max() <= tol, (step, w)
            fired["retraction"] += c.last_info["leg_to_correct_retraction"] is not None
        fired["stumbling"] += sum(int(c.last_info["stumbling_mask"].sum()) for c in theirs)
        fired["persistence"] += int((ours.persistence > 0).sum())
        fired["backwards"] += int((drive < 0).sum())
    assert all(n > 50 for n in fired.values()), fired  # every rule and negative drives were exercised


@needs_flygym
def test_the_cpg_controller_is_flygyms():
    from flygym_demo.complex_terrain import CPGController as FlyGymCPG
    from flygym_demo.complex_terrain import PreprogrammedSteps, make_tripod_cpg_network

    W, steps = 3, 2000
    ours = CPGController(W, DT, seed=4)
    pre = PreprogrammedSteps()
    theirs = [FlyGymCPG(make_tripod_cpg_network(DT, seed=4 + w), pre) for w in range(W)]
    for step in range(steps):
        angles, adhesion = ours.step()
        for w, c in enumerate(theirs):
            action = c.step()
            assert np.abs(ours.phases[w].numpy() - c.cpg_network.curr_phases).max() <= (0.0 if EXACT else 1e-9)
            assert ulps32(angles[w], action.joint_angles) <= (0 if EXACT else 1), (step, w)
            assert np.array_equal(adhesion[w].numpy(), action.adhesion_onoff), (step, w)


@needs_flygym
def test_the_step_table_is_flygyms_splines():
    """The shipped table (flycuda/control/single_steps.npz) is FlyGym's: its splines at
    phases across many cycles, knots and exact 2 pi included, bit for bit."""
    from flygym_demo.complex_terrain import PreprogrammedSteps
    from flygym_demo.complex_terrain.preprogrammed import _DOFS_PER_LEG  # noqa: F401  (the order LEG_DOFS names)

    pre, table = PreprogrammedSteps(), load_steps()
    rng = np.random.default_rng(0)
    phases = np.concatenate([rng.uniform(-3000, 3000, 4000), table.knots.numpy(), [-1e-17, 0.0, -0.0, TWO_PI, math.pi]])
    ours = psi(table.knots, table.coeffs, torch.from_numpy(np.repeat(phases[:, None], 6, axis=1)))
    for leg_idx, leg in enumerate(pre.legs):
        assert np.array_equal(ours[:, leg_idx].numpy(), pre._psi_funcs[leg](phases).T), leg
        assert np.array_equal(table.neutral[leg_idx].numpy(), pre.neutral_pos[leg][:, 0])
        assert float(table.swing_end[leg_idx]) == pre.swing_period[leg][1]


# --- every lane ---------------------------------------------------------------------------

def test_py_mod_is_pythons_modulo_bit_for_bit():
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.uniform(-1e4, 1e4, 5000), [-1e-17, 1e-300, -0.0, 0.0, TWO_PI, -TWO_PI, 3 * TWO_PI]])
    got = py_mod(torch.from_numpy(xs), TWO_PI).numpy()
    want = [x % TWO_PI for x in xs.tolist()]
    assert [struct.pack("<d", g) for g in got] == [struct.pack("<d", w) for w in want]


def _psi_scalar(table, leg: int, phase: float) -> list:
    """scipy's PPoly evaluation of one leg at one phase, written out with Python floats."""
    x, c = table.knots.tolist(), table.coeffs[leg].tolist()  # c[p][i][k]
    xv = x[0] + (phase - x[0]) % (x[-1] - x[0])
    i = len(x) - 2 if xv == x[-1] else max(j for j in range(len(x) - 1) if x[j] <= xv)
    s = xv - x[i]
    return [((0.0 + c[3][i][k] + c[2][i][k] * s) + c[1][i][k] * (s * s)) + c[0][i][k] * ((s * s) * s) for k in range(7)]


def test_the_batched_splines_are_the_scalar_evaluation():
    table = load_steps()
    rng = np.random.default_rng(2)
    phases = rng.uniform(-50, 50, (7, 6))
    phases[0, :] = table.knots[[0, 5, 44, 43, 1, 2]].numpy()
    phases[1, 0] = -1e-17
    got = psi(table.knots, table.coeffs, torch.from_numpy(phases))
    for r in range(phases.shape[0]):
        for leg in range(6):
            assert got[r, leg].tolist() == _psi_scalar(table, leg, float(phases[r, leg])), (r, leg)


def test_world_w_is_a_controller_of_its_own():
    """Batching changes nothing but torch's sin's last bit (its vector and scalar paths):
    world w of a batch steps as a one-world controller seeded seed + w, fed world w's inputs."""
    W, rng = 4, np.random.default_rng(3)
    batch = HybridTurningController(W, DT, seed=7)
    alone = [HybridTurningController(1, DT, seed=7 + w) for w in range(W)]
    for step in range(300):
        drive = np.full((W, 2), 1.0) if step < 150 else -np.ones((W, 2)) * np.arange(1, W + 1)[:, None] / W
        inputs = (drive, *_inputs(rng, W))
        angles, adhesion = batch.step(*_t(*inputs))
        for w in range(W):
            a, h = alone[w].step(*_t(*(x[w:w + 1] for x in inputs)))
            assert ulps32(angles[w], a[0].double().numpy()) <= 1 and torch.equal(adhesion[w:w + 1], h), (step, w)
            assert (batch.phases[w] - alone[w].phases[0]).abs().max() <= 1e-9, (step, w)
    assert torch.equal(batch.retraction, torch.cat([c.retraction for c in alone]))


def test_a_masked_reset_leaves_the_other_worlds_alone():
    ctrl = HybridController(3, DT, seed=0)
    rng = np.random.default_rng(4)
    for _ in range(200):
        ctrl.step(*_t(*_inputs(rng, 3)))
    before = {k: getattr(ctrl, k).clone() for k in ("phases", "magnitudes", "retraction", "stumbling", "persistence")}
    mask = torch.tensor([False, True, False])
    ctrl.reset(seed=5, worlds=mask)
    fresh = HybridController(3, DT, seed=5)
    assert torch.equal(ctrl.phases[1], fresh.phases[1]) and float(ctrl.magnitudes[1].abs().sum()) == 0.0
    for k, v in before.items():
        assert torch.equal(getattr(ctrl, k)[~mask], v[~mask]), k
    ctrl.reset(init_phases=torch.full((3, 6), 1.5), init_magnitudes=torch.full((3, 6), 0.25))
    assert torch.equal(ctrl.phases, torch.full((3, 6), 1.5, dtype=torch.float64))


def test_the_first_angles_are_the_neutral_pose_ramping_up():
    """Magnitudes start at 0: the first step's angles are within one Euler step of the
    neutral pose (the splines at phase pi), whatever the phases."""
    ctrl = CPGController(2, DT, seed=1)
    angles, _ = ctrl.step()
    neutral = load_steps().neutral[:, list(DOF_ORDER)].flatten().float()
    assert torch.allclose(angles, neutral.expand(2, 42), atol=0.02)


@pytest.mark.parametrize("bad,match", [
    (lambda W: torch.zeros(W, 3), r"drive must be a floating tensor \[4, 2\] on cpu, got torch.float32 \(4, 3\)"),
    (lambda W: torch.zeros(W, 2, dtype=torch.int64), r"drive must be a floating tensor \[4, 2\].*torch.int64"),
    (lambda W: np.zeros((W, 2)), r"drive must be a floating tensor \[4, 2\] on cpu, got ndarray"),
])
def test_a_bad_drive_is_refused_and_the_state_stays(bad, match):
    ctrl = HybridTurningController(4, DT)
    phases = ctrl.phases.clone()
    with pytest.raises(ControlError, match=match):
        ctrl.step(bad(4), *_t(*_inputs(np.random.default_rng(0), 4)))
    assert torch.equal(ctrl.phases, phases)


def test_bad_inputs_and_settings_are_refused():
    ctrl = HybridController(2, DT)
    thorax, tarsi, forces, heading = _t(*_inputs(np.random.default_rng(0), 2))
    with pytest.raises(ControlError, match=r"stumbling_forces must be a floating tensor \[2, 6, 3, 3\]"):
        ctrl.step(thorax, tarsi, forces[:, :, :2], heading)
    with pytest.raises(ControlError, match=r"worlds must be a positive integer, got 0"):
        HybridController(0, DT)
    with pytest.raises(ControlError, match=r"timestep must be > 0 seconds, got -1"):
        CPGController(1, -1)
    with pytest.raises(ControlError, match=r"worlds must be a bool mask \[2\]"):
        ctrl.reset(worlds=torch.tensor([1, 0]))
    with pytest.raises(ControlError, match=r"init_phases must have shape \[2, 6\], got \(6,\)"):
        ctrl.reset(init_phases=torch.zeros(6))


@pytest.mark.needs_cuda
def test_the_classes_on_cuda_step_as_on_the_cpu():
    """device="cuda" (normalised to the GPU the tensors live on): the same worlds on the GPU and
    the CPU, fed the same inputs, stay within CUDA's sin's last bit over 1,000 steps."""
    W, rng = 64, np.random.default_rng(5)
    cpu, gpu = HybridTurningController(W, DT, seed=3), HybridTurningController(W, DT, device="cuda", seed=3)
    for step in range(1000):
        inputs = _t(rng.uniform(-1.2, 1.2, (W, 2)), *_inputs(rng, W))
        a_c, h_c = cpu.step(*inputs)
        a_g, h_g = gpu.step(*(t.cuda() for t in inputs))
        assert (cpu.phases - gpu.phases.cpu()).abs().max() <= 1e-9, step
        assert ulps32(a_g.cpu(), a_c.double().numpy()) <= 1 and torch.equal(h_c, h_g.cpu()), step
