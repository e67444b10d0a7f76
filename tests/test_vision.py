"""flycuda.vision: FlyGym's ommatidia readouts for every world, on the device.

Exact mode must equal FlyGym's own pooling (``Retina.fisheye_image_to_hex_pxls``)
of flycuda's full eye images of the same state, bit for bit, for every world and
both eyes; fast mode must stay close to exact; a model without eye cameras, a bad
mode or bad worlds are refused with one clear line. (Fidelity against FlyGym's
OpenGL eye renderer: bench/bench_vision.py.)"""

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.needs_warp, pytest.mark.needs_flygym]


@pytest.fixture(scope="module")
def eyes():
    from flycuda import flygym as fg

    fly, world, _ = fg.neuromechfly(vision=True)
    sim = fg.wrap(fg.gpu_simulation(world, 2, device="cpu"))
    ctrl = sim.view("ctrl")
    ctrl.copy_(torch.linspace(-0.2, 0.2, ctrl.numel()).view_as(ctrl))
    for _ in range(4):  # the two worlds in different poses
        sim.step()
        ctrl[1] *= -1
    return sim


def test_exact_mode_is_flygyms_pooling_of_flycudas_eye_images(eyes):
    from flygym.vision.retina import Retina

    from flycuda.vision import Vision

    v = Vision(eyes)
    v.readouts.fill_(float("nan"))  # poison
    out = v.update().clone()
    assert out.shape == (2, 2, 721, 2) and v.rays_per_readout == 77040
    images = v.eye_images()
    retina = Retina()
    want = np.stack([[retina.fisheye_image_to_hex_pxls(images[s, e].numpy()) for e in range(2)]
                     for s in range(2)]).astype(np.float32)
    assert np.array_equal(out.numpy(), want)
    assert not torch.equal(out[0], out[1])  # the worlds differ
    assert (out > 0).any(-1).float().mean() > 0.5  # most ommatidia see something lit


def test_fast_mode_is_close_to_exact(eyes):
    from flycuda.vision import Vision

    exact = Vision(eyes).update().clone()
    for k in (1, 4):
        fast = Vision(eyes, mode="fast", k=k)
        assert fast.rays_per_readout == 721 * k
        err = (fast.update() - exact).abs().sum(-1)
        assert err.mean() < 0.05 and err.max() < 0.6, (k, float(err.mean()), float(err.max()))


def test_selected_worlds(eyes):
    from flycuda.vision import Vision

    both = Vision(eyes).update().clone()
    one = Vision(eyes, worlds=[1]).update()
    assert torch.equal(one[0], both[1])


def test_bad_input(eyes):
    from flycuda.bridge import Sim
    from flycuda.model import fly_model
    from flycuda.vision import Vision, VisionError

    with pytest.raises(VisionError, match=r"no \(single\) pair of eye cameras .* NeuroMechFly.add_vision\(\)"):
        Vision(Sim.build(fly_model(), 1, device="cpu"))
    with pytest.raises(VisionError, match=r"mode must be 'exact' or 'fast', got 'blurry'"):
        Vision(eyes, mode="blurry")
    with pytest.raises(VisionError, match=r"worlds must be indices in \[0, 2\)"):
        Vision(eyes, worlds=[2])
