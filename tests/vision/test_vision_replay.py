"""The replay's vision stage (``replay(vision=...)``, ``flycuda replay --vision``): every
world's ommatidia readouts recorded at a chosen rate into the store, streamed chunk
by chunk. Without FlyGym: the built-in hexapod with two eye cameras and a small
retina (tests/helpers/worlds.py); FlyGym's own fly and retina: test_vision.py.

Each stored sample must equal :meth:`Vision.update` on the same worlds replayed to
that step (the replay is deterministic), on the CPU and, with a GPU, through the
captured graphs (several steps per launch, vision at a rate that is not a multiple
of a launch)."""

import math

import numpy as np
import pytest
import torch
from helpers.worlds import eyed_fly_xml, small_retina

pytestmark = pytest.mark.needs_warp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.needs_cuda)]


def _replay(device, steps, **kw):
    from flycuda.replay import replay
    from flycuda.sim import Sim

    sim = Sim.build(eyed_fly_xml(), 3, device=device)
    res = replay(sim=sim, worlds=3, duration=steps * sim.timestep, progress=False, **kw)
    return sim, res


@pytest.mark.parametrize("device", DEVICES)
def test_stored_readouts_equal_the_eyes_at_those_steps(device):
    """Sample k (step s = k * every) of every world equals Vision.update() of a sim posed
    at the state the step-s eyes saw: qpos after s - 1 steps (MuJoCo computes the poses
    at a step's start), the initial state for k = 0. Four chunks of two samples: the
    ring's two slots are each reused; on CUDA through the captured graphs."""
    from flycuda.sim import Sim
    from flycuda.vision import Vision

    retina, every, steps = small_retina(), 8, 60
    _, res = _replay(device, steps, vision=f"exact@{every}", retina=retina, record="memory", steps_per_graph=4,
                     observe=("angles", "qpos@1"), chunk_bytes=3 * 2 * 99 * 2 * 4 * 2)  # two samples per chunk
    rec = res.recording
    got, qpos = rec.vision(), torch.from_numpy(rec.samples("qpos"))
    rows = steps // every + 1
    assert got.shape == (3, rows, 2, retina.num_ommatidia, 2) and res.rows_written["vision"] == rows
    assert rec["vision"].chunks[1] == 2 and rows > 2 * 2  # the ring's slots are reused
    assert rec.every("vision") == every and rec["vision"].attrs["mode"] == "exact"
    assert rec["vision"].attrs["sample_shape"] == [2, retina.num_ommatidia, 2]
    assert res.vision_samples == rows and not np.isnan(got).any()
    posed = Sim.build(eyed_fly_xml(), 3, device=device)
    eyes = Vision(posed, retina=retina)
    for k in range(rows):
        posed.view("qpos").copy_(qpos[:, max(k * every - 1, 0)].to(device))
        posed.kinematics()
        assert np.array_equal(got[:, k], eyes.update().cpu().numpy()), k
    assert not np.array_equal(got[:, 0], got[:, -1])  # the fly moved


@pytest.mark.needs_cuda
def test_graph_launches_never_cross_a_sample():
    from flycuda.replay import ReplayError

    with pytest.raises(ReplayError, match=r"vision every 6 steps \(exact@6\) is not a multiple of steps_per_graph=4"):
        _replay("cuda", 12, vision="exact@6", retina=small_retina(), steps_per_graph=4)
    _, res = _replay("cuda", 12, vision="exact@6", retina=small_retina(), steps_per_graph=4, graph=False)
    assert res.vision_samples == 3


def test_fast_mode_and_rates():
    retina = small_retina()
    _, res = _replay("cpu", 24, vision="fast:2@1000hz", retina=retina, record="memory",
                     observe=("angles", "qpos@5"))
    rec = res.recording
    every = rec.every("vision")
    assert every == max(1, round(1 / (1000 * res.timestep)))
    assert rec["vision"].attrs["k"] == 2 and rec["vision"].attrs["rays_per_readout"] <= 2 * retina.num_ommatidia
    assert rec.vision().shape[1] == 24 // every + 1 and rec.every("qpos") == 5
    assert "vision" in res.report() and "readouts/s" in res.report()


def test_vision_without_a_store_records_nothing_but_runs():
    _, res = _replay("cpu", 6, vision="exact@3", retina=small_retina())
    assert res.recording is None and res.vision_samples == 3 and res.vision_device_bytes > 0


@pytest.mark.parametrize("spec, match", [
    ("blurry", r"bad vision spec 'blurry': use exact or fast\[:K\]"),
    ("exact:3", r"bad vision spec 'exact:3'"),
    ("fast:0", r"bad vision spec 'fast:0'"),
    ("exact@0", r"bad vision rate in 'exact@0'"),
    ("fast:2@-3hz", r"bad vision rate"),
    ("", r"vision must be a spec"),
])
def test_bad_specs(spec, match):
    from flycuda.vision import VisionError
    from flycuda.vision.stage import parse_vision

    with pytest.raises(VisionError, match=match):
        parse_vision(spec)


def test_parse_vision():
    from flycuda.vision.stage import DEFAULT_HZ, VisionSpec, parse_vision

    assert parse_vision("exact") == VisionSpec("exact", 4, None, None)
    assert parse_vision("FAST:8@100Hz") == VisionSpec("fast", 8, None, 100.0)
    assert parse_vision(True) == VisionSpec() and str(parse_vision("fast@12")) == "fast:4@12"
    assert parse_vision("exact").steps(1e-4) == round(1 / (DEFAULT_HZ * 1e-4))


def test_bad_models_and_retinas(tmp_path):
    from flycuda.recording import ObservableError
    from flycuda.replay import replay
    from flycuda.vision import VisionError

    with pytest.raises(VisionError, match=r"no \(single\) pair of eye cameras .*add_vision\(\)"):
        replay(worlds=1, duration=0.002, vision="exact", retina=small_retina(), progress=False)
    xml = eyed_fly_xml().replace('name="l_eye_cam_camera"', 'name="l_eye_cam_camera" resolution="64 48"')
    with pytest.raises(VisionError, match=r"'l_eye_cam_camera' renders 64x48 but the retina reads 30x37"):
        replay(model=xml, worlds=1, duration=0.002, vision="exact", retina=small_retina(), progress=False)
    with pytest.raises(ObservableError, match=r"recorded with --vision"):
        replay(worlds=1, duration=0.002, observe=("vision",), progress=False)
    out = tmp_path / "r.zarr"
    with pytest.raises(VisionError):  # refused before the store is created
        replay(worlds=1, duration=0.002, vision="fast:0", record=str(out), progress=False)
    assert not out.exists()


def test_hex_images_layout():
    retina = small_retina()
    r = torch.rand(2, 3, retina.num_ommatidia, 2)
    img = retina.hex_images(r)
    assert img.shape == (2, 3, retina.height, retina.width) and img.dtype == torch.uint8
    ids = torch.as_tensor(retina.id_map.astype(np.int64))
    o = int(ids[5, 7]) - 1
    assert int(img[1, 2, 5, 7]) == math.floor(float(r[1, 2, o].max()) * 255)
    assert (img[..., ids == 0] == 0).all()
    with pytest.raises(ValueError, match=r"readouts must be \[\.\.\., 99, 2\]"):
        retina.hex_images(torch.rand(3, 98, 2))


class _Frames:
    def __init__(self):
        self.frames = []

    def add(self, frame):
        self.frames.append(frame.cpu())


def test_video_afterwards_draws_the_recorded_eyes(tmp_path):
    from flycuda.recording import Recording, RecordingError
    from flycuda.render import mosaic
    from flycuda.replay import render_recording
    from flycuda.sim import Sim
    from flycuda.vision import eye_strip

    retina, path = small_retina(), str(tmp_path / "eyes.zarr")
    _replay("cpu", 12, vision="exact@4", retina=retina, record=path, observe=("angles", "qpos@3"))
    rec = Recording.open(path)
    frames = _Frames()
    sim = Sim.build(eyed_fly_xml(), 2, device="cpu")
    res = render_recording(path, worlds="1:3", sim=sim, camera="track", size=(40, 30), retina=retina,
                           progress=False, frame_callback=frames.add)
    assert res.frames == 5 == len(frames.frames)
    for k, frame in enumerate(frames.frames):  # the latest vision sample at or before qpos sample k's step
        strip = eye_strip(retina.hex_images(torch.from_numpy(rec.vision([1, 2], [k * 3 // 4])[:, 0])), 40)
        h = strip.shape[1]
        assert frame.shape == (30 + h, 80, 3)
        assert torch.equal(frame, mosaic(torch.cat([frame.new_zeros(2, 30, 40, 3), strip], 1)).where(
            torch.arange(30 + h)[:, None, None] >= 30, frame)), k
    assert frames.frames[0][30:].any()  # the eyes see something lit
    with pytest.raises(RecordingError, match="no eyes' readouts to draw"):
        no_eyes = str(tmp_path / "plain.zarr")
        _replay("cpu", 3, record=no_eyes, observe=("angles", "qpos"))
        render_recording(no_eyes, sim=Sim.build(eyed_fly_xml(), 2, device="cpu"), worlds="0:2", camera="track",
                         eyes=True, progress=False)


def test_live_video_shows_the_latest_eyes():
    """Each live frame: the selected worlds' tiles with, beneath, their eyes' latest
    readouts (vision every 4 steps, a frame every 6: the frame at step 6 shows sample 1)."""
    from flycuda.render import TileRenderer
    from flycuda.replay import replay
    from flycuda.sim import Sim
    from flycuda.vision import eye_strip

    retina = small_retina()
    sim = Sim.build(eyed_fly_xml(), 3, device="cpu")
    frames = _Frames()
    renderer = TileRenderer(sim, "track", 40, 30, worlds=[0, 2])
    res = replay(sim=sim, worlds=3, duration=12 * sim.timestep, vision="fast:2@4", retina=retina,
                 renderer=renderer, render_every=6, frame_writer=frames, progress=False, record="memory")
    stored = res.recording.vision()
    assert len(frames.frames) == 3  # steps 0, 6, 12
    for frame, row in zip(frames.frames, (0, 1, 3)):
        strip = eye_strip(retina.hex_images(torch.from_numpy(stored[[0, 2], row])), 40)
        assert frame.shape == (30 + strip.shape[1], 80, 3)
        assert torch.equal(frame[30:, :40], strip[0]) and torch.equal(frame[30:, 40:], strip[1]), row
    assert not torch.equal(frames.frames[0][30:], frames.frames[-1][30:])


def test_connectome_observables_are_checked_before_anything_is_built():
    """The replay's network observables (recorded with the eyes; run in tests/flygym_lane/
    test_connectome_replay.py) are refused in one line without the eyes, at a rate of their own,
    two at once, or with a checkpoint and no network."""
    from flycuda.recording.observables import ObservableError
    from flycuda.replay import ReplayError, ReplaySettings

    with pytest.raises(ReplayError, match="observe connectome:T4a is flyvis's network behind the eyes: add vision="):
        ReplaySettings(observe=("connectome:T4a",)).check()
    with pytest.raises(ReplayError, match="observe one of connectome, connectome_columns, got connectome and "):
        ReplaySettings(vision="fast", observe=("connectome", "connectome_columns")).check()
    with pytest.raises(ObservableError, match=r"connectome steps with the eyes, at --vision's rate"):
        ReplaySettings(vision="fast", observe=("connectome@10",)).check()
    with pytest.raises(ReplayError, match="connectome_checkpoint is the network's: observe connectome"):
        ReplaySettings(vision="fast", connectome_checkpoint="x.pt").check()
    checked = ReplaySettings(vision="fast", observe=("connectome_columns:T5b,T4a",)).check()
    assert checked.connectome.kind == "connectome_columns" and checked.connectome.names == ("T5b", "T4a")
    assert [s.kind for s in checked.specs] == ["angles"] and str(checked.connectome) == "connectome_columns:T5b,T4a"
