"""Static scene data for the tile renderer, packed once from a ``mujoco.MjModel``.

What :func:`flycuda.render_tiles` needs besides the per-world poses: the geoms to
render (their ids, types, sizes, colours, checker pattern, bounding radius), one
BVH per mesh (built here, on the host, once) with its triangles, the topology of
the per-world top-level BVH over the bounded geoms (built once from the model's
rest pose; its boxes are refit from the live poses on the device at every
render), the unbounded geoms (planes), and the lights. Everything is in the
layout csrc/kernels/render/layout.h reads (:mod:`flycuda.ops.scene_layout`).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..errors import SceneError
from ..ops.scene_layout import (
    BACKGROUND_COLS,
    BOX_COLS,
    HFIELD,
    K_INF,
    LEAF_SIZE,
    LIGHT,
    MESH,
    PARAM,
    PARAM_RBOUND,
    PLANE,
    STACK,
    SUPPORTED,
    TRI_COLS,
    Scene,
    make_leaf,
)
from .hfield import hfield_triangles, warn_undrawn

SAH_BINS = 12
SAH_MIN = 32  # nodes of more triangles are split by SAH; smaller ones at the median (build time)
TOP_SAH_MIN = 1  # the top level's few geoms: SAH at every level (measured 3% faster on NeuroMechFly)


def _area(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Half surface areas of boxes [..., 3] (0 for empty boxes, where lo > hi)."""
    e = np.maximum(hi - lo, 0.0)
    return e[..., 0] * e[..., 1] + e[..., 1] * e[..., 2] + e[..., 2] * e[..., 0]


def _sah_split(ids: np.ndarray, lo_t: np.ndarray, hi_t: np.ndarray, cen: np.ndarray):
    """(left ids, right ids) of the binned surface-area-heuristic split of ``ids``
    (SAH_BINS bins per axis, on the centroids), or None when splitting does not pay
    (cost >= making a leaf of them) or every centroid coincides."""
    c = cen[ids]
    cmin, cmax = c.min(axis=0), c.max(axis=0)
    ext = cmax - cmin
    best = (np.inf, -1, -1)
    n = len(ids)
    for axis in range(3):
        if ext[axis] <= 0:
            continue
        b = np.minimum(((c[:, axis] - cmin[axis]) / ext[axis] * SAH_BINS).astype(np.int64), SAH_BINS - 1)
        cnt = np.bincount(b, minlength=SAH_BINS)
        blo = np.full((SAH_BINS, 3), np.inf)
        bhi = np.full((SAH_BINS, 3), -np.inf)
        np.minimum.at(blo, b, lo_t[ids])
        np.maximum.at(bhi, b, hi_t[ids])
        # Left of plane k: bins 0..k; right: k+1..end (prefix/suffix boxes and counts).
        llo, lhi = np.minimum.accumulate(blo)[:-1], np.maximum.accumulate(bhi)[:-1]
        rlo, rhi = np.minimum.accumulate(blo[::-1])[::-1][1:], np.maximum.accumulate(bhi[::-1])[::-1][1:]
        lcnt, rcnt = np.cumsum(cnt)[:-1], n - np.cumsum(cnt)[:-1]
        cost = _area(llo, lhi) * lcnt + _area(rlo, rhi) * rcnt
        cost[(lcnt == 0) | (rcnt == 0)] = np.inf
        k = int(np.argmin(cost))
        if cost[k] < best[0]:
            best = (float(cost[k]), axis, k)
    cost, axis, k = best
    if axis < 0:
        return None
    b = np.minimum(((c[:, axis] - cmin[axis]) / ext[axis] * SAH_BINS).astype(np.int64), SAH_BINS - 1)
    return ids[b <= k], ids[b > k]


SAH_MAX_DEPTH = 16  # below this depth nodes are halved at the median: depth <= 16 + log2(n / LEAF_SIZE)


def _build_tree(lo_t: np.ndarray, hi_t: np.ndarray, cen: np.ndarray, leaf_size: int, sah_min: int):
    """A BVH over n items with boxes [lo_t, hi_t] and centroids ``cen`` [n, 3]: nodes
    of more than ``sah_min`` items split by the binned surface-area heuristic down to
    depth SAH_MAX_DEPTH, the others (and any SAH cannot split, e.g. coincident
    centroids) at the median centroid of their widest axis, down to leaves of at most
    ``leaf_size`` items. Returns (nodes, order): nodes a list of (lo, hi, left, right)
    with leaves (lo, hi, -1 - first position in ``order``, count) and children after
    their parent; order: item ids in leaf order."""
    def box(ids):
        return lo_t[ids].min(axis=0), hi_t[ids].max(axis=0)

    all_ids = np.arange(len(cen))
    nodes, order = [None], []
    stack = [(all_ids, 0, 0)]  # (items, node, depth)
    while stack:
        ids, node, depth = stack.pop()
        lo, hi = box(ids)
        split = (_sah_split(ids, lo_t, hi_t, cen) if len(ids) > sah_min and depth < SAH_MAX_DEPTH
                 else None)
        if split is None and len(ids) > leaf_size:  # halve by the median centroid
            c = cen[ids]
            axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
            srt = ids[np.argsort(c[:, axis], kind="stable")]
            split = (srt[:len(srt) // 2], srt[len(srt) // 2:])
        if split is None:
            nodes[node] = (lo, hi, -1 - len(order), len(ids))
            order.extend(ids.tolist())
            continue
        left = len(nodes)
        nodes += [None, None]
        nodes[node] = (lo, hi, left, left + 1)
        stack.append((split[1], left + 1, depth + 1))
        stack.append((split[0], left, depth + 1))
    return nodes, np.asarray(order, np.int64)


def _compact(nodes, item_offset: int, node_offset: int):
    """The layout.h form of a tree from _build_tree: one row per INTERNAL node with both
    children's boxes (boxes [N, 12]) and links [N, 2] (a later node, offset by
    node_offset, or a leaf make_leaf(first + item_offset, count)); a tree that is one
    leaf becomes a root whose second child is empty. Returns (boxes, links, depth)."""
    if nodes[0][2] < 0:  # the whole tree is one leaf
        lo, hi, first, count = nodes[0]
        empty = np.full(6, K_INF)
        boxes = np.concatenate([lo, hi, empty])[None]
        return boxes, np.asarray([[make_leaf(-1 - first + item_offset, count), make_leaf(0, 0)]]), 1
    internal = [i for i, n in enumerate(nodes) if n[2] >= 0]
    new = {old: j for j, old in enumerate(internal)}
    boxes = np.zeros((len(internal), BOX_COLS))
    links = np.zeros((len(internal), 2), np.int64)
    depth = np.zeros(len(nodes), np.int64)
    depth[0] = 1
    for j, old in enumerate(internal):
        for c, kid in enumerate(nodes[old][2:4]):
            lo, hi, a, b = nodes[kid]
            boxes[j, 6 * c:6 * c + 3], boxes[j, 6 * c + 3:6 * c + 6] = lo, hi
            if a < 0:
                links[j, c] = make_leaf(-1 - a + item_offset, b)
            else:
                links[j, c] = new[kid] + node_offset
                depth[kid] = depth[old] + 1
    return boxes, links, int(depth.max())


def build_bvh(tris: np.ndarray, first_node: int, first_tri: int):
    """A BVH over the triangles ``tris`` [n, 9] (v0, v1, v2; see _build_tree, leaves of at
    most LEAF_SIZE triangles). Returns (boxes [N, 12], links [N, 2], packed triangles
    [n, 12] in leaf order: v0, e1, e2, each padded to 4; depth); node and triangle ids
    are offset by first_node / first_tri."""
    n = tris.shape[0]
    if n == 0:
        raise SceneError("a mesh without triangles cannot be rendered")
    v = tris.reshape(n, 3, 3).astype(np.float64)
    nodes, order = _build_tree(v.min(axis=1), v.max(axis=1), v.mean(axis=1), LEAF_SIZE, SAH_MIN)
    boxes, links, depth = _compact(nodes, first_tri, first_node)
    t = tris[order].reshape(n, 3, 3).astype(np.float32)
    packed = np.zeros((n, 3, 4), np.float32)
    packed[:, 0, :3] = t[:, 0]
    packed[:, 1, :3] = t[:, 1] - t[:, 0]  # e1, e2 in float32, as the kernel reads them
    packed[:, 2, :3] = t[:, 2] - t[:, 0]
    return boxes.astype(np.float32), links.astype(np.int32), packed.reshape(n, TRI_COLS), depth


def build_top(centers: np.ndarray, radii: np.ndarray, items=None):
    """Topology of the top-level BVH over bounded geoms with rest-pose centers [n, 3]
    and bounding radii [n]: (links [Nt, 2] with one-geom leaves, children after their
    parent; depth). A leaf holds ``items[i]`` for geom i (default i: the render-list
    indices of the geoms). render_tiles refits the boxes every frame."""
    if len(centers) == 0:
        return np.zeros((0, 2), np.int32), 0
    c = np.asarray(centers, np.float64).reshape(-1, 3)
    r = np.asarray(radii, np.float64).reshape(-1, 1)
    nodes, order = _build_tree(c - r, c + r, c, leaf_size=1, sah_min=TOP_SAH_MIN)
    item = np.arange(len(c)) if items is None else np.asarray(items, np.int64)
    nodes = [(lo, hi, a if a >= 0 else -1 - int(item[order[-1 - a]]), b) for lo, hi, a, b in nodes]
    _, links, depth = _compact(nodes, 0, 0)
    return links.astype(np.int32), depth


def _texture_colors(mjm, matid: int):
    """(rgb, rgb2, checker cell) of a material: a builtin checker texture gives two colours."""
    rgba = mjm.mat_rgba[matid]
    texid = int(mjm.mat_texid[matid].max()) if mjm.mat_texid.ndim == 2 else int(mjm.mat_texid[matid])
    if texid < 0:
        return rgba[:3], rgba[:3], 0.0
    w, h, nc = int(mjm.tex_width[texid]), int(mjm.tex_height[texid]), int(mjm.tex_nchannel[texid])
    data = mjm.tex_data[mjm.tex_adr[texid]: mjm.tex_adr[texid] + w * h * nc].reshape(h, w, nc)
    c1 = data[0, 0, :3].astype(np.float32) / 255.0
    c2 = data[0, w // 2, :3].astype(np.float32) / 255.0 if w > 1 else c1
    return rgba[:3] * c1, rgba[:3] * c2, 1.0


def _background(mjm) -> np.ndarray:
    """float32 [6]: the colour of the model's skybox looking up and looking down (the
    mean of the cube faces MuJoCo shows up and down when the texture holds 6 faces,
    else its mean colour; MuJoCo draws the skybox unlit); black without a skybox."""
    sky = [t for t in range(mjm.ntex) if int(mjm.tex_type[t]) == int(mujoco.mjtTexture.mjTEXTURE_SKYBOX)]
    if not sky:
        return np.zeros(BACKGROUND_COLS, np.float32)
    t = sky[0]
    w, h, nc = int(mjm.tex_width[t]), int(mjm.tex_height[t]), int(mjm.tex_nchannel[t])
    data = mjm.tex_data[mjm.tex_adr[t]: mjm.tex_adr[t] + w * h * nc].reshape(h, w, nc)[..., :3] / 255.0
    if h == 6 * w:  # 6 cube faces stacked; MuJoCo draws the skybox turned so that faces 2 and 3 are up and down
        up, down = data[2 * w:3 * w].reshape(-1, 3).mean(0), data[3 * w:4 * w].reshape(-1, 3).mean(0)
    else:
        up = down = data.reshape(-1, 3).mean(0)
    return np.concatenate([up, down]).astype(np.float32)


def _geom_triangles(mjm, g: int):
    """(key, triangles [n, 9] in the geom's frame) of a mesh or heightfield geom: the
    key names the shape (a mesh or hfield id), so geoms sharing it share one BVH."""
    gtype, did = int(mjm.geom_type[g]), int(mjm.geom_dataid[g])
    if gtype == HFIELD:
        return ("hfield", did), hfield_triangles(mjm, g)
    va, nv = int(mjm.mesh_vertadr[did]), int(mjm.mesh_vertnum[did])
    fa, nf = int(mjm.mesh_faceadr[did]), int(mjm.mesh_facenum[did])
    verts, faces = mjm.mesh_vert[va:va + nv], mjm.mesh_face[fa:fa + nf]
    return ("mesh", did), verts[faces].reshape(nf, 9).astype(np.float32)


def _geom_name(mjm, g: int) -> str:
    return mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom {g}"


def pack_scene(mjm, groups=(0, 1, 2), device="cpu") -> Scene:
    """Packs ``mjm``'s visible geoms (``groups``), meshes, heightfields (as meshes) and
    lights for render_tiles. Visible geoms of a type the renderer does not draw give
    one warning naming them. Raises SceneError if a BVH is too deep for the
    traversal stack (layout.h kStack; not expected: the builder limits depth)."""
    warn_undrawn(mjm, groups, SUPPORTED)
    d = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, d)  # light_xdir for lights fixed to the world
    ids, info, params = [], [], []
    boxes, links, tris = [], [], []
    mesh_root: dict = {}
    mesh_depth: dict[int, tuple[int, str]] = {}
    n_nodes = n_tris = 0
    for g in range(mjm.ngeom):
        gtype = int(mjm.geom_type[g])
        if int(mjm.geom_group[g]) not in groups or gtype not in SUPPORTED or mjm.geom_rgba[g, 3] == 0:
            continue
        root = -1
        if gtype in (MESH, HFIELD):
            key, tri = _geom_triangles(mjm, g)
            if key not in mesh_root:
                b, i, t, depth = build_bvh(tri, n_nodes, n_tris)
                mesh_root[key] = n_nodes
                mesh_depth[n_nodes] = (depth, _geom_name(mjm, g))
                boxes.append(b), links.append(i), tris.append(t)
                n_nodes, n_tris = n_nodes + len(b), n_tris + len(t)
            root = mesh_root[key]
            gtype = MESH
        matid = int(mjm.geom_matid[g])
        if matid >= 0:
            rgb, rgb2, checker = _texture_colors(mjm, matid)
        else:
            rgb = rgb2 = mjm.geom_rgba[g, :3]
            checker = 0.0
        if checker and gtype == PLANE:  # checker cell: plane extent / texrepeat (2 cells per tile)
            rep = float(mjm.mat_texrepeat[matid][0]) or 1.0
            size = float(mjm.geom_size[g, 0]) or 1.0
            checker = size / rep
        else:
            checker = 0.0
        p = np.zeros(PARAM, np.float32)
        p[0:3], p[3:6], p[6:9] = mjm.geom_size[g], rgb, rgb2
        p[9], p[10] = checker, 0.0 if gtype == PLANE else float(mjm.geom_rbound[g])
        ids.append(g), info.append([gtype, root]), params.append(p)
    # Top level over the bounded geoms (leaves hold render-list indices), from the rest pose.
    rbound = np.asarray([p[PARAM_RBOUND] for p in params], np.float64)
    bounded, unbounded = np.flatnonzero(rbound > 0), np.flatnonzero(rbound <= 0)
    top, top_depth = build_top(d.geom_xpos[np.asarray(ids, np.int64)[bounded]], rbound[bounded], items=bounded)
    _check_depths(top_depth, mesh_depth)
    lights = []
    for li in range(mjm.nlight):
        directional = bool(mjm.light_directional[li]) if hasattr(mjm, "light_directional") else \
            int(mjm.light_type[li]) == int(mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
        if not directional or not bool(mjm.light_active[li]):
            continue
        row = np.zeros(LIGHT, np.float32)
        row[0:3] = d.light_xdir[li] / max(np.linalg.norm(d.light_xdir[li]), 1e-9)
        row[3:6], row[6:9] = mjm.light_ambient[li], mjm.light_diffuse[li]
        row[9] = float(mjm.light_castshadow[li])
        lights.append(row)
    hl = mjm.vis.headlight
    headlight = np.concatenate([hl.ambient, hl.diffuse]).astype(np.float32) if hl.active else np.zeros(6, np.float32)

    def t(a, dt, shape):
        return torch.from_numpy(np.asarray(a, dt).reshape(shape)).to(device)

    return Scene(
        geom_ids=t(ids, np.int32, (-1,)), geom_info=t(info, np.int32, (-1, 2)),
        geom_param=t(params, np.float32, (-1, PARAM)),
        bvh_boxes=t(np.concatenate(boxes) if boxes else np.zeros((0, BOX_COLS)), np.float32, (-1, BOX_COLS)),
        bvh_links=t(np.concatenate(links) if links else np.zeros((0, 2)), np.int32, (-1, 2)),
        tris=t(np.concatenate(tris) if tris else np.zeros((0, TRI_COLS)), np.float32, (-1, TRI_COLS)),
        top_links=t(top, np.int32, (-1, 2)), unbounded=t(unbounded, np.int32, (-1,)),
        lights=t(lights, np.float32, (-1, LIGHT)), headlight=t(headlight, np.float32, (6,)),
        background=t(_background(mjm), np.float32, (BACKGROUND_COLS,)),
        zfar=float(mjm.vis.map.zfar * mjm.stat.extent),
        depths={"top": top_depth, "meshes": {r: dn[0] for r, dn in mesh_depth.items()}})


def _check_depths(top_depth: int, mesh_depth: dict) -> None:
    """No silent holes: every ray's stack (top level + marker + the deepest mesh) fits
    in layout.h's kStack; else SceneError naming the mesh and its depth."""
    for root, (depth, name) in mesh_depth.items():
        if top_depth + 1 + depth > STACK:
            raise SceneError(f"the BVH of mesh {name!r} (root {root}) has depth {depth}; with the top level's "
                             f"{top_depth} a ray needs {top_depth + 1 + depth} stack entries, more than the "
                             f"renderer's {STACK}")
    if top_depth + 1 > STACK:
        raise SceneError(f"the top-level BVH has depth {top_depth}, more than the renderer's stack ({STACK})")
