"""The CPU twin's ray packets (csrc/render/render_packet.h): four pixels' rays walk the
BVHs together, each lane with its own box tests, leaf tests and nearest hit, so the
images must equal the scalar walk's bit for bit. The CPU op walks one ray at a time
when it keeps timers (its per-ray node and triangle counts), so a render with and
without timers compares the two walks. Scenes: meshes (both BVH levels, mesh frames
entered and left), primitives, a pixel list whose packets straddle two tiles, partial
blocks (odd sizes), sub-samples with shadow rays, a far plane, and with FlyGym the
real NeuroMechFly and its eyes' pixel lists. The emulator lane (tests/csrc/test_emu.py)
holds the GPU kernel's scalar walk equal to the same CPU op."""

from dataclasses import replace

import pytest
import torch
from helpers.images import corrupt_scenes

from flycuda.render import TileRenderer

pytestmark = pytest.mark.needs_warp


def _both_walks(sim, cams, W, H, zfar=None, scene=None, geom_xpos=None, geom_xmat=None, **kw):
    """Renders (rgb, depth, seg) with the packets and with the scalar walk (timers on),
    outputs poisoned differently before each; asserts them equal bit for bit and
    returns the packets' renderer. zfar: a far plane in place of the model's; scene,
    geom_xpos, geom_xmat: in place of the renderer's, rendered unchecked (check=False,
    as after a renderer's first, validating render), so that a scene the host check
    refuses renders too."""
    out = []
    for timers, poison in ((False, 7), (True, 201)):
        tr = TileRenderer(sim, cams, W, H, depth=True, seg=True, timers=timers, **kw)
        if zfar is not None:
            tr.scene = replace(tr.scene, zfar=zfar)
        if scene is not None or geom_xpos is not None or geom_xmat is not None:
            tr.scene = tr.scene if scene is None else scene
            tr.top_boxes = torch.empty(tr.worlds.numel(), tr.scene.top_links.shape[0], 12)
            tr.geom_xpos = tr.geom_xpos if geom_xpos is None else geom_xpos
            tr.geom_xmat = tr.geom_xmat if geom_xmat is None else geom_xmat
            tr._validated = True
        tr.rgb.fill_(poison), tr.depth.fill_(-poison), tr.seg.fill_(-poison)
        tr.render()
        out.append(tr)
    packets, scalar = out
    assert torch.equal(packets.seg, scalar.seg)
    assert torch.equal(packets.depth, scalar.depth)
    assert torch.equal(packets.rgb, scalar.rgb)
    assert scalar.stage_times()["nodes"] > 0  # the scalar walk ran (and counted its nodes)
    return packets


@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
@pytest.mark.parametrize("samples,shadows", [(1, False), (2, True)])
def test_packets_equal_the_scalar_walk(scenes, scene, samples, shadows):
    sim, cam = scenes[scene]
    tr = _both_walks(sim, cam, 37, 23, samples=samples, shadows=shadows)  # partial blocks at both edges
    assert len(torch.unique(tr.seg)) >= 3  # several geoms seen (not an empty sky)


def test_packets_straddling_two_tiles_of_a_pixel_list(scenes):
    """149 listed pixels: the packet of list entries 148..151 holds the last pixel of one
    tile and the first three of the next; repeated and unsorted ids."""
    sim, cam = scenes["fly_mesh"]
    g = torch.Generator().manual_seed(3)
    ids = torch.cat([torch.randint(0, 41 * 29, (146,), generator=g), torch.tensor([0, 0, 41 * 29 - 1])]).int()
    _both_walks(sim, cam, 41, 29, pixels=ids)


def test_packets_with_a_far_plane_and_selected_worlds(scenes):
    sim, cam = scenes["fly_mesh"]
    packets = _both_walks(sim, cam, 29, 17, zfar=0.2, worlds=[1, 1, 0])
    assert torch.equal(packets.rgb[0], packets.rgb[1])  # a world selected twice renders the same twice
    assert (packets.seg == -1).any() and (packets.seg >= 0).any()  # the far plane cuts the image


@pytest.mark.needs_flygym
def test_packets_on_neuromechfly_and_its_eyes():
    from helpers.worlds import nmf_with_eyes

    from flycuda.vision import Vision

    sim, _, _ = nmf_with_eyes()
    track = next(sim.mjm.camera(i).name for i in range(sim.mjm.ncam) if "track" in sim.mjm.camera(i).name)
    tracked = _both_walks(sim, track, 48, 36, shadows=True)
    assert len(torch.unique(tracked.seg)) >= 10  # the fly's meshes, not just the floor
    eyes = Vision(sim, mode="fast", k=4)  # Z-ordered pixel lists, both eye cameras of each world
    _both_walks(sim, eyes.cameras, eyes.renderer.width, eyes.renderer.height, groups=(0,), pixels=eyes.map.raw_pixels)


def test_packets_on_bvhs_the_host_check_refuses(scenes):
    """Corrupted links, leaves of missing geoms, a top level deeper than the stack and
    longer than the culling limit (tests/helpers/images.py corrupt_scenes), unchecked: where a
    packet meets the scalar walk's limits (a full stack, kMaxVisits) it hands its rays
    to the scalar walk, so even these images are the scalar walk's."""
    sim, cam = scenes["prims"]
    for name, sc in corrupt_scenes(TileRenderer(sim, cam, 13, 9).scene):
        packets = _both_walks(sim, cam, 13, 9, scene=sc, shadows=True)
        assert (packets.seg >= 0).any(), name


def test_packets_with_nan_poses_and_rays_along_the_axes(scenes):
    """A camera looking straight down (odd sizes: the middle row, column and pixel have
    direction components of exactly 0, so reciprocals of +-inf and the parallel-slab
    rule), and NaN in a mesh's position and another geom's orientation."""
    sim, _ = scenes["fly_mesh"]
    down = ((0.0, 0.0, 0.6), (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), 70.0)
    tr = _both_walks(sim, down, 31, 21, shadows=True)
    assert len(torch.unique(tr.seg)) >= 3
    mesh = int(torch.nonzero(tr.scene.geom_info[:, 0] == 7)[0, 0])
    gid, other = int(tr.scene.geom_ids[mesh]), int(tr.scene.geom_ids[-1])
    xpos, xmat = tr.geom_xpos.clone(), tr.geom_xmat.clone()
    xpos[:, gid] = float("nan")
    xmat[:, other, 4] = float("nan")
    poisoned = _both_walks(sim, down, 31, 21, geom_xpos=xpos, geom_xmat=xmat, shadows=True)
    assert not torch.equal(poisoned.seg, tr.seg)  # the NaN poses changed what is seen
