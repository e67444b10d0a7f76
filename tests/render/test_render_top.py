"""render_tiles' BVHs: the per-world top level flycuda.render.scene builds and the op refits
from the live poses (CPU twin vs the grid emulator's float64 mirror, and a
containment check independent of both); images identical whatever the top level's
topology (exact culling and tie order); no silent holes (every BVH's depth checked
against the traversal stack, at pack time and in the op); bad and corrupted BVHs;
CPU == CUDA when a GPU is present."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers.devices import cpu_and_cuda
from helpers.images import assert_images_close, op_args, tile_renderer
from helpers.worlds import prims_sim

import flycuda
from flycuda.ops import scene_layout as layout
from flycuda.render import scene as scene_mod

pytestmark = pytest.mark.needs_warp


def _shuffled_top(sc, seed: int):
    """The same bounded geoms under another top-level topology: built over random
    centers, so that it groups geoms that are nowhere near each other."""
    rb = sc.geom_param[:, layout.PARAM_RBOUND].numpy()
    bounded = np.flatnonzero(rb > 0)
    rng = np.random.default_rng(seed)
    links, _ = scene_mod.build_top(rng.normal(size=(len(bounded), 3)), np.full(len(bounded), 0.1), items=bounded)
    return replace(sc, top_links=torch.from_numpy(links))


def _same_under_any_topology(sim, cam, W, H, device="cpu", **kw):
    """Renders with the scene's top level and with two shuffled ones; asserts equal
    images (bit for bit) and returns the first renderer."""
    fast = tile_renderer(sim, cam, W, H, device, **kw)
    for seed in (1, 2):
        other = tile_renderer(sim, cam, W, H, device, **kw)
        other.scene = _shuffled_top(other.scene.to("cpu"), seed).to(device)
        other.top_boxes = torch.empty_like(other.top_boxes)
        other._validated = False
        other.rgb.fill_(1), other.seg.fill_(-9)
        other.render()
        assert torch.equal(fast.seg, other.seg) and torch.equal(fast.depth, other.depth)
        assert torch.equal(fast.rgb, other.rgb)
    return fast


def _leaf_geoms(links):
    out = []
    for x in links.flatten().tolist():
        if x < 0:
            first, count = layout.leaf_range(x)
            out += list(range(first, first + count))
    return out


@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
def test_topology_covers_each_bounded_geom_once(scenes, scene):
    from flycuda.render import TileRenderer

    sim, cam = scenes[scene]
    sc = TileRenderer(sim, cam, 8, 6).scene
    top, rb = sc.top_links.numpy(), sc.geom_param[:, layout.PARAM_RBOUND].numpy()
    assert sorted(_leaf_geoms(top)) == np.flatnonzero(rb > 0).tolist()
    assert all(layout.leaf_range(x)[1] == 1 for x in top.flatten() if x < 0)
    assert sc.unbounded.tolist() == np.flatnonzero(rb <= 0).tolist()
    assert set(sc.geom_info[sc.unbounded.long(), 0].tolist()) == {0}  # the floor planes
    inner = top[top >= 0]
    rows = np.repeat(np.arange(len(top)), 2).reshape(-1, 2)[top >= 0]
    assert (inner > rows).all() and sorted(inner.tolist()) == list(range(1, len(top)))  # one tree
    assert len(top) == len(_leaf_geoms(top)) - 1 or len(top) == 1


def _corners(lo, hi):
    return torch.stack([torch.stack([x, y, z]) for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                        for z in (lo[2], hi[2])])


def _local_points(sc, mjm, k):
    """Points whose hull holds render-list geom k (local frame): a mesh's vertices, a
    primitive's local box corners."""
    gtype, size = int(sc.geom_info[k, 0]), sc.geom_param[k, :3].double()
    if gtype == 7:
        mid = int(mjm.geom_dataid[int(sc.geom_ids[k])])
        va, nv = int(mjm.mesh_vertadr[mid]), int(mjm.mesh_vertnum[mid])
        return torch.from_numpy(mjm.mesh_vert[va:va + nv]).double()
    r, h = size[0], size[1]
    half = {2: (r, r, r), 3: (r, r, h + r), 5: (r, r, h), 4: tuple(size), 6: tuple(size)}[gtype]
    half = torch.tensor(half, dtype=torch.float64)
    return _corners(-half, half)


@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
def test_refit_boxes_hold_the_posed_geoms(scenes, scene):
    """Each leaf child's box holds its geom as posed in that world; each internal
    child's box holds that child's two boxes; the CPU twin equals the grid emulator's
    float32 mirror bit for bit."""
    sim, cam = scenes[scene]
    tr = tile_renderer(sim, cam, 8, 6, worlds=list(range(sim.nworld))[::-1])  # tile s shows world W-1-s
    sc, top = tr.scene, tr.scene.top_links.tolist()
    xpos, xmat = sim.view("geom_xpos").double(), sim.view("geom_xmat").double().reshape(sim.nworld, -1, 3, 3)
    for s, w in enumerate(tr.worlds.tolist()):
        box = tr.top_boxes[s].double().view(-1, 2, 6)
        for j, links in enumerate(top):
            for i, link in enumerate(links):
                lo, hi = box[j, i, :3], box[j, i, 3:]
                if link < 0:
                    k = layout.leaf_range(link)[0]
                    g = int(sc.geom_ids[k])
                    pts = xpos[w, g] + _local_points(sc, sim.mjm, k) @ xmat[w, g].T
                    assert (pts >= lo).all() and (pts <= hi).all(), (s, j, k)
                else:
                    assert (box[link, :, :3] >= lo).all() and (box[link, :, 3:] <= hi).all(), (s, j)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
def test_any_top_level_renders_the_same_images(scenes, scene, device):
    """Exact culling and tie order: whatever the top level's topology (the packed one,
    or ones that group far-apart geoms), the images are bit-identical, shadows included."""
    sim, cam = scenes[scene]
    fast = _same_under_any_topology(sim, cam, 36, 27, device, samples=2, shadows=True)
    assert len(torch.unique(fast.seg)) >= 4


def test_refit_follows_poses_far_from_the_rest_pose():
    """The topology comes from the rest pose, the boxes from the live one: bodies moved
    far apart (and the whole scene far from the origin) render as under any topology,
    and as the float64 reference."""
    from flycuda.reference.render import render_tiles as ref_render

    sim = prims_sim(2)
    q = sim.view("qpos")
    g = torch.Generator().manual_seed(5)
    q[:, [7 * b + i for b in range(6) for i in range(3)]] += torch.randn(2, 18, generator=g) * 0.2 + 40.0
    sim.forward()
    c = sim.view("geom_xpos")[0, 1:].mean(0)  # the overview camera's view, moved along and backed off
    cid = sim.camera_id("overview")
    cam = (c + 2.0 * torch.tensor([0.0, -0.55, 0.45]), sim.view("cam_xmat")[0, cid], 60.0)
    fast = _same_under_any_topology(sim, cam, 40, 30)
    assert len(torch.unique(fast.seg)) >= 4
    ref = ref_render(fast.geom_xpos, fast.geom_xmat, fast.cam_pos[:, 0], fast.cam_mat[:, 0], [0, 1], fast.scene,
                     fovy=60.0, height=30, width=40)
    assert_images_close(fast.rgb, fast.depth, fast.seg, *ref)


def test_exact_ties_resolve_in_render_list_order():
    """Coincident geoms (a box twice, a mesh twice) hit at bit-identical distances: the
    earlier geom of the render list wins on every path, whatever order the top level
    visits them in."""
    from flycuda.sim import Sim
    from flycuda.sim.hexapod import _sphere_mesh

    vert, face = _sphere_mesh()
    pair = '<geom type="box" size="0.04 0.03 0.05"/>' * 2 + '<geom type="mesh" mesh="m" pos="0 0 0.12"/>' * 2
    geoms = "".join(f'<body pos="{x} 0 0.1">{pair}</body>' for x in (-0.2, 0.0, 0.2))
    xml = f"""<mujoco><asset><mesh name="m" vertex="{vert}" face="{face}"/></asset><worldbody>
      <geom type="plane" size="1 1 0.1"/><camera name="c" pos="0 -0.6 0.5" xyaxes="1 0 0 0 0.64 0.77"/>{geoms}
      </worldbody></mujoco>"""
    sim = Sim.build(xml, 1, device="cpu")
    sim.forward()
    fast = _same_under_any_topology(sim, "c", 48, 36)
    seen = set(torch.unique(fast.seg).tolist())
    assert seen - {-1} == {0} | {1 + 4 * b + i for b in range(3) for i in (0, 2)}  # first of each pair only


def test_far_telephoto_camera_renders_the_same_under_any_topology(scenes):
    """Seen from ~110 capsule radii through a 10-degree lens, where the geoms' own tests
    round most coarsely on silhouettes, the padded boxes still cull nothing they hit."""
    sim, _ = scenes["prims"]
    cid = sim.camera_id("overview")
    cam = (sim.view("cam_xpos")[0, cid] * 4.0, sim.view("cam_xmat")[0, cid], 10.0)
    fast = _same_under_any_topology(sim, cam, 64, 48)
    assert len(torch.unique(fast.seg)) >= 5


def test_scene_without_bounded_geoms():
    """Only a plane: an empty top level ([S, 0, 12] workspace), the plane still renders."""
    from flycuda.render import TileRenderer
    from flycuda.sim import Sim

    xml = """<mujoco><statistic extent="2"/><worldbody><geom type="plane" size="1 1 0.1" rgba="0.5 0.6 0.7 1"/>
      <camera name="c" pos="0 -1 1" xyaxes="1 0 0 0 0.7 0.7"/></worldbody></mujoco>"""
    sim = Sim.build(xml, 2, device="cpu")
    sim.forward()
    tr = TileRenderer(sim, "c", 12, 9, seg=True)
    assert tuple(tr.top_boxes.shape) == (2, 0, 12) and tr.scene.unbounded.tolist() == [0]
    tr.render()
    assert (tr.seg == 0).float().mean() > 0.3


def _bad_top(sc, case):
    top, unb = sc.top_links.clone(), sc.unbounded.clone()
    inner = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] >= 0]
    leaves = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] < 0]
    if case == "back_link":
        top[inner[0]] = inner[0][0]
    elif case == "leaf_count":
        top[leaves[0]] = layout.make_leaf(layout.leaf_range(int(top[leaves[0]]))[0], 2)
    elif case == "leaf_range":
        top[leaves[0]] = layout.make_leaf(99, 1)
    elif case == "missing_geom":  # duplicate another leaf's geom
        top[leaves[0]] = top[leaves[1]]
    elif case == "orphan":  # the root's second child replaced by the last node (already linked)
        top[0, 1] = len(top) - 1
    elif case == "plane_in_unbounded_twice":
        unb = torch.cat([unb, unb])
    elif case == "unbounded_range":
        unb = torch.tensor([-3], dtype=torch.int32)
    return top, unb


@pytest.mark.parametrize("case,msg", [
    ("back_link", r"argument 'top_links': node (\d+) of the top level links to node \1, expected a later node"),
    ("leaf_count", r"argument 'top_links': node \d+ of the top level has a leaf of items \[\d+, \d+\), expected "
                   r"one item within \[0, 7\)"),
    ("leaf_range", r"argument 'top_links': node \d+ of the top level has a leaf of items \[99, 100\)"),
    ("orphan", r"argument 'top_links': node \d+ (of the top level is reached twice|is not reached from the root)"),
    ("missing_geom", r"render-list geom \d+ \(bounded: rbound > 0\) must appear once, in a 'top_links' leaf, "
                     r"got [02] leaves"),
    ("plane_in_unbounded_twice", r"render-list geom 0 \(unbounded: rbound <= 0\) must appear once, in "
                                 r"'unbounded', got 0 leaves and 2 'unbounded' entries"),
    ("unbounded_range", r"argument 'unbounded' entry 0 = -3 is outside \[0, 7\)"),
    ("workspace_shape", r"argument 'top_boxes' must have shape \[2, 5, 12\], got \[2, 4\]"),
])
def test_bad_top_level(scenes, case, msg):
    """Checked before anything is written: the outputs and the workspace stay untouched."""
    sim, cam = scenes["prims"]
    tr = tile_renderer(sim, cam, 12, 9)
    sc = tr.scene
    wb = torch.full((2, 4), 5.0) if case == "workspace_shape" else torch.full_like(tr.top_boxes[:2], 5.0)
    if case != "workspace_shape":
        top, unb = _bad_top(sc, case)
        sc = replace(sc, top_links=top, unbounded=unb)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    a = op_args(tr)
    with pytest.raises(RuntimeError, match=r"flycuda\.render_tiles: " + msg):
        flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"),
                             torch.tensor([0, 1], dtype=torch.int32), sc, fovy=tr.fovy, height=9, width=12,
                             rgb=rgb, top_boxes=wb)
    assert torch.all(rgb == 7) and torch.all(wb == 5.0)


def test_pixels_walk_the_top_level(scenes):
    """The pixel kernel reads the top level, not every geom: a geom whose leaf is
    pointed elsewhere (unchecked) vanishes from the image, the others stay."""
    sim, cam = scenes["prims"]
    tr = tile_renderer(sim, cam, 40, 30)
    top = tr.scene.top_links.clone()
    leaves = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] < 0]
    gone = layout.leaf_range(int(top[leaves[0]]))[0]
    top[leaves[0]] = top[leaves[1]]
    tr.scene = replace(tr.scene, top_links=top)
    before = set(torch.unique(tr.seg).tolist())
    tr._validated = True  # check=False: the renderer vouches for its scene
    tr.render()
    gid = int(tr.scene.geom_ids[gone])
    assert gid in before and set(torch.unique(tr.seg).tolist()) == before - {gid}


@pytest.mark.parametrize("case", ["back_link", "leaf_count", "leaf_range", "unbounded_range", "orphan"])
def test_corrupted_top_level_unchecked_stays_in_bounds(scenes, case):
    """With check=False a corrupted top level (that the host check would refuse) reads
    nothing out of bounds: links breaking the order read as empty boxes, out-of-range
    leaves and unbounded entries are skipped (see also test_emu, under ASan)."""
    sim, cam = scenes["prims"]
    tr = tile_renderer(sim, cam, 12, 9)
    top, unb = _bad_top(tr.scene, case)
    sc = replace(tr.scene, top_links=top, unbounded=unb)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    wb = torch.full_like(tr.top_boxes[:2], 5.0)
    a = op_args(tr)
    flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"),
                         torch.tensor([0, 1], dtype=torch.int32), sc, fovy=tr.fovy, height=9, width=12,
                         rgb=rgb, top_boxes=wb, check=False)
    assert not torch.all(rgb == 7) and torch.isfinite(wb).all()


def _chain_mesh(sc, depth: int):
    """sc with its first mesh's BVH replaced by a chain `depth` internal nodes deep
    (each node: a one-triangle leaf and the next node), appended after the others."""
    k = int(torch.nonzero(sc.geom_info[:, 0] == layout.MESH)[0])
    n0, tri0 = sc.bvh_boxes.shape[0], 0
    boxes = sc.bvh_boxes[sc.geom_info[k, 1]].repeat(depth, 1)  # any boxes: the check reads the links
    links = torch.tensor([[layout.make_leaf(tri0, 1), n0 + j + 1] for j in range(depth)], dtype=torch.int32)
    links[-1, 1] = layout.make_leaf(tri0 + 1, 1)
    info = sc.geom_info.clone()
    info[k, 1] = n0
    return replace(sc, bvh_boxes=torch.cat([sc.bvh_boxes, boxes]), bvh_links=torch.cat([sc.bvh_links, links]),
                   geom_info=info), k


def test_deep_mesh_bvh_is_refused_naming_the_mesh(scenes):
    """No silent holes: a mesh BVH deeper than the stack allows is an error naming the
    render-list geom, its geom id and its depth, before anything is written; one level
    less is accepted."""
    sim, cam = scenes["fly_mesh"]
    tr = tile_renderer(sim, cam, 12, 9)
    top_depth = tr.scene.depths["top"]
    ok_depth = scene_mod.STACK - 1 - top_depth
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    sc, k = _chain_mesh(tr.scene, ok_depth + 1)
    a = op_args(tr)
    msg = (rf"flycuda\.render_tiles: the mesh of render-list geom {k} \(geom id {int(sc.geom_ids[k])}\) has a BVH "
           rf"of depth {ok_depth + 1} and the top level one of depth {top_depth}: a ray would need "
           rf"{scene_mod.STACK + 1} stack entries, more than the traversal's {scene_mod.STACK}")
    with pytest.raises(RuntimeError, match=msg):
        flycuda.render_tiles(*a.values(), sc, fovy=tr.fovy, height=9, width=12, rgb=rgb, top_boxes=tr.top_boxes)
    assert torch.all(rgb == 7)
    sc, _ = _chain_mesh(tr.scene, ok_depth)
    flycuda.render_tiles(*a.values(), sc, fovy=tr.fovy, height=9, width=12, rgb=rgb, top_boxes=tr.top_boxes)


def test_pack_time_depth_check_names_the_mesh(scenes, monkeypatch):
    """pack_scene checks every mesh's depth too (SceneError naming the mesh and depth)."""
    sim, _ = scenes["fly_mesh"]
    sc = scene_mod.pack_scene(sim.mjm)
    assert sc.depths["top"] + 1 + max(sc.depths["meshes"].values()) <= scene_mod.STACK
    monkeypatch.setattr(scene_mod, "STACK", sc.depths["top"] + 2)
    with pytest.raises(scene_mod.SceneError, match=r"the BVH of mesh '.+' \(root \d+\) has depth \d+; with the "
                                                   r"top level's \d+ a ray needs \d+ stack entries"):
        scene_mod.pack_scene(sim.mjm)


def test_corrupted_mesh_bvh_unchecked_stays_in_bounds(scenes):
    """A mesh BVH with back links, out-of-range nodes and leaves past the triangles,
    unchecked, renders without reading out of bounds (ASan run: test_emu)."""
    sim, cam = scenes["fly_mesh"]
    tr = tile_renderer(sim, cam, 12, 9)
    links = tr.scene.bvh_links.clone()
    links[0, 0] = 0                                                          # a link back
    links[1, 1] = 10 ** 6                                                    # past the nodes
    links[2, 0] = layout.make_leaf(tr.scene.tris.shape[0] - 1, 7)         # past the triangles
    sc = replace(tr.scene, bvh_links=links)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    flycuda.render_tiles(*op_args(tr).values(), sc, fovy=tr.fovy, height=9, width=12, rgb=rgb,
                         top_boxes=tr.top_boxes, check=False)
    assert not torch.all(rgb == 7)


def _inside_root(sim, cam, rot, W, H, **kw):
    """A renderer whose fixed camera (orientation rot, camera to world) sits inside
    world 0's top-level root box: at its center, or just below its top when looking up."""
    from flycuda.render import TileRenderer

    tr = tile_renderer(sim, cam, 8, 6)
    root = tr.top_boxes[0, 0].view(2, 6)
    lo, hi = torch.minimum(root[0, :3], root[1, :3]), torch.maximum(root[0, 3:], root[1, 3:])
    pos = (lo + hi) / 2
    if rot[2, 2] < 0:  # camera -z = world +z
        pos[2] = hi[2] - 1e-3 * (hi[2] - lo[2])
    return TileRenderer(sim, (pos, rot, 60.0), W, H, depth=True, seg=True, timers=True, **kw)


UP = torch.tensor([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])  # looking up
SIDEWAYS = torch.tensor([[0.0, 0, -1], [-1, 0, 0], [0, 1, 0]])  # looking along +x, z up


def test_blocks_out_of_view_skip_the_top_level(scenes):
    """Per-block frustum culling (csrc/kernels/render/cull.h): a camera inside the top
    level's root box that sees only sky walks the root alone, both its children culled
    (one node per ray; without culling its rays enter the boxes around them)."""
    sim, cam = scenes["prims"]
    tr = _inside_root(sim, cam, UP, 32, 16)
    tr.render()
    assert (tr.seg == -1).all()  # only sky in view
    assert tr.stage_times()["per_ray"]["nodes"] == 1.0


def test_culling_is_conservative_for_any_pixel_order(scenes):
    """From inside the fly's boxes (as the eyes see), a pixel list in Z-order (each
    block a compact patch, as the eyes' lists) and the same pixels shuffled (each
    block's pyramid then spans the image, so it culls little) give the same pixels
    bit for bit, and the compact order walks fewer nodes."""
    from flycuda.vision.retina import z_order

    sim, cam = scenes["fly_mesh"]
    W, H = 48, 32
    ids = torch.as_tensor(z_order(torch.arange(W * H).numpy(), W), dtype=torch.int32)
    perm = torch.randperm(W * H, generator=torch.Generator().manual_seed(3))
    runs = []
    for pixels in (ids, ids[perm]):
        tr = _inside_root(sim, cam, SIDEWAYS, W, H, pixels=pixels)
        tr.rgb.fill_(123), tr.depth.fill_(-7.0), tr.seg.fill_(-99)  # poison
        tr.render()
        runs.append((tr.rgb, tr.depth, tr.seg, tr.stage_times()["per_ray"]["nodes"]))
    (rgb, depth, seg, compact), (rgb2, depth2, seg2, shuffled) = runs
    inv = torch.argsort(perm)
    assert torch.equal(rgb, rgb2[..., inv, :]) and torch.equal(depth, depth2[..., inv])
    assert torch.equal(seg, seg2[..., inv]) and len(torch.unique(seg)) >= 3 and (seg == -1).any()
    assert compact < shuffled
