"""flycuda.render_tiles vs the float64 torch reference, the grid emulator and MuJoCo
Warp's renderer; the TileRenderer front end; bad input; CUDA when present.

Tolerances: the op shades in float32, the reference in float64. Segmentation must
agree except on silhouette-edge pixels (a pixel whose reference label differs from
one of its 4 neighbours), where a ray grazing an outline may fall either side in
float32; at most 1% of pixels. Depth: 1e-4 relative where the labels agree. RGB:
2 levels of 255 where the labels agree and the pixel is not on an edge.
"""

from dataclasses import replace

import pytest
import torch
from helpers.devices import cpu_and_cuda
from helpers.images import assert_images_close, op_args, tile_renderer
from helpers.worlds import fly_sim, prims_sim

import flycuda
from flycuda.ops import launch_plan
from flycuda.reference.render import render_tiles as ref_render

pytestmark = pytest.mark.needs_warp






@pytest.fixture(scope="module")
def prims():
    return prims_sim(), "overview"


@pytest.fixture(scope="module")
def fly():
    return fly_sim(), "track"


def _fly_mesh_sim(around: int):
    """The hexapod with triangle-mesh body parts (flycuda.sim.hexapod.fly_mesh_model), 2 worlds."""
    from flycuda.sim.hexapod import fly_mesh_model

    return fly_sim(2, model=fly_mesh_model(around=around))


@pytest.fixture(scope="module")
def fly_mesh():
    """Light meshes (~2.9k triangles) for the brute-force float64 reference."""
    return _fly_mesh_sim(around=8), "track"


@pytest.fixture(scope="module")
def fly_mesh_heavy():
    """The benchmark's mesh-heavy scene (~80k triangles)."""
    return _fly_mesh_sim(around=40), "track"








@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
@pytest.mark.parametrize("samples,shadows", [(1, False), (2, True)])
def test_op_matches_reference(request, device, scene, samples, shadows):
    sim, cam = request.getfixturevalue(scene)
    W, H = (40, 30) if scene == "prims" else (33, 25)
    tr = tile_renderer(sim, cam, W, H, device, samples=samples, shadows=shadows)
    ref = ref_render(sim.view("geom_xpos"), sim.view("geom_xmat"), tr.cam_pos.cpu()[:, 0], tr.cam_mat.cpu()[:, 0],
                     list(range(sim.nworld)), tr.scene, fovy=tr.fovy[0], height=H, width=W,
                     samples=samples, shadows=shadows)
    assert_images_close(tr.rgb, tr.depth, tr.seg, *ref)
    ids = set(torch.unique(tr.seg).tolist())
    if scene == "prims":  # background and every primitive are seen
        assert ids == set(range(-1, 7))
    else:  # the floor fills the background; thorax, head and many leg segments are seen
        assert -1 not in ids and len(ids) >= 10


def test_mosaic_world_selection_and_fixed_camera(prims):
    from flycuda.render import TileRenderer, mosaic

    sim, cam = prims
    tiles = TileRenderer(sim, cam, 20, 15)
    tiles.render()
    mos = TileRenderer(sim, cam, 20, 15, mosaic=True)
    mos.render()
    assert torch.equal(mos.rgb, mosaic(tiles.rgb))
    swapped = TileRenderer(sim, cam, 20, 15, worlds=[1, 0])
    swapped.render()
    assert torch.equal(swapped.rgb, tiles.rgb.flip(0)) and not torch.equal(tiles.rgb[0], tiles.rgb[1])
    cid = sim.camera_id(cam)
    fixed = TileRenderer(sim, (sim.view("cam_xpos")[0, cid], sim.view("cam_xmat")[0, cid], 45.0), 20, 15)
    fixed.render()
    assert torch.equal(fixed.rgb, tiles.rgb)  # the overview camera is fixed in the world


def test_poses_are_read_live_from_the_sim():
    """The renderer holds views, not copies: moving a body changes the next image."""
    from flycuda.render import TileRenderer

    sim = prims_sim(1)
    tr = TileRenderer(sim, "overview", 24, 18, seg=True)
    tr.render()
    before = tr.seg.clone()
    sim.view("qpos")[0, 0] += 0.08  # slide the sphere
    sim.forward()
    tr.render()
    assert not torch.equal(before, tr.seg)


@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh_heavy"])
def test_matches_mujoco_warp_renderer(request, scene):
    """Per-world segmentation IoU >= 0.98 and median depth error <= 1% vs mjw.render."""
    import mujoco_warp as mjw
    import warp as wp

    sim, cam = request.getfixturevalue(scene)
    W, H = 64, 48
    tr = tile_renderer(sim, cam, W, H)
    with wp.ScopedDevice("cpu"):
        rc = mjw.create_render_context(sim.mjm, nworld=sim.nworld, cam_res=(W, H), render_rgb=True,
                                       render_depth=True, render_seg=True, cam_active=[sim.camera_id(cam)])
        mjw.refit_bvh(sim.model, sim.data, rc)
        mjw.render(sim.model, sim.data, rc)
        seg = wp.zeros((sim.nworld, H, W), dtype=wp.vec2i)
        depth = wp.zeros((sim.nworld, H, W), dtype=wp.float32)
        mjw.get_segmentation(rc, 0, seg)
        mjw.get_depth(rc, 0, 1.0e6, depth)
    m_seg, m_depth = wp.to_torch(seg)[..., 0], wp.to_torch(depth) * 1.0e6
    for w in range(sim.nworld):
        a, b = tr.seg[w], m_seg[w]
        fg = (a >= 0) | (b >= 0)
        iou = ((a == b) & fg).sum() / fg.sum()
        assert iou >= 0.98, (w, float(iou))
        both = (a == b) & (a >= 0)
        rel = ((tr.depth[w][both] - m_depth[w][both]).abs() / m_depth[w][both]).median()
        assert rel <= 0.01, (w, float(rel))




class _Short:
    """A scene whose tensors() leaves the last field out."""

    def __init__(self, sc):
        self.sc, self.zfar, self.top_links = sc, sc.zfar, sc.top_links

    def tensors(self):
        return self.sc.tensors()[:-1]


@pytest.mark.parametrize("case,msg", [
    ("xpos_f64", r"argument 'geom_xpos' must have dtype Float, got Double"),
    ("xmat_shape", r"argument 'geom_xmat' must have shape \[2, 7, 9\] \(-1: any\), got \[2, 5, 9\]"),
    ("worlds_range", r"argument 'worlds' must hold indices in \[0, 2\)"),
    ("worlds_i64", r"argument 'worlds' must be a contiguous int32 vector, got Long"),
    ("rgb_shape", r"argument 'rgb' must have shape \[2, 1, 15, 20, 3\], got \[2, 1, 15, 21, 3\]"),
    ("seg_dtype", r"argument 'seg' must have dtype Int, got Long"),
    ("zero_size", r"the image must not be empty"),
    ("samples", r"argument 'samples' must be in \[1, 8\], got 0"),
    ("meta_device", r"argument 'cam_pos' must be on cpu \(the device of 'geom_xpos'\), got meta"),
    ("fovy_count", r"argument 'fovy' must hold one angle per camera \(1\), got 2"),
    ("fovy_range", r"argument 'fovy' must be in \(0, 180\) degrees, got 180"),
    ("nine_cameras", r"argument 'cam_pos' must hold 1 to 8 cameras per world, got 9"),
    ("pixels_range", r"argument 'pixels' must hold indices in \[0, 300\)"),
    ("pixels_mosaic", r"a pixel list \('pixels'\) cannot be drawn into a mosaic"),
    ("scene_dtype", r"scene field 'geom_param' must have dtype Float, got Double"),
    ("scene_count", r"argument 'scene' must hold the 11 fields of flycuda.ops.scene_layout.Scene.FIELDS, got 10 tensors"),
    ("workspace_missing", r"argument 'top_boxes' \(the workspace \[S, 5, 12\]\) is required"),
    ("workspace_unaligned", r"argument 'top_boxes' must start on a 16-byte boundary"),
])
def test_bad_input(prims, case, msg):
    from flycuda.render import TileRenderer

    sim, cam = prims
    tr = TileRenderer(sim, cam, 20, 15, rgb=True, seg=True)
    rgb, seg = tr.rgb.fill_(7), tr.seg.fill_(-5)
    kw = dict(fovy=45.0, height=15, width=20, rgb=rgb, seg=seg)
    a, scene = op_args(tr), tr.scene
    if case == "xpos_f64":
        a["geom_xpos"] = a["geom_xpos"].double()
    elif case == "xmat_shape":
        a["geom_xmat"] = a["geom_xmat"][:, :5]
    elif case == "worlds_range":
        a["worlds"] = torch.tensor([0, 2], dtype=torch.int32)
    elif case == "worlds_i64":
        a["worlds"] = a["worlds"].long()
    elif case == "rgb_shape":
        kw["rgb"] = torch.zeros(2, 15, 21, 3, dtype=torch.uint8)
    elif case == "seg_dtype":
        kw["seg"] = torch.zeros(2, 15, 20, dtype=torch.long)
    elif case == "zero_size":
        kw.update(height=0, rgb=None, seg=None)
    elif case == "samples":
        kw["samples"] = 0
    elif case == "meta_device":
        a["cam_pos"] = torch.empty(2, 3, device="meta")
    elif case == "fovy_count":
        kw["fovy"] = [45.0, 50.0]
    elif case == "fovy_range":
        kw["fovy"] = 180.0
    elif case == "nine_cameras":
        a["cam_pos"], a["cam_mat"] = a["cam_pos"].expand(2, 9, 3), a["cam_mat"].expand(2, 9, 9)
        kw.update(fovy=[45.0] * 9, rgb=None, seg=None)
    elif case == "pixels_range":
        kw.update(pixels=torch.tensor([0, 300], dtype=torch.int32), rgb=None, seg=None)
    elif case == "pixels_mosaic":
        kw.update(pixels=torch.tensor([0, 5], dtype=torch.int32), mosaic_cols=2, seg=None,
                  rgb=torch.zeros(15, 40, 3, dtype=torch.uint8))
    elif case == "scene_dtype":
        scene = replace(scene, geom_param=scene.geom_param.double())
    elif case == "scene_count":
        scene = _Short(scene)
    elif case == "workspace_missing":
        kw["top_boxes"] = torch.empty(0)
    elif case == "workspace_unaligned":
        kw["top_boxes"] = torch.empty(2 * 5 * 12 + 1)[1:].view(2, 5, 12)
    err = ValueError if case in ("zero_size", "samples", "fovy_count", "fovy_range", "nine_cameras",
                                 "pixels_mosaic", "scene_count") else RuntimeError
    with pytest.raises(err, match=r"flycuda\.render_tiles: " + msg):
        flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"),
                             a.pop("worlds"), scene, **kw)
    assert torch.all(rgb == 7) and torch.all(seg == -5)  # outputs untouched


def test_unknown_camera_and_bad_size(prims):
    from flycuda.render import RenderError, TileRenderer
    from flycuda.sim import BridgeError

    sim, _ = prims
    with pytest.raises(BridgeError, match=r"unknown camera 'nope'; the model has: overview"):
        TileRenderer(sim, "nope")
    with pytest.raises(RenderError, match=r"render size must be positive integers, got 0x10"):
        TileRenderer(sim, "overview", 0, 10)
    with pytest.raises(RenderError, match=r"worlds must be indices in \[0, 2\)"):
        TileRenderer(sim, "overview", worlds=[5])


def test_opcheck(prims):
    from flycuda.render import TileRenderer

    sim, cam = prims
    tr = TileRenderer(sim, cam, 8, 6, rgb=True, depth=True, seg=True)
    s = tr.scene
    args = (tr.geom_xpos.contiguous(), tr.geom_xmat.contiguous(), tr.cam_pos.contiguous(), tr.cam_mat.contiguous(),
            tr.worlds, s.tensors(), tr.fovy, s.zfar, 1, False, 6, 8, 0, torch.empty(0, dtype=torch.int32), True,
            tr.rgb.unsqueeze(1), tr.depth.unsqueeze(1), tr.seg.unsqueeze(1), tr.top_boxes,
            torch.zeros(2, 5, dtype=torch.int64))
    torch.library.opcheck(torch.ops.flycuda.render_tiles.default, args)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_stage_timers(prims, device):
    """One row per 128-pixel chunk (a CUDA block), every row written; on CPU the chunk
    total covers its trace and shade time (they run inside it, one after another)."""
    from flycuda.render import TileRenderer

    sim, cam = prims
    tr = TileRenderer(sim, cam, 30, 20, timers=True, mosaic=True)  # 2 worlds -> 2 cells, 1200 px
    if device != "cpu":
        tr = tile_renderer(sim, cam, 30, 20, device, timers=True)
    tr.timers.fill_(-1)  # poison
    tr.render()
    assert tr.timers.shape == (launch_plan.render_blocks(tr.rgb.numel() // (3 * 30 * 20), 20, 30), 5)
    assert (tr.timers >= 0).all() and (tr.timers[:, 2] > 0).all()
    if device == "cpu":
        assert (tr.timers[:, 2] >= tr.timers[:, 0] + tr.timers[:, 1]).all()
    st = tr.stage_times()
    assert st["trace"] > 0 and st["unit"] == ("ns" if device == "cpu" else "cycles")
    assert 1 <= st["per_ray"]["nodes"] < 200 and 0 < st["per_ray"]["triangles"] < 50  # the scene has one mesh


@pytest.mark.needs_cuda
def test_cuda_graph_replay_renders_current_poses(prims):
    """Captured once, the render follows pose changes made between replays."""
    sim, cam = prims
    tr = tile_renderer(sim, cam, 40, 30, "cuda")
    xpos = tr.geom_xpos.clone()
    tr.geom_xpos = xpos
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tr.render()
    g.replay()
    torch.cuda.synchronize()
    first = tr.seg.clone()
    xpos[:, 1:] += 0.05
    g.replay()
    torch.cuda.synchronize()
    assert not torch.equal(first, tr.seg)


def test_unchecked_bad_world_renders_blank_not_out_of_bounds(prims):
    """With check=False (the caller vouches for the indices, as TileRenderer does after
    its first render) a world id outside [0, W) must not be read out of bounds: its tile
    is blank (black, depth 0, seg -1) and its top-level boxes empty; the others render."""
    from flycuda.render import TileRenderer

    sim, cam = prims
    tr = TileRenderer(sim, cam, 12, 9, rgb=True, depth=True, seg=True)
    a = op_args(tr)
    worlds = torch.tensor([1, 12345], dtype=torch.int32)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    depth, seg = torch.full((2, 9, 12), -3.0), torch.full((2, 9, 12), -5, dtype=torch.int32)
    wb = torch.full((2, tr.scene.top_links.shape[0], 12), 9.0)
    flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"), worlds,
                         tr.scene, fovy=tr.fovy, height=9, width=12, rgb=rgb, depth=depth, seg=seg,
                         top_boxes=wb, check=False)
    assert torch.all(rgb[1] == 0) and torch.all(depth[1] == 0) and torch.all(seg[1] == -1)
    assert torch.all(wb[1] >= 3e38) and torch.all(wb[0] < 1e3)  # empty boxes; world 1's real ones
    tr.render()
    assert torch.equal(rgb[0], tr.rgb[1]) and torch.equal(seg[0], tr.seg[1])


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_a_skipped_image_keeps_its_outputs(prims, device):
    """worlds[s] = -1 skips image s (its outputs and top-level boxes are left as they were:
    a partial re-render); the host check accepts -1 and still refuses other ids outside [0, W)."""
    from flycuda.render import TileRenderer

    sim, cam = prims
    if device != "cpu":
        pytest.skip("the prims fixture's worlds are on the CPU")
    tr = TileRenderer(sim, cam, 12, 9, rgb=True, depth=True, seg=True)
    tr.render()
    a = op_args(tr)
    worlds = torch.tensor([-1, 1, -1, 0], dtype=torch.int32)
    rgb = torch.randint(0, 256, (4, 9, 12, 3), dtype=torch.uint8)
    depth, seg = torch.full((4, 9, 12), -3.0), torch.full((4, 9, 12), -5, dtype=torch.int32)
    wb = torch.full((4, tr.scene.top_links.shape[0], 12), 9.0)
    given = [t.clone() for t in (rgb, depth, seg, wb)]
    args = (a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"))
    flycuda.render_tiles(*args, worlds, tr.scene, fovy=tr.fovy, height=9, width=12, rgb=rgb, depth=depth, seg=seg,
                         top_boxes=wb)
    for out, before in zip((rgb, depth, seg, wb), given):
        assert torch.equal(out[[0, 2]], before[[0, 2]])
    for s, w in ((1, 1), (3, 0)):
        assert torch.equal(rgb[s], tr.rgb[w]) and torch.equal(depth[s], tr.depth[w]) and torch.equal(seg[s], tr.seg[w])
    with pytest.raises(Exception, match=r"worlds.*\[0, 2\).* or -1, got worlds\[1\] = -2"):
        flycuda.render_tiles(*args, torch.tensor([0, -2], dtype=torch.int32), tr.scene, fovy=tr.fovy, height=9,
                             width=12, rgb=rgb[:2])
    assert torch.equal(rgb[:2], torch.stack([given[0][0], tr.rgb[1]]))  # refused: nothing written
    # a pixel list (as the eyes render): blocks of skipped images only are skipped whole
    pix = torch.tensor([0, 13, 50, 107, 3, 99, 64], dtype=torch.int32)
    out = torch.randint(0, 256, (4, 7, 3), dtype=torch.uint8)
    before = out.clone()
    flycuda.render_tiles(*args, worlds, tr.scene, fovy=tr.fovy, height=9, width=12, rgb=out, pixels=pix)
    assert torch.equal(out[[0, 2]], before[[0, 2]])
    flat = tr.rgb.reshape(2, -1, 3)[:, pix.long()]
    assert torch.equal(out[1], flat[1]) and torch.equal(out[3], flat[0])


def test_tile_renderer_validates_after_a_render_outside_capture(prims, monkeypatch):
    """A first render captured into a CUDA graph skips the index check (no host copies
    in capture), so it must not mark the scene as validated."""
    from flycuda.render import TileRenderer
    from flycuda.sim import streams

    sim, cam = prims
    tr = TileRenderer(sim, cam, 8, 6)
    monkeypatch.setattr(streams, "capturing", lambda device: True)
    tr.render()
    assert tr._validated is False
    monkeypatch.undo()
    tr.render()
    assert tr._validated is True


def test_render_wrapper_never_copies_matrices(prims):
    """[..., 3, 3] orientations are viewed as [..., 9]; one that cannot be viewed is an
    error naming the argument, not a silent copy."""
    from flycuda.render import TileRenderer

    sim, cam = prims
    tr = TileRenderer(sim, cam, 8, 6)
    xmat = sim.view("geom_xmat").transpose(-1, -2)  # 3x3 blocks not contiguous
    with pytest.raises(ValueError, match=r"flycuda\.render_tiles: argument 'geom_xmat' of shape .* cannot be "
                                         r"viewed as \[\.\.\., 9\]"):
        flycuda.render_tiles(tr.geom_xpos, xmat, tr.cam_pos, tr.cam_mat, tr.worlds, tr.scene, fovy=tr.fovy,
                             height=6, width=8, rgb=tr.rgb)


def test_mesh_heavy_scene_is_closed_meshes_with_the_hexapods_physics():
    import mujoco
    import numpy as np

    from flycuda.sim.hexapod import capsule_mesh, fly_mesh_model, fly_model

    v, f = capsule_mesh(0.01, 0.02, around=12, cap=3, length=6)
    assert len(f) == 2 * 12 * (2 * 3 + 6 - 1)
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert np.all(counts == 2), "every edge is shared by two triangles: the mesh is closed"
    assert np.allclose(np.abs(v[:, 2]).max(), 0.03)
    m, base = fly_mesh_model(), fly_model()
    assert 70_000 < int(m.mesh_facenum.sum()) < 120_000 and m.nmesh == 26
    drawn = [g for g in range(m.ngeom) if m.geom_group[g] in (0, 1, 2)]
    assert sum(m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH for g in drawn) == 26
    assert all(m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0 for g in range(m.ngeom)
               if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH)
    np.testing.assert_allclose(m.body_mass, base.body_mass)  # visual meshes add no mass


def _two_cameras(sim):
    """Two fixed cameras: the overview camera and a wider one from the side."""
    cid = sim.camera_id("overview")
    pos, mat = sim.view("cam_xpos")[0, cid], sim.view("cam_xmat")[0, cid]
    side = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # axes x=+y, y=+z, looks along -x
    return [(pos, mat, 45.0), (torch.tensor([1.2, 0.013, 0.3]), side, 70.0)]  # off the checker edge y = 0


def test_several_cameras_per_world(prims):
    """[S, C, H, Wd] outputs: each camera's images equal that camera rendered alone (bit
    for bit) and the float64 reference; the mosaic puts a world's cameras side by side."""
    from flycuda.render import TileRenderer, mosaic

    sim, _ = prims
    cams = _two_cameras(sim)
    both = TileRenderer(sim, cams, 20, 15, depth=True, seg=True)
    for t in (both.rgb, both.depth, both.seg):
        t.fill_(77)  # poison
    both.render()
    assert both.rgb.shape == (2, 2, 15, 20, 3) and both.seg.shape == (2, 2, 15, 20)
    for c, cam in enumerate(cams):
        one = TileRenderer(sim, cam, 20, 15, depth=True, seg=True)
        one.render()
        assert torch.equal(both.rgb[:, c], one.rgb) and torch.equal(both.seg[:, c], one.seg)
        assert torch.equal(both.depth[:, c], one.depth)
    ref = ref_render(both.geom_xpos, both.geom_xmat, both.cam_pos, both.cam_mat, [0, 1], both.scene,
                     fovy=both.fovy, height=15, width=20)
    assert_images_close(both.rgb, both.depth, both.seg, *ref)
    assert len(torch.unique(both.seg[:, 1])) >= 3 and not torch.equal(both.seg[:, 0], both.seg[:, 1])
    mos = TileRenderer(sim, cams, 20, 15, mosaic=True)
    mos.render()
    assert torch.equal(mos.rgb, mosaic(both.rgb.reshape(4, 15, 20, 3), cols=mos.cols))
    assert mos.rgb.shape == (15, 4 * 20, 3)  # 2 worlds x 2 cameras in one row


def test_named_cameras_not_evenly_spaced_follow_the_sim():
    """Named cameras whose ids are not evenly spaced are gathered before each render."""
    from flycuda.render import TileRenderer
    from flycuda.sim import Sim

    cams = "".join(f'<camera name="c{i}" pos="{0.1 * i} -1 1" xyaxes="1 0 0 0 0.7 0.7"/>' for i in range(4))
    xml = f"""<mujoco><worldbody><geom type="plane" size="1 1 0.1"/>{cams}
      <body><freejoint/><geom type="sphere" size="0.2" pos="0 0 0.3"/></body></worldbody></mujoco>"""
    sim = Sim.build(xml, 2, device="cpu")
    sim.forward()
    tr = TileRenderer(sim, ["c0", "c1", "c3"], 16, 12, seg=True)
    assert tr._gather is not None
    tr.render()
    for c, name in enumerate(["c0", "c1", "c3"]):
        one = TileRenderer(sim, name, 16, 12, seg=True)
        one.render()
        assert torch.equal(tr.seg[:, c], one.seg)
    sim.view("qpos")[:, 0] += 0.3
    sim.forward()
    before = tr.seg.clone()
    tr.render()
    assert not torch.equal(before, tr.seg)


def test_pixel_list_equals_those_pixels_of_the_full_image(prims):
    """A pixel list casts exactly the listed pixels: [S, C, P] outputs equal to the full
    images at those pixels, bit for bit, for repeated and unsorted ids too."""
    from flycuda.render import RenderError, TileRenderer

    sim, _ = prims
    cams = _two_cameras(sim)
    full = TileRenderer(sim, cams, 20, 15, depth=True, seg=True)
    full.render()
    g = torch.Generator().manual_seed(0)
    ids = torch.cat([torch.randint(0, 300, (137,), generator=g), torch.tensor([5, 5, 299])]).int()
    rgb = torch.full((2, 2, 140, 3), 9, dtype=torch.uint8)
    depth, seg = torch.full((2, 2, 140), -1.0), torch.full((2, 2, 140), -7, dtype=torch.int32)
    flycuda.render_tiles(full.geom_xpos, full.geom_xmat, full.cam_pos, full.cam_mat, full.worlds, full.scene,
                         fovy=full.fovy, height=15, width=20, pixels=ids, rgb=rgb, depth=depth, seg=seg)
    flat = ids.long()
    assert torch.equal(rgb, full.rgb.reshape(2, 2, 300, 3)[:, :, flat])
    assert torch.equal(seg, full.seg.reshape(2, 2, 300)[:, :, flat])
    assert torch.equal(depth, full.depth.reshape(2, 2, 300)[:, :, flat])
    listed = TileRenderer(sim, cams, 20, 15, seg=True, pixels=ids)  # the renderer's own pixel-list mode
    listed.render()
    assert torch.equal(listed.rgb, rgb) and torch.equal(listed.seg, seg)
    with pytest.raises(RenderError, match="a pixel list cannot be drawn into a mosaic"):
        TileRenderer(sim, cams, 20, 15, mosaic=True, pixels=ids)


def test_heightfield_renders_as_mujoco_warp_draws_it():
    """MuJoCo Warp's own heightfield test model: the terrain is drawn (not skipped),
    matching mjw.render's segmentation (IoU) and depth, and the float64 reference."""
    import mujoco_warp as mjw
    import warp as wp
    from helpers.worlds import MJW_HFIELD_XML

    from flycuda.render import TileRenderer
    from flycuda.sim import Sim

    xml = MJW_HFIELD_XML.replace("<worldbody>", '<worldbody><camera name="c" pos="0 -3 2.5" xyaxes="1 0 0 0 0.6 0.8"/>', 1)
    sim = Sim.build(xml, 1, device="cpu")
    sim.forward()
    W, H = 48, 36
    tr = TileRenderer(sim, "c", W, H, depth=True, seg=True)
    tr.render()
    hf = [g for g in range(sim.mjm.ngeom) if sim.mjm.geom_type[g] == 1]
    assert hf and (tr.seg == hf[0]).sum() > 50
    with wp.ScopedDevice("cpu"):
        rc = mjw.create_render_context(sim.mjm, nworld=1, cam_res=(W, H), render_rgb=True, render_depth=True,
                                       render_seg=True, cam_active=[sim.camera_id("c")])
        mjw.refit_bvh(sim.model, sim.data, rc)
        mjw.render(sim.model, sim.data, rc)
        seg = wp.zeros((1, H, W), dtype=wp.vec2i)
        mjw.get_segmentation(rc, 0, seg)
    a, b = tr.seg[0], wp.to_torch(seg)[0, ..., 0]
    fg = (a >= 0) | (b >= 0)
    assert ((a == b) & fg).sum() / fg.sum() >= 0.98
    ref = ref_render(tr.geom_xpos, tr.geom_xmat, tr.cam_pos[:, 0], tr.cam_mat[:, 0], [0], tr.scene,
                     fovy=tr.fovy[0], height=H, width=W)
    assert_images_close(tr.rgb, tr.depth, tr.seg, *ref)


def test_rays_that_hit_nothing_show_the_skybox():
    """A model with a gradient skybox: rays that hit nothing take its colour (bluer
    looking up than down), equal to the float64 reference; without a skybox, black."""
    from flycuda.render import TileRenderer
    from flycuda.sim import Sim

    xml = """<mujoco><asset><texture type="skybox" builtin="gradient" rgb1="0.2 0.4 0.9" rgb2="0.9 0.5 0.1"
      width="16" height="96"/></asset><worldbody><geom type="plane" size="1 1 0.1"/>
      <geom type="sphere" size="0.1" pos="0 0 0.1"/>
      <camera name="c" pos="0 -1 0.15" xyaxes="1 0 0 0 0 1" fovy="100"/></worldbody></mujoco>"""
    sim = Sim.build(xml, 1, device="cpu")
    sim.forward()
    tr = TileRenderer(sim, "c", 24, 18, depth=True, seg=True)
    tr.render()
    sky = tr.seg[0] < 0
    assert sky[0].all() and tr.scene.background.abs().sum() > 0
    top = tr.rgb[0, 0].float().mean(0)
    assert top[2] > top[0]  # looking up: blue over red
    ref = ref_render(tr.geom_xpos, tr.geom_xmat, tr.cam_pos[:, 0], tr.cam_mat[:, 0], [0], tr.scene,
                     fovy=tr.fovy[0], height=18, width=24)
    assert_images_close(tr.rgb, tr.depth, tr.seg, *ref)
    plain = TileRenderer(sim, "c", 24, 18, seg=True)
    plain.scene.background.zero_()
    plain.render()
    assert torch.all(plain.rgb[0][sky] == 0)
