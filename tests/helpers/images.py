"""The tile renderer's calls and the comparison of its images with a reference's."""

import torch


def silhouette_edges(seg):
    """Silhouette-edge pixels of seg [..., H, Wd] (a label differing from a 4-neighbour's)."""
    e = torch.zeros_like(seg, dtype=torch.bool)
    e[..., 1:, :] |= seg[..., 1:, :] != seg[..., :-1, :]
    e[..., :-1, :] |= seg[..., :-1, :] != seg[..., 1:, :]
    e[..., 1:] |= seg[..., 1:] != seg[..., :-1]
    e[..., :-1] |= seg[..., :-1] != seg[..., 1:]
    return e


def assert_images_close(rgb, depth, seg, ref_rgb, ref_depth, ref_seg):
    """The op's images against the float64 reference's, with the op tests' bounds
    (test_render_tiles.py's docstring): segmentation equal but on silhouette edges
    (at most 1% of pixels), depth within 1e-4 relative, rgb within 2 levels."""
    edges = silhouette_edges(ref_seg)
    bad = seg.cpu() != ref_seg
    assert not (bad & ~edges).any(), "segmentation differs away from silhouette edges"
    assert bad.float().mean() <= 0.01
    same = ~bad
    rel = (depth.cpu() - ref_depth).abs() / ref_depth.abs().clamp(min=1e-12)
    assert rel[same & (ref_seg >= 0)].max() <= 1e-4
    assert torch.equal(depth.cpu()[same & (ref_seg < 0)], torch.zeros_like(ref_depth[same & (ref_seg < 0)]))
    diff = (rgb.cpu().int() - ref_rgb.int()).abs().amax(-1)
    assert diff[same & ~edges].max() <= 2


def op_args(tr, **over):
    """The pose and camera arguments of render_tiles for TileRenderer ``tr`` (``over`` replaces some)."""
    a = dict(geom_xpos=tr.geom_xpos, geom_xmat=tr.geom_xmat, cam_pos=tr.cam_pos, cam_mat=tr.cam_mat,
             worlds=tr.worlds)
    a.update(over)
    return a


def tile_renderer(sim, cam, W, H, device="cpu", **kw):
    """A TileRenderer (rgb, depth, seg) of ``sim`` on ``device``, outputs poisoned, rendered once."""
    from flycuda.render import TileRenderer

    tr = TileRenderer(sim, cam, W, H, rgb=True, depth=True, seg=True, **kw)
    if device != "cpu":  # same poses, moved to the GPU
        for name in ("geom_xpos", "geom_xmat", "cam_pos", "cam_mat", "worlds"):
            setattr(tr, name, getattr(tr, name).to(device))
        tr.scene = tr.scene.to(device)
        tr.rgb, tr.depth, tr.seg = (t.to(device) if t is not None else None for t in (tr.rgb, tr.depth, tr.seg))
        tr.top_boxes = tr.top_boxes.to(device)
        tr.timers = tr.timers.to(device) if tr.timers is not None else None
    tr.rgb.fill_(123), tr.depth.fill_(-7.0), tr.seg.fill_(-99)  # poison
    tr.render()
    return tr


def corrupt_scenes(scene):
    """Scenes the host check refuses, for unchecked runs (check=False): (name, scene).
    test_emu.py runs them on the emulated grid, test_render_packets.py through both CPU walks."""
    from dataclasses import replace

    from flycuda.render.scene import make_leaf

    top = scene.top_links.clone()
    inner = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] >= 0]
    leaves = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] < 0]
    top[inner[-1]] = 999                   # a link out of the tree
    top[inner[0]] = 0                      # a link back (to the root itself)
    top[leaves[0]] = make_leaf(99, 1)      # a leaf of a geom that does not exist
    top[leaves[1]] = make_leaf(int(top[leaves[1]].bitwise_not()) >> 3, 2)  # a leaf of two geoms
    unb = torch.cat([scene.unbounded, torch.tensor([-3, 50], dtype=torch.int32)])  # out-of-range entries
    links = scene.bvh_links.clone()
    N, T = len(links), scene.tris.shape[0]
    mesh_inner = [(j, i) for j in range(N) for i in range(2) if links[j, i] >= 0]
    mesh_leaves = [(j, i) for j in range(N) for i in range(2) if links[j, i] < 0]
    for j, i in mesh_inner[1::7]:
        links[j, i] = j if i == 0 else N + 100  # links back (a cycle) and past the end
    for j, i in mesh_leaves[::5]:
        links[j, i] = make_leaf(T - 2, 7)      # triangles past the end
    info = scene.geom_info.clone()
    mesh = int(torch.nonzero(info[:, 0] == 7)[0, 0])
    info[mesh, 1] = N + 3                      # a mesh whose root is past the nodes
    # A top level deeper than the stack: a chain of 45 nodes, each with the next node and a
    # leaf of the mesh (both boxes alike: the leaf is pushed), the last with two mesh
    # leaves. The pushes past kStack are dropped, and so is a mesh entry when the marker
    # would not fit; the rays stay in bounds.
    chain = [[j + 1, make_leaf(mesh, 1)] for j in range(44)] + [[make_leaf(mesh, 1)] * 2]
    deep = torch.tensor(chain, dtype=torch.int32)
    # The same past the kernels' shared-memory limits: 1,100 nodes, more than the refit
    # holds in shared memory (256: its global-memory path) and than a block culls (1024).
    long_chain = [[j + 1, make_leaf(mesh, 1)] for j in range(1099)] + [[make_leaf(mesh, 1)] * 2]
    longer = torch.tensor(long_chain, dtype=torch.int32)
    return [("top", replace(scene, top_links=top, unbounded=unb)), ("mesh-links", replace(scene, bvh_links=links)),
            ("top-deeper-than-the-stack", replace(scene, top_links=deep)),
            ("top-past-the-shared-limits", replace(scene, top_links=longer)),
            ("mesh-root", replace(scene, geom_info=info)),
            ("mesh-root-negative", replace(scene, geom_info=info.index_put((torch.tensor(mesh), torch.tensor(1)),
                                                                           torch.tensor(-5, dtype=torch.int32))))]
