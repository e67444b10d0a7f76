"""Static scene data for the tile renderer, packed once from a ``mujoco.MjModel``.

What :func:`flycuda.render_tiles` needs besides the per-world poses: the geoms to
render (their ids, types, sizes, colours, checker pattern, bounding radius), one
BVH per mesh (built here, on the host, once) with its triangles, the topology of
the per-world top-level BVH over the bounded geoms (built once from the model's
rest pose; its boxes are refit from the live poses on the device at every
render), the unbounded geoms (planes), and the lights. Everything is in the
layout csrc/kernels/render_tiles.h reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

PLANE, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = 0, 2, 3, 4, 5, 6, 7
SUPPORTED = {PLANE, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH}
PARAM, LIGHT = 12, 10
LEAF_SIZE = 4


@dataclass
class Scene:
    """Packed static scene (torch tensors on one device); see csrc/kernels/render_tiles.h."""

    geom_ids: torch.Tensor    # int32 [Gr]
    geom_info: torch.Tensor   # int32 [Gr, 2]: type, BVH root (-1 if not a mesh)
    geom_param: torch.Tensor  # float32 [Gr, 12]: size[3] rgb[3] rgb2[3] checker rbound pad
    bvh_bounds: torch.Tensor  # float32 [N, 6]
    bvh_index: torch.Tensor   # int32 [N, 2]: (left, right) or (first tri, -count)
    tris: torch.Tensor        # float32 [Ntri, 9]
    top_index: torch.Tensor   # int32 [Nt, 2]: top level over bounded geoms: (left, right) or (k, -1)
    unbounded: torch.Tensor   # int32 [U]: render-list indices of the unbounded geoms (planes)
    lights: torch.Tensor      # float32 [L, 10]: dir[3] ambient[3] diffuse[3] castshadow
    headlight: torch.Tensor   # float32 [6]: ambient[3] diffuse[3]
    zfar: float

    def to(self, device) -> "Scene":
        return Scene(*(getattr(self, f).to(device) for f in
                       ("geom_ids", "geom_info", "geom_param", "bvh_bounds", "bvh_index", "tris",
                        "top_index", "unbounded", "lights", "headlight")), self.zfar)


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


def _build_tree(lo_t: np.ndarray, hi_t: np.ndarray, cen: np.ndarray, leaf_size: int, sah_min: int):
    """A BVH over n items with boxes [lo_t, hi_t] and centroids ``cen`` [n, 3]: nodes
    of more than ``sah_min`` items split by the binned surface-area heuristic, smaller
    ones (and any SAH cannot split, e.g. coincident centroids) at the median centroid
    of their widest axis, down to leaves of at most ``leaf_size`` items. Siblings sit
    side by side, after their parent. Returns (bounds [N, 6] float64, index [N, 2] with leaves
    (position in ``order``, -count), order: item ids in leaf order)."""
    def box(ids):
        return np.concatenate([lo_t[ids].min(axis=0), hi_t[ids].max(axis=0)])

    all_ids = np.arange(len(cen))
    bounds, index, order = [box(all_ids)], [[0, 0]], []
    stack = [(all_ids, 0)]  # (items, node)
    while stack:
        ids, node = stack.pop()
        split = _sah_split(ids, lo_t, hi_t, cen) if len(ids) > sah_min else None
        if split is None and len(ids) > leaf_size:  # no SAH split: halve by the median centroid
            c = cen[ids]
            axis = int(np.argmax(c.max(axis=0) - c.min(axis=0)))
            srt = ids[np.argsort(c[:, axis], kind="stable")]
            split = (srt[:len(srt) // 2], srt[len(srt) // 2:])
        if split is None:
            index[node] = [len(order), -len(ids)]
            order.extend(ids.tolist())
            continue
        left = len(bounds)  # the two children side by side: one parent visit reads adjacent boxes
        bounds += [box(split[0]), box(split[1])]
        index += [[0, 0], [0, 0]]
        index[node] = [left, left + 1]
        stack.append((split[1], left + 1))
        stack.append((split[0], left))
    return np.asarray(bounds), np.asarray(index, np.int64).reshape(-1, 2), np.asarray(order, np.int64)


def build_bvh(tris: np.ndarray, first_node: int, first_tri: int):
    """A BVH over the triangles ``tris`` [n, 9] (see _build_tree; leaves of at most
    LEAF_SIZE triangles). Returns (bounds [N, 6], index [N, 2], triangles reordered
    to leaf order); node/tri indices are offset by first_node/first_tri."""
    n = tris.shape[0]
    if n == 0:
        raise ValueError("a mesh without triangles cannot be rendered")
    v = tris.reshape(n, 3, 3).astype(np.float64)
    bounds, index, order = _build_tree(v.min(axis=1), v.max(axis=1), v.mean(axis=1), LEAF_SIZE, SAH_MIN)
    leaf = index[:, 1] < 0
    index = index + np.where(leaf[:, None], [first_tri, 0], first_node)
    return bounds.astype(np.float32), index.astype(np.int32), tris[order]


def build_top(centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Topology of the top-level BVH over bounded geoms with rest-pose centers [n, 3]
    and bounding radii [n]: index [Nt, 2], leaves (geom, -1) with geom in [0, n),
    children after their parent (render_tiles refits the boxes every frame)."""
    if len(centers) == 0:
        return np.zeros((0, 2), np.int32)
    c = np.asarray(centers, np.float64).reshape(-1, 3)
    r = np.asarray(radii, np.float64).reshape(-1, 1)
    _, index, order = _build_tree(c - r, c + r, c, leaf_size=1, sah_min=TOP_SAH_MIN)
    leaf = index[:, 1] < 0
    index[leaf, 0] = order[index[leaf, 0]]
    return index.astype(np.int32)


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


def pack_scene(mjm, groups=(0, 1, 2), device="cpu") -> Scene:
    """Packs ``mjm``'s visible geoms (``groups``), meshes and lights for render_tiles."""
    import mujoco

    d = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, d)  # light_xdir for lights fixed to the world
    ids, info, params = [], [], []
    bounds, index, tris = [], [], []
    mesh_root: dict[int, int] = {}
    n_nodes = n_tris = 0
    for g in range(mjm.ngeom):
        gtype = int(mjm.geom_type[g])
        if int(mjm.geom_group[g]) not in groups or gtype not in SUPPORTED or mjm.geom_rgba[g, 3] == 0:
            continue
        root = -1
        if gtype == MESH:
            mid = int(mjm.geom_dataid[g])
            if mid not in mesh_root:
                va, nv = int(mjm.mesh_vertadr[mid]), int(mjm.mesh_vertnum[mid])
                fa, nf = int(mjm.mesh_faceadr[mid]), int(mjm.mesh_facenum[mid])
                verts = mjm.mesh_vert[va:va + nv]
                faces = mjm.mesh_face[fa:fa + nf]
                b, i, t = build_bvh(verts[faces].reshape(nf, 9).astype(np.float32), n_nodes, n_tris)
                mesh_root[mid] = n_nodes
                bounds.append(b), index.append(i), tris.append(t)
                n_nodes, n_tris = n_nodes + len(b), n_tris + len(t)
            root = mesh_root[mid]
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
    rbound = np.asarray([p[10] for p in params], np.float64)
    bounded, unbounded = np.flatnonzero(rbound > 0), np.flatnonzero(rbound <= 0)
    top = build_top(d.geom_xpos[np.asarray(ids, np.int64)[bounded]], rbound[bounded])
    leaf = top[:, 1] < 0
    top[leaf, 0] = bounded[top[leaf, 0]]
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
        bvh_bounds=t(np.concatenate(bounds) if bounds else np.zeros((0, 6)), np.float32, (-1, 6)),
        bvh_index=t(np.concatenate(index) if index else np.zeros((0, 2)), np.int32, (-1, 2)),
        tris=t(np.concatenate(tris) if tris else np.zeros((0, 9)), np.float32, (-1, 9)),
        top_index=t(top, np.int32, (-1, 2)), unbounded=t(unbounded, np.int32, (-1,)),
        lights=t(lights, np.float32, (-1, LIGHT)), headlight=t(headlight, np.float32, (6,)),
        zfar=float(mjm.vis.map.zfar * mjm.stat.extent))
