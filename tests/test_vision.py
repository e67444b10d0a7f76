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


def test_hex_images_equal_flygyms_human_readable_images(eyes):
    from flygym.vision.retina import Retina

    from flycuda.vision import Vision

    v = Vision(eyes)
    out = v.update()
    got = v.retina.hex_images(out)
    retina = Retina()
    for s in range(2):
        for e in range(2):
            want = retina.hex_pxls_to_human_readable(out[s, e].numpy().max(-1), color_8bit=True)
            assert np.array_equal(got[s, e].numpy(), want), (s, e)


def test_cli_replay_records_the_eyes_and_draws_them(tmp_path, capsys):
    """The FlyGym-lane demo with --vision: NeuroMechFly's readouts in the store, its
    video with both eyes of each world under its tile."""
    import imageio.v3 as iio

    from flycuda.cli import main
    from flycuda.recording import Recording

    rc = main(["replay", "--model", "neuromechfly", "--device", "cpu", "--worlds", "2", "--duration", "0.004",
               "--warmup", "0", "--vision", "fast:2@20", "--out", str(tmp_path), "--render-size", "64x48",
               "--no-progress"])
    assert rc == 0
    rec = Recording.open(str(tmp_path / "recording.zarr"))
    v = rec.vision()
    assert v.shape == (2, 3, 2, 721, 2) and rec.complete and not np.isnan(v).any()
    assert (v.max(-1) > 0).mean() > 0.5
    frame = iio.imread(str(tmp_path / "last_frame.png"))
    assert frame.shape[0] > 48 and frame[48:].any()  # the eyes under the tiles
    assert "vision         fast:2@20: 3 samples x 2 worlds" in capsys.readouterr().out
