"""render_tiles' per-world top-level BVH: the topology flycuda.scene builds, the boxes
the op refits from the live poses (CPU twin vs the grid emulator's float64 mirror,
and a containment check independent of both), images identical to testing every
geom, bad and corrupted top levels, and CPU == CUDA when a GPU is present."""

import numpy as np
import pytest
import torch

import flycuda
from flycuda.reference import grid_render

from common import cpu_and_cuda
from test_render_tiles import _fly_sim, _op_args, _prims_sim, _render

pytestmark = pytest.mark.needs_warp


@pytest.fixture(scope="module")
def scenes():
    from flycuda.model import fly_mesh_model

    return {"prims": (_prims_sim(3), "overview"), "fly": (_fly_sim(2, steps=20), "track"),
            "fly_mesh": (_fly_sim(2, steps=20, model=fly_mesh_model(around=8)), "track")}


def _same_as_every_geom(sim, cam, W, H, device="cpu", **kw):
    """Renders with the top level and with the walk over every geom; asserts equal
    images and returns the first renderer."""
    fast = _render(sim, cam, W, H, device, **kw)
    slow = _render(sim, cam, W, H, device, **kw)
    slow.top_bounds = None
    slow.rgb.fill_(1), slow.seg.fill_(-9)
    slow.render()
    assert torch.equal(fast.seg, slow.seg) and torch.equal(fast.depth, slow.depth)
    assert torch.equal(fast.rgb, slow.rgb)
    return fast


def _leaves(top):
    leaf = top[:, 1] < 0
    return top[leaf, 0].tolist(), top[leaf, 1].tolist()


@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
def test_topology_covers_each_bounded_geom_once(scenes, scene):
    from flycuda.render import TileRenderer

    sim, cam = scenes[scene]
    sc = TileRenderer(sim, cam, 8, 6).scene
    top, rb = sc.top_index.numpy(), sc.geom_param[:, 10].numpy()
    geoms, counts = _leaves(top)
    assert sorted(geoms) == np.flatnonzero(rb > 0).tolist() and set(counts) == {-1}
    assert sc.unbounded.tolist() == np.flatnonzero(rb <= 0).tolist()
    assert set(sc.geom_info[sc.unbounded.long(), 0].tolist()) == {0}  # the floor planes
    inner = np.flatnonzero(top[:, 1] >= 0)
    assert len(top) == 2 * len(geoms) - 1 and (top[inner] > inner[:, None]).all()  # children after parent
    assert sorted(top[inner].ravel().tolist()) == list(range(1, len(top)))  # every node but the root once


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
    """Each leaf box holds its geom as posed in that world; each parent holds its
    children; the CPU twin equals the grid emulator's float64 mirror to rounding."""
    sim, cam = scenes[scene]
    tr = _render(sim, cam, 8, 6, worlds=list(range(sim.nworld))[::-1])  # tile s shows world W-1-s
    sc, top = tr.scene, tr.scene.top_index
    xpos, xmat = sim.view("geom_xpos").double(), sim.view("geom_xmat").double().reshape(sim.nworld, -1, 3, 3)
    for s, w in enumerate(tr.worlds.tolist()):
        box = tr.top_bounds[s].double()
        for j, (a, c) in enumerate(top.tolist()):
            lo, hi = box[j, :3], box[j, 3:]
            if c < 0:
                g = int(sc.geom_ids[a])
                pts = xpos[w, g] + _local_points(sc, sim.mjm, a) @ xmat[w, g].T
                assert (pts >= lo).all() and (pts <= hi).all(), (s, j, a)
            else:
                assert (box[[a, c], :3] >= lo).all() and (box[[a, c], 3:] <= hi).all(), (s, j)
    grid = grid_render.refit_top(tr.geom_xpos, tr.geom_xmat, tr.worlds, sc)  # 4 threads a block: idle ones too
    torch.testing.assert_close(tr.top_bounds.double(), grid, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("scene", ["prims", "fly", "fly_mesh"])
def test_top_level_renders_what_testing_every_geom_renders(scenes, scene, device):
    """Exact culling: with the top level (refit boxes, nearer first, pruned at the
    closest hit) the images equal those of the walk over every geom, shadows included."""
    sim, cam = scenes[scene]
    fast = _same_as_every_geom(sim, cam, 36, 27, device, samples=2, shadows=True)
    assert len(torch.unique(fast.seg)) >= 4


def test_refit_follows_poses_far_from_the_rest_pose():
    """The topology comes from the rest pose, the boxes from the live one: bodies moved
    far apart (and the whole scene far from the origin) still render as every-geom."""
    sim = _prims_sim(2)
    q = sim.view("qpos")
    g = torch.Generator().manual_seed(5)
    q[:, [7 * b + i for b in range(6) for i in range(3)]] += torch.randn(2, 18, generator=g) * 0.2 + 40.0
    sim.forward()
    c = sim.view("geom_xpos")[0, 1:].mean(0)  # the overview camera's view, moved along and backed off
    cid = sim.camera_id("overview")
    cam = (c + 2.0 * torch.tensor([0.0, -0.55, 0.45]), sim.view("cam_xmat")[0, cid], 60.0)
    fast = _same_as_every_geom(sim, cam, 40, 30)
    assert len(torch.unique(fast.seg)) >= 4


def test_exact_ties_resolve_in_render_list_order():
    """Coincident geoms (a box twice, a mesh twice) hit at bit-identical distances: the
    earlier geom of the render list wins on every path, whatever order the top level
    visits them in."""
    from flycuda.bridge import Sim
    from flycuda.model import _sphere_mesh

    vert, face = _sphere_mesh()
    pair = '<geom type="box" size="0.04 0.03 0.05"/>' * 2 + '<geom type="mesh" mesh="m" pos="0 0 0.12"/>' * 2
    geoms = "".join(f'<body pos="{x} 0 0.1">{pair}</body>' for x in (-0.2, 0.0, 0.2))
    xml = f"""<mujoco><asset><mesh name="m" vertex="{vert}" face="{face}"/></asset><worldbody>
      <geom type="plane" size="1 1 0.1"/><camera name="c" pos="0 -0.6 0.5" xyaxes="1 0 0 0 0.64 0.77"/>{geoms}
      </worldbody></mujoco>"""
    sim = Sim.build(xml, 1, device="cpu")
    sim.forward()
    fast = _same_as_every_geom(sim, "c", 48, 36)
    seen = set(torch.unique(fast.seg).tolist())
    assert seen - {-1} == {0} | {1 + 4 * b + i for b in range(3) for i in (0, 2)}  # first of each pair only
    grid = grid_render.render_tiles(sim.view("geom_xpos"), sim.view("geom_xmat"), fast.cam_pos, fast.cam_mat, [0],
                                    fast.scene, fovy=fast.fovy, height=12, width=16)[2]
    assert set(torch.unique(grid).tolist()) <= seen


def test_far_telephoto_camera_renders_as_every_geom(scenes):
    """Seen from ~110 capsule radii through a 10-degree lens, where the geoms' own tests
    round most coarsely on silhouettes, the padded boxes still cull nothing they hit."""
    sim, _ = scenes["prims"]
    cid = sim.camera_id("overview")
    cam = (sim.view("cam_xpos")[0, cid] * 4.0, sim.view("cam_xmat")[0, cid], 10.0)
    fast = _same_as_every_geom(sim, cam, 64, 48)
    assert len(torch.unique(fast.seg)) >= 5


def test_grid_emulator_with_and_without_top_level(scenes):
    """The grid emulator's two paths agree with each other and with the CPU op."""
    sim, cam = scenes["prims"]
    tr = _render(sim, cam, 10, 8, samples=1, shadows=True)
    args = (sim.view("geom_xpos"), sim.view("geom_xmat"), tr.cam_pos, tr.cam_mat, list(range(sim.nworld)), tr.scene)
    kw = dict(fovy=tr.fovy, height=8, width=10, shadows=True)
    rgb, depth, seg = grid_render.render_tiles(*args, **kw)
    rgb2, depth2, seg2 = grid_render.render_tiles(*args, top_level=False, **kw)
    assert torch.equal(seg, seg2) and torch.equal(rgb, rgb2) and torch.equal(seg, tr.seg)


def test_scene_without_bounded_geoms():
    """Only a plane: an empty top level ([S, 0, 6] workspace), the plane still renders."""
    from flycuda.bridge import Sim
    from flycuda.render import TileRenderer

    xml = """<mujoco><statistic extent="2"/><worldbody><geom type="plane" size="1 1 0.1" rgba="0.5 0.6 0.7 1"/>
      <camera name="c" pos="0 -1 1" xyaxes="1 0 0 0 0.7 0.7"/></worldbody></mujoco>"""
    sim = Sim.build(xml, 2, device="cpu")
    sim.forward()
    tr = TileRenderer(sim, "c", 12, 9, seg=True)
    assert tuple(tr.top_bounds.shape) == (2, 0, 6) and tr.scene.unbounded.tolist() == [0]
    tr.render()
    assert (tr.seg == 0).float().mean() > 0.3


def _bad_top(sc, case):
    top, unb = sc.top_index.clone(), sc.unbounded.clone()
    inner = int(torch.nonzero(top[:, 1] >= 0)[0])
    leaf = int(torch.nonzero(top[:, 1] < 0)[0])
    if case == "back_link":
        top[inner, 0] = inner
    elif case == "leaf_count":
        top[leaf, 1] = -2
    elif case == "leaf_range":
        top[leaf, 0] = 99
    elif case == "missing_geom":
        top[leaf, 0] = int(top[int(torch.nonzero(top[:, 1] < 0)[1]), 0])  # duplicate another leaf's geom
    elif case == "same_child_twice":
        top[inner, 1] = top[inner, 0]
    elif case == "orphan":  # the root's second child replaced by the last node (already linked)
        top[0, 1] = len(top) - 1
    elif case == "plane_in_unbounded_twice":
        unb = torch.cat([unb, unb])
    elif case == "unbounded_range":
        unb = torch.tensor([-3], dtype=torch.int32)
    return top, unb


@pytest.mark.parametrize("case,msg", [
    ("back_link", r"argument 'top_index' node \d+ = \(\d+, \d+\) is neither a leaf"),
    ("leaf_count", r"argument 'top_index' node \d+ = \(\d+, -2\) is neither a leaf \(k, -1\)"),
    ("leaf_range", r"argument 'top_index' node \d+ = \(99, -1\) is neither a leaf \(k, -1\) with k in \[0, 7\)"),
    ("same_child_twice", r"argument 'top_index' node \d+ = \((\d+), \1\) is neither a leaf .* nor links to two "
                         r"distinct later nodes"),
    ("orphan", r"argument 'top_index' node \d+ is linked from [02] nodes, expected 1 \(one tree\)"),
    ("missing_geom", r"render-list geom \d+ \(bounded: rbound > 0\) must appear once, in a 'top_index' leaf, "
                     r"got [02] leaves"),
    ("plane_in_unbounded_twice", r"render-list geom 0 \(unbounded: rbound <= 0\) must appear once, in "
                                 r"'unbounded', got 0 leaves and 2 'unbounded' entries"),
    ("unbounded_range", r"argument 'unbounded' entry 0 = -3 is outside \[0, 7\)"),
    ("workspace_shape", r"argument 'top_bounds' must have shape \[2, 11, 6\], got \[2, 4\]"),
])
def test_bad_top_level(scenes, case, msg):
    """Checked before anything is written: the outputs and the workspace stay untouched."""
    from dataclasses import replace

    sim, cam = scenes["prims"]
    tr = _render(sim, cam, 12, 9)
    sc = tr.scene
    wb = torch.full((2, 4), 5.0) if case == "workspace_shape" else torch.full_like(tr.top_bounds[:2], 5.0)
    if case != "workspace_shape":
        top, unb = _bad_top(sc, case)
        sc = replace(sc, top_index=top, unbounded=unb)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    a = _op_args(tr)
    with pytest.raises(RuntimeError, match=r"flycuda\.render_tiles: " + msg):
        flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"),
                             torch.tensor([0, 1], dtype=torch.int32), sc, fovy=tr.fovy, height=9, width=12,
                             rgb=rgb, top_bounds=wb)
    assert torch.all(rgb == 7) and torch.all(wb == 5.0)


def test_pixels_walk_the_top_level(scenes):
    """The pixel kernel reads the top level, not every geom: a geom whose leaf is
    pointed elsewhere (unchecked) vanishes from the image, the others stay."""
    from dataclasses import replace

    sim, cam = scenes["prims"]
    tr = _render(sim, cam, 40, 30)
    top = tr.scene.top_index.clone()
    leaves = torch.nonzero(top[:, 1] < 0)[:, 0]
    gone, other = int(top[leaves[0], 0]), int(top[leaves[1], 0])
    top[leaves[0], 0] = other
    tr.scene = replace(tr.scene, top_index=top)
    before = set(torch.unique(tr.seg).tolist())
    tr._validated = True  # check=False: the renderer vouches for its scene
    tr.render()
    gid = int(tr.scene.geom_ids[gone])
    assert gid in before and set(torch.unique(tr.seg).tolist()) == before - {gid}


@pytest.mark.parametrize("case", ["back_link", "leaf_count", "leaf_range", "unbounded_range", "orphan"])
def test_corrupted_top_level_unchecked_stays_in_bounds(scenes, case):
    """With check=False a corrupted top level (that the host check would refuse) reads
    nothing out of bounds: links breaking the bottom-up order read as empty boxes,
    out-of-range leaves and unbounded entries are skipped (see also test_emu)."""
    from dataclasses import replace

    sim, cam = scenes["prims"]
    tr = _render(sim, cam, 12, 9)
    top, unb = _bad_top(tr.scene, case)
    sc = replace(tr.scene, top_index=top, unbounded=unb)
    rgb = torch.full((2, 9, 12, 3), 7, dtype=torch.uint8)
    wb = torch.full_like(tr.top_bounds[:2], 5.0)
    a = _op_args(tr)
    flycuda.render_tiles(a.pop("geom_xpos"), a.pop("geom_xmat"), a.pop("cam_pos"), a.pop("cam_mat"),
                         torch.tensor([0, 1], dtype=torch.int32), sc, fovy=tr.fovy, height=9, width=12,
                         rgb=rgb, top_bounds=wb, check=False)
    assert not torch.all(rgb == 7) and torch.isfinite(wb).all()
