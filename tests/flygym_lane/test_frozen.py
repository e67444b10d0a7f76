"""NeuroMechFly frozen where FlyGym is and built again where it is not (flycuda.flygym.frozen,
issue 53's GPU lease): the same MjModel up to the MJCF's six significant digits (MjSpec.to_xml's),
the same clip and targets bit for bit, and steps that stay within that precision; a task's
decoration applies to it; a missing variant says what to do."""

import json
import tarfile

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.needs_flygym, pytest.mark.needs_warp]

WORLDS = 3
STEPS = 24


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from flycuda.flygym.freeze import freeze

    out = tmp_path_factory.mktemp("frozen")
    freeze(str(out), [("neuromechfly", False, "flat", False), ("neuromechfly", True, "flat", True)],
                  progress=False)
    return out


@pytest.fixture
def no_flygym(monkeypatch, folder):
    """FlyGym made invisible to flycuda.flygym, the frozen folder named."""
    import importlib

    from flycuda.flygym import bridge, frozen
    spotlight = importlib.import_module("flycuda.flygym.spotlight")

    monkeypatch.setenv(frozen.ENV, str(folder))
    monkeypatch.setattr(bridge, "available", lambda: False)
    monkeypatch.setattr(spotlight, "available", lambda: False)


def assert_same_model(a, b, rtol=1e-5, atol=1e-5):
    """Every numeric field of two MjModels of the same shapes equal up to ``rtol`` (the MJCF's
    six digits); the meshes' file paths aside."""
    for name in dir(a):
        x = getattr(a, name, None)
        if name.startswith("_") or not isinstance(x, np.ndarray) or name in ("mesh_pathadr", "names", "paths"):
            continue
        y = getattr(b, name)
        assert x.shape == y.shape, name
        assert np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True), name


def _data(sim):
    return sim.carried_state()  # all a step depends on, besides the model


def _step(setup, steps=STEPS):
    """The tutorial's replay of the clip on the setup's worlds; their qpos after it."""
    import flycuda
    from flycuda import flygym as fg

    sim = setup.sim
    motion = fg.spotlight(setup.fly)
    coeffs = motion.spline().to(sim.device)
    step = flycuda.new_step_counter(sim.device)
    offs = fg.tutorial_offsets(WORLDS, 2000).to(sim.device)
    for _ in range(steps):
        flycuda.spline_to_ctrl(coeffs, step, sim.view("ctrl"), setup.act_ids, offsets=offs,
                               frames_per_step=motion.fps * sim.timestep, advance=1)
        sim.step()
    return sim.view("qpos").clone()


def _flygym_setup(**kw):
    from flycuda import flygym as fg

    return fg.Setup("neuromechfly", WORLDS, device="cpu", **kw)


def test_the_frozen_fly_is_flygyms(monkeypatch, no_flygym):
    import importlib

    from flycuda import flygym as fg
    from flycuda.flygym import bridge
    spotlight = importlib.import_module("flycuda.flygym.spotlight")

    frozen = fg.Setup("neuromechfly", WORLDS, device="cpu")
    assert isinstance(frozen.fly, fg.frozen.FrozenFly) and frozen.world is None
    ours = (frozen.sim.mjm, _data(frozen.sim), fg.spotlight(frozen.fly), fg.flygym_targets(frozen.fly),
            fg.tutorial_offsets(WORLDS, 2000), frozen.act_ids.clone(), frozen.camera, _step(frozen))
    monkeypatch.setattr(bridge, "available", lambda: True)  # FlyGym visible again: its own build
    monkeypatch.setattr(spotlight, "available", lambda: True)
    real = _flygym_setup()
    assert not isinstance(real.fly, fg.frozen.FrozenFly)
    mjm, data, motion, targets, offsets, act, cam, qpos = ours
    assert_same_model(mjm, real.sim.mjm)
    for k, v in _data(real.sim).items():
        assert torch.allclose(data[k].double(), v.double(), rtol=1e-5, atol=1e-6), k
    ref = fg.spotlight(real.fly)
    assert torch.equal(motion.angles64, ref.angles64) and motion.dof_names == ref.dof_names and motion.fps == ref.fps
    assert np.array_equal(targets, fg.flygym_targets(real.fly).astype(np.float32))  # its tutorial's buffer
    assert torch.equal(offsets, fg.tutorial_offsets(WORLDS, 2000))
    assert torch.equal(act, real.act_ids) and cam == real.camera
    assert torch.allclose(qpos, _step(real), rtol=1e-4, atol=1e-4)


def test_a_decorated_frozen_fly_is_flygyms(monkeypatch, no_flygym):
    """A task's objects (here a box) are added to the frozen world as to FlyGym's; the
    locomotion fly with its eyes."""
    from flycuda import flygym as fg
    from flycuda.flygym import bridge

    def decorate(spec):
        spec.worldbody.add_geom(name="box", type=6, size=[1, 1, 1], pos=[5, 0, 1])

    kw = dict(vision=True, locomotion=True, decorate=decorate)
    frozen = fg.Setup("neuromechfly", WORLDS, device="cpu", **kw)
    assert frozen.sim.mjm.geom("box").id >= 0
    monkeypatch.setattr(bridge, "available", lambda: True)
    assert_same_model(frozen.sim.mjm, _flygym_setup(**kw).sim.mjm)


def test_a_missing_variant_says_what_to_do(no_flygym, folder):
    from flycuda import flygym as fg

    assert fg.can_build("neuromechfly") and not fg.can_build("neuromechfly-capsules")
    assert fg.can_build("neuromechfly", vision=True, locomotion=True)
    with pytest.raises(fg.FlyGymError, match="no frozen NeuroMechFly neuromechfly-capsules-flat.tar.xz"):
        fg.Setup("neuromechfly-capsules", 1, device="cpu")


def test_a_frozen_variant_holds_the_world_facts_and_meshes(folder):
    from flycuda.flygym import frozen

    path = folder / frozen.variant("neuromechfly")
    with tarfile.open(path, "r:xz") as tar:
        names = tar.getnames()
        facts = json.loads(tar.extractfile("facts.json").read())
    assert names == ["world.xml", "facts.json"]
    with tarfile.open(folder / frozen.MESHES, "r:xz") as tar:
        assert len([n for n in tar.getnames() if n.endswith(".stl")]) > 30
    assert len(facts["dofs"]) == 42 and len(facts["adhesion"]) == 6
    with np.load(folder / frozen.CLIP) as clip:
        assert clip["angles64"].shape[1] == 42 and clip["targets"].dtype == np.float32 and clip["clip_frames"] > 100
    assert (folder / frozen.RETINA).is_file() and not list(folder.glob("*.part"))


def test_the_frozen_simulation_scatters_as_flygyms_and_checks_the_shape(no_flygym):
    """set_actuator_inputs writes FlyGym's columns from a tensor, an array or a Warp array;
    another shape is refused in one line, the controls untouched."""
    import warp as wp

    from flycuda import flygym as fg

    setup = fg.Setup("neuromechfly", WORLDS, device="cpu")
    ctrl = setup.sim.view("ctrl")
    x = torch.rand(WORLDS, 42)
    for given in (x, x.numpy(), wp.from_torch(x)):
        ctrl.zero_()
        setup.gpu_sim.set_actuator_inputs(setup.fly.name, "position", given)
        assert torch.equal(ctrl[:, setup.act_ids.long()], x)
    before = ctrl.clone()
    with pytest.raises(fg.FlyGymError, match=r"inputs must be \[n_worlds, 42\] = \[3, 42\], got \[3, 41\]"):
        setup.gpu_sim.set_actuator_inputs(setup.fly.name, "position", x[:, :41])
    assert torch.equal(ctrl, before)
