"""Heightfield triangles as MuJoCo Warp renders them, and a warning for geoms the renderer does not draw.

MuJoCo Warp's renderer draws a heightfield as a triangle mesh built at setup
(mujoco_warp/_src/bvh.py: build_hfield_bvh and _optimize_hfield_mesh): the top
surface only (no sides, no base down to z_bottom), in the geom's frame, with
vertex (r, c) at x = size[0] * (c / (0.5 * (ncol - 1)) - 1), y = size[1] * (r /
(0.5 * (nrow - 1)) - 1), z = data[r, c] * size[2] (row r is y, row-major data).
Cells whose corners are coplanar are merged greedily into rectangles that lie
on one plane; each rectangle (or single non-planar cell) gives two triangles
split along its (r, c)-(r + h, c + w) diagonal, wound counter-clockwise seen
from +z, so their normals face up (MuJoCo Warp culls back faces by default, so
the terrain is not seen from below). This module reproduces that, float32 for
float32, in the same order (checked against mujoco_warp 3.16 under NumPy 2).
"""

import warnings

import mujoco
import numpy as np

from ..errors import SceneError

HFIELD = int(mujoco.mjtGeom.mjGEOM_HFIELD)
_TOL = np.float32(1e-5)  # MuJoCo Warp's planarity tolerance, on the raw (normalized) elevation data


def _geom_label(mjm, g: int) -> str:
    return mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom {g}"


def _type_name(t: int) -> str:
    try:
        return mujoco.mjtGeom(t).name.removeprefix("mjGEOM_").lower()
    except ValueError:
        return f"type {t}"


def _leading(ok, start: int, stop: int, step: int) -> int:
    """How many of ok(lo, hi) (a bool per index in [lo, hi)) are True from `start` on, in chunks of `step`, doubling."""
    n = start
    while n < stop:
        v = ok(n, min(n + step, stop))
        if not v.all():
            return n - start + int(np.argmin(v))
        n, step = n + len(v), 2 * step
    return n - start


def _greedy_quads(d: np.ndarray) -> np.ndarray:
    """MuJoCo Warp's greedy merge of coplanar cells: int [q, 4] rows (r, c, h, w) in its emission order."""
    z00, z01, z10, z11 = d[:-1, :-1], d[:-1, 1:], d[1:, :-1], d[1:, 1:]
    planar = np.abs((z00 + z11) - (z01 + z10)) < _TOL
    slope_x, slope_y = z01 - z00, z10 - z00
    visited = ~planar  # non-planar cells are emitted one by one and never merged
    single = np.argwhere(visited)
    quads = [np.hstack([single, np.ones_like(single)])]

    def fits(r, c, rows, cols):  # unvisited cells (rows, cols) on the plane of the start cell (r, c)
        z_pred = (z00[r, c] + (rows - r).astype(np.float32) * slope_y[r, c]
                  + (cols - c).astype(np.float32) * slope_x[r, c])
        return (planar[rows, cols] & ~visited[rows, cols] & (np.abs(z00[rows, cols] - z_pred) < _TOL)
                & (np.abs(slope_x[rows, cols] - slope_x[r, c]) < _TOL)
                & (np.abs(slope_y[rows, cols] - slope_y[r, c]) < _TOL))

    nr, nc = planar.shape
    rows, cols = np.mgrid[:nr, :nc]
    # whether the right / lower neighbour is on a cell's plane (skips the search for most single cells)
    right, down = np.zeros_like(planar), np.zeros_like(planar)
    right[:, :-1] = fits(rows[:, :-1], cols[:, :-1], rows[:, :-1], cols[:, 1:])
    down[:-1] = fits(rows[:-1], cols[:-1], rows[1:], cols[:-1])
    for r, c in np.argwhere(planar):
        if visited[r, c]:
            continue
        w = h = 1  # the run of cells on the start's plane: first along the row, then rows of w cells below
        if right[r, c]:
            w += _leading(lambda a, b: fits(r, c, np.full(b - a, r), np.arange(a, b)), c + 1, nc, 32)
        if down[r, c] or w > 1:
            h += _leading(lambda a, b: fits(r, c, *np.mgrid[a:b, c:c + w]).all(axis=1), r + 1, nr, -(-32 // w))
        visited[r:r + h, c:c + w] = True
        quads.append(np.array([[r, c, h, w]]))
    q = np.concatenate(quads).astype(np.int64)
    return q[np.argsort(q[:, 0] * nc + q[:, 1], kind="stable")]  # scan order of each quad's first cell


def hfield_triangles(mjm, geom_id: int) -> np.ndarray:
    """Triangles of heightfield geom `geom_id` in the geom's local frame, as MuJoCo Warp renders them.

    Returns float32 [n, 9] rows (v0, v1, v2), top surface only (MuJoCo Warp draws
    no sides or base), normals (v1 - v0) x (v2 - v0) facing +z, the same
    triangles in the same order as mujoco_warp's build_hfield_bvh. Raises
    ValueError if the geom is not a heightfield (or has no hfield asset).
    """
    g = int(geom_id)
    if not 0 <= g < mjm.ngeom:
        raise SceneError(f"geom id {g} out of range (model has {mjm.ngeom} geoms)")
    if int(mjm.geom_type[g]) != HFIELD or int(mjm.geom_dataid[g]) < 0:
        raise SceneError(f"geom {_geom_label(mjm, g)!r} is not a heightfield "
                         f"(type {_type_name(int(mjm.geom_type[g]))})")
    h = int(mjm.geom_dataid[g])
    nr, nc, adr = int(mjm.hfield_nrow[h]), int(mjm.hfield_ncol[h]), int(mjm.hfield_adr[h])
    size = np.asarray(mjm.hfield_size[h], np.float32)
    data = np.asarray(mjm.hfield_data[adr:adr + nr * nc], np.float32).reshape(nr, nc)
    # rounded as MuJoCo Warp does: x and y in float64 from the float32 size, z as a float32 product
    xs = (np.float64(size[0]) * (np.arange(nc) / (0.5 * max(nc - 1, 1)) - 1.0)).astype(np.float32)
    ys = (np.float64(size[1]) * (np.arange(nr) / (0.5 * max(nr - 1, 1)) - 1.0)).astype(np.float32)
    zs = data * size[2]
    q = _greedy_quads(data)
    r0, c0, r1, c1 = q[:, 0], q[:, 1], q[:, 0] + q[:, 2], q[:, 1] + q[:, 3]

    def vert(r, c):
        return np.stack([xs[c], ys[r], zs[r, c]], axis=-1)

    tl, tr, br, bl = vert(r0, c0), vert(r0, c1), vert(r1, c1), vert(r1, c0)
    tris = np.stack([np.concatenate([tl, tr, br], -1), np.concatenate([tl, br, bl], -1)], axis=1)
    return np.ascontiguousarray(tris.reshape(-1, 9), dtype=np.float32)


def undrawn_geoms(mjm, groups, supported: set[int]) -> list[tuple[str, str]]:
    """Visible geoms (group in `groups`, geom_rgba alpha > 0) whose type is not in `supported`.

    Returns (name, type) pairs in geom order: the geom's name or "geom <id>",
    and the type's short name ("sdf", "hfield", ...).
    """
    groups = np.asarray(sorted({int(x) for x in groups}), np.int64)
    types = np.asarray(mjm.geom_type, np.int64)
    shown = np.isin(np.asarray(mjm.geom_group, np.int64), groups) & (np.asarray(mjm.geom_rgba)[:, 3] > 0)
    missing = shown & ~np.isin(types, np.asarray(sorted(int(t) for t in supported), np.int64))
    return [(_geom_label(mjm, int(g)), _type_name(int(types[g]))) for g in np.nonzero(missing)[0]]


def warn_undrawn(mjm, groups, supported: set[int]) -> None:
    """One RuntimeWarning naming every visible geom the renderer will not draw; nothing if there is none."""
    missing = undrawn_geoms(mjm, groups, supported)
    if missing:
        names = ", ".join(f"{name!r} ({kind})" for name, kind in missing)
        noun = "geom" if len(missing) == 1 else "geoms"
        warnings.warn(f"flycuda renderer does not draw {len(missing)} {noun}: {names}; "
                      "they are missing from the images", RuntimeWarning, stacklevel=2)
