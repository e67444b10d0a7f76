"""Grid emulation of the tile renderer's kernels (csrc/kernels/render_tiles.cuh), thread by thread.

``refit_top_kernel`` (one block of REFIT_THREADS per selected world: the leaf
children's boxes in parallel, then the unions bottom-up by thread 0) and
``render_tiles_kernel`` (blocks of 16 x 8 pixels in 8 x 4 warps, or 128 entries
of a pixel list; ``block_pixel``, ``run_pixel``) run on :func:`flycuda.reference.grid.launch`.
Each thread's work mirrors csrc/kernels/render/ line by line: ``render_pixel`` and
``camera_ray`` (pixel.h), the flat two-level ``trace`` (bvh.h: unbounded geoms
first, then one loop over the top level and the meshes with both children's
boxes per node, leaves tested at once or deferred, nearer child first, the
kStack guard and the kMaxVisits bound, a marker to return to the world frame),
``hit_normal`` after the traversal, ``shade`` with the shadow mask first, and the
output addressing (tiles, pixel lists, mosaic).

Unlike :mod:`flycuda.reference.render` (float64, an independent check), the
arithmetic here is float32, operation by operation in the kernels' order (numpy
float32 scalars; the C++ builds use -ffp-contract=off, so no fused multiply-adds):
the grid mirror equals the CPU op and the emulated kernels bit for bit. The
geom intersections are geoms.h's formulas (the float64 reference's
``_hit_local`` computes the same closed forms, in float64). The stage timers are
not mirrored. Python per thread: tiny images only.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import launch_plan
from ..scene import (BOX_COLS, INFO_ROOT, INFO_TYPE, LEAF_BITS, MAX_CAMS, MAX_LIGHTS, PARAM_CHECKER,
                     PARAM_RBOUND, PARAM_RGB, PARAM_RGB2, PARAM_SIZE, STACK)
from .grid import cdiv, launch

F32 = np.float32
K_INF = F32(3.0e38)       # layout.h kInf
K_EPS = F32(1e-6)         # kEps
K_STACK = STACK           # kStack
K_MARKER = -2 ** 31        # kMarker: the stack entry "back to the world frame" (INT32_MIN: no leaf link)
K_MAX_VISITS = 1 << 22    # kMaxVisits
ZERO, ONE = F32(0.0), F32(1.0)
PLANE, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = 0, 2, 3, 4, 5, 6, 7


# --- layout.h ------------------------------------------------------------------------

def is_leaf(link: int) -> bool:
    return link < 0


def leaf_first(link: int) -> int:
    return (~link) >> LEAF_BITS


def leaf_count(link: int) -> int:
    return (~link) & ((1 << LEAF_BITS) - 1)


# --- geoms.h (float32, in the kernels' order) ----------------------------------------

def v3(x, y, z):
    return (x, y, z)


def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def mul(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def normalize(a):
    n = np.sqrt(dot(a, a))
    return mul(a, ONE / n) if n > 0 else a


def matvec(R, v):
    return (R[0] * v[0] + R[1] * v[1] + R[2] * v[2], R[3] * v[0] + R[4] * v[1] + R[5] * v[2],
            R[6] * v[0] + R[7] * v[1] + R[8] * v[2])


def matTvec(R, v):
    return (R[0] * v[0] + R[3] * v[1] + R[6] * v[2], R[1] * v[0] + R[4] * v[1] + R[7] * v[2],
            R[2] * v[0] + R[5] * v[1] + R[8] * v[2])


UP = (ZERO, ZERO, ONE)


def miss():
    return [K_INF, UP]  # Hit: t, local normal


def quad_entry(a, b, c):
    if a <= 0:
        return K_INF
    disc = b * b - a * c
    if disc < 0:
        return K_INF
    t = (-b - np.sqrt(disc)) / a
    return t if t > K_EPS else K_INF


def hit_sphere(o, d, c, r):
    oc = sub(o, c)
    h = miss()
    h[0] = quad_entry(dot(d, d), dot(oc, d), dot(oc, oc) - r * r)
    if h[0] < K_INF:
        h[1] = add(oc, mul(d, h[0]))
    return h


def hit_ellipsoid(o, d, s):
    os_ = (o[0] / s[0], o[1] / s[1], o[2] / s[2])
    ds = (d[0] / s[0], d[1] / s[1], d[2] / s[2])
    h = miss()
    h[0] = quad_entry(dot(ds, ds), dot(os_, ds), dot(os_, os_) - 1)
    if h[0] < K_INF:
        p = add(o, mul(d, h[0]))
        h[1] = (p[0] / (s[0] * s[0]), p[1] / (s[1] * s[1]), p[2] / (s[2] * s[2]))
    return h


def hit_tube(o, d, r, h):
    out = miss()
    t = quad_entry(d[0] * d[0] + d[1] * d[1], o[0] * d[0] + o[1] * d[1], o[0] * o[0] + o[1] * o[1] - r * r)
    if t < K_INF and abs(o[2] + t * d[2]) <= h:
        out = [t, (o[0] + t * d[0], o[1] + t * d[1], ZERO)]
    return out


def nearer(a, b):
    return b if b[0] < a[0] else a


def hit_capsule(o, d, r, h):
    best = hit_tube(o, d, r, h)
    for side in (-1, 1):  # hemispherical caps beyond the tube
        c = hit_sphere(o, d, (ZERO, ZERO, F32(side) * h), r)
        if c[0] < K_INF and side * (o[2] + c[0] * d[2]) >= h:
            best = nearer(best, c)
    return best


def hit_cylinder(o, d, r, h):
    best = hit_tube(o, d, r, h)
    if d[2] != 0:
        for side in (-1, 1):  # flat caps
            t = (F32(side) * h - o[2]) / d[2]
            x, y = o[0] + t * d[0], o[1] + t * d[1]
            if t > K_EPS and x * x + y * y <= r * r and t < best[0]:
                best = [t, (ZERO, ZERO, F32(side))]
    return best


def slab_axis(o, d, lo, hi, tn, tf):
    """geoms.h slab_axis: (tn, tf, entered)."""
    if d == 0:
        if o < lo or o > hi:
            tf = -K_INF
        return tn, tf, False
    t1, t2 = (lo - o) / d, (hi - o) / d
    if t1 > t2:
        t1, t2 = t2, t1
    entered = False
    if t1 > tn:
        tn, entered = t1, True
    if t2 < tf:
        tf = t2
    return tn, tf, entered


def hit_box(o, d, s):
    tn, tf = -K_INF, K_INF
    tn, tf, _ = slab_axis(o[0], d[0], -s[0], s[0], tn, tf)  # x: the last resort below
    tn, tf, ey = slab_axis(o[1], d[1], -s[1], s[1], tn, tf)
    tn, tf, ez = slab_axis(o[2], d[2], -s[2], s[2], tn, tf)
    h = miss()
    if tn > tf or tf < K_EPS or not tn > K_EPS:
        return h
    sgn = tuple(-ONE if d[i] > 0 else ONE for i in range(3))
    n = (ZERO, ZERO, sgn[2]) if ez else ((ZERO, sgn[1], ZERO) if ey else (sgn[0], ZERO, ZERO))
    return [tn, n]


def hit_plane(o, d, sx, sy):
    h = miss()
    if o[2] <= 0 or d[2] >= 0:
        return h
    t = -o[2] / d[2]
    x, y = o[0] + t * d[0], o[1] + t * d[1]
    if t > K_EPS and (sx <= 0 or abs(x) <= sx) and (sy <= 0 or abs(y) <= sy):
        h = [t, UP]
    return h


def hit_triangle(o, d, tri):
    """Moller-Trumbore on a packed triangle row (v0, e1, e2 each padded to 4): t or kInf."""
    e1, e2 = (tri[4], tri[5], tri[6]), (tri[8], tri[9], tri[10])
    p = cross(d, e2)
    det = dot(e1, p)
    if abs(det) < F32(1e-12):
        return K_INF
    inv = ONE / det
    s = sub(o, (tri[0], tri[1], tri[2]))
    u = dot(s, p) * inv
    if u < 0 or u > 1:
        return K_INF
    q = cross(s, e1)
    v = dot(d, q) * inv
    if v < 0 or u + v > 1:
        return K_INF
    t = dot(e2, q) * inv
    return t if t > K_EPS else K_INF


def tri_normal(tri):
    return cross((tri[4], tri[5], tri[6]), (tri[8], tri[9], tri[10]))


def hit_primitive(gtype, o, d, s):
    if gtype == PLANE:
        return hit_plane(o, d, s[0], s[1])
    if gtype == SPHERE:
        return hit_sphere(o, d, (ZERO, ZERO, ZERO), s[0])
    if gtype == CAPSULE:
        return hit_capsule(o, d, s[0], s[1])
    if gtype == ELLIPSOID:
        return hit_ellipsoid(o, d, s)
    if gtype == CYLINDER:
        return hit_cylinder(o, d, s[0], s[1])
    if gtype == BOX:
        return hit_box(o, d, s)
    return miss()


# --- bvh.h ---------------------------------------------------------------------------

class Ray:
    __slots__ = ("o", "d", "inv")

    def __init__(self, o, d):
        self.o, self.d = o, d
        self.inv = tuple(ONE / x if x != 0 else K_INF for x in d)


class Best:
    __slots__ = ("t", "k", "tri")

    def __init__(self, t):
        self.t, self.k, self.tri = t, -1, -1


def replaces(t, k, b: Best) -> bool:
    return t < b.t or (t == b.t and k < b.k)


def slab_inv(o, inv, lo, hi, tn, tf):
    if inv == K_INF:
        if o < lo or o > hi:
            tf = -K_INF
        return tn, tf
    t1, t2 = (lo - o) * inv, (hi - o) * inv
    if t1 > t2:
        t1, t2 = t2, t1
    if t1 > tn:
        tn = t1
    if t2 < tf:
        tf = t2
    return tn, tf


def box_entry(r: Ray, lo, hi, tmax):
    tn, tf = -K_INF, K_INF
    for e in range(3):
        tn, tf = slab_inv(r.o[e], r.inv[e], lo[e], hi[e], tn, tf)
    return K_INF if (tn > tf or tf < K_EPS or tn > tmax) else tn


def misses_sphere(o, d, c, r):
    oc = sub(o, c)
    b, cc = dot(oc, d), dot(oc, oc) - r * r
    return cc > 0 and (b > 0 or b * b < cc)


def to_local(sc, w, k, o, d):
    """The ray in geom k's frame, or None when it misses the bounding sphere."""
    c = sc.pos(w, k)
    rbound = sc.param[k][PARAM_RBOUND]
    if rbound > 0 and misses_sphere(o, d, c, rbound):
        return None
    R = sc.mat(w, k)
    return matTvec(R, sub(o, c)), matTvec(R, d)


def test_primitive(sc, w, k, o, d, b: Best) -> bool:
    loc = to_local(sc, w, k, o, d)
    if loc is None:
        return False
    P = sc.param[k]
    h = hit_primitive(sc.info[k][INFO_TYPE], loc[0], loc[1], P[PARAM_SIZE:PARAM_SIZE + 3])
    if not replaces(h[0], k, b):
        return False
    b.t, b.k, b.tri = h[0], k, -1
    return True


def test_triangles(sc, link, k, r: Ray, b: Best, any_hit: bool) -> bool:
    hit = False
    first = leaf_first(link)
    end = first + leaf_count(link)
    i = first
    while i < end and i < sc.ntri:
        t = hit_triangle(r.o, r.d, sc.tris[i])
        if replaces(t, k, b):
            b.t, b.k, b.tri = t, k, i
            hit = True
            if any_hit:
                return True
        i += 1
    return hit


def test_now(sc, link, mesh) -> bool:
    if not is_leaf(link):
        return False
    if mesh >= 0:
        return True
    k = leaf_first(link)
    return k >= sc.ngeom or sc.info[k][INFO_TYPE] != MESH


def test_leaf(sc, w, link, mesh, r: Ray, b: Best, any_hit: bool) -> bool:
    if mesh >= 0:
        return test_triangles(sc, link, mesh, r, b, any_hit)
    k = leaf_first(link)
    return leaf_count(link) > 0 and k < sc.ngeom and test_primitive(sc, w, k, r.o, r.d, b)


def trace(sc, w, top, o, d, tmax, any_hit: bool) -> Best:
    """bvh.h ``trace``: the nearest hit (any_hit: the first found) of the world ray (o, d)
    in world w nearer than tmax; top: the world's refit top-level boxes [Nt][12]."""
    b = Best(tmax)
    for u in range(sc.nunbounded):
        k = sc.unbounded[u]
        if k >= 0 and k < sc.ngeom and test_primitive(sc, w, k, o, d, b) and any_hit:
            return b
    stack = []
    world = (o, d)  # the world ray, read back when a mesh is left
    r = Ray(o, d)
    mesh = -1
    node = 0 if sc.ntop > 0 else K_MARKER
    for _ in range(K_MAX_VISITS):
        if node == K_MARKER:  # back from a mesh (or nothing to walk)
            mesh = -1
            r = Ray(*world)
        elif not is_leaf(node):  # an internal node of the current level
            in_world = mesh < 0
            n = sc.ntop if in_world else sc.nnode
            links = sc.top_links if in_world else sc.bvh_links
            if node < n:
                row = top[node] if in_world else sc.bvh_boxes[node]
                la, lc = links[node]
                ta = box_entry(r, row[0:3], row[3:6], b.t) if (is_leaf(la) or node < la < n) else K_INF
                tc = box_entry(r, row[6:9], row[9:12], b.t) if (is_leaf(lc) or node < lc < n) else K_INF
                if ta < K_INF and test_now(sc, la, mesh):
                    if test_leaf(sc, w, la, mesh, r, b, any_hit) and any_hit:
                        return b
                    ta = K_INF
                if tc < K_INF and test_now(sc, lc, mesh):
                    if test_leaf(sc, w, lc, mesh, r, b, any_hit) and any_hit:
                        return b
                    tc = K_INF
                if ta > b.t:  # a leaf tested above may have found a nearer hit
                    ta = K_INF
                if tc > b.t:
                    tc = K_INF
                if ta < K_INF and tc < K_INF:
                    a_first = ta <= tc
                    if len(stack) < K_STACK:
                        stack.append(lc if a_first else la)
                    node = la if a_first else lc
                    continue
                if ta < K_INF or tc < K_INF:
                    node = la if ta < K_INF else lc
                    continue
        elif mesh < 0:  # a top-level leaf of a mesh: enter its frame
            k = leaf_first(node)
            root = sc.info[k][INFO_ROOT] if k < sc.ngeom else -1
            if 0 <= root < sc.nnode and len(stack) < K_STACK:
                loc = to_local(sc, w, k, r.o, r.d)
                if loc is not None:
                    stack.append(K_MARKER)
                    mesh = k
                    r = Ray(*loc)
                    node = root
                    continue
        if not stack:
            break
        node = stack.pop()
    return b


def hit_normal(sc, w, o, d, b: Best):
    R = sc.mat(w, b.k)
    if b.tri >= 0:
        nl = tri_normal(sc.tris[b.tri])
    else:
        xp, P = sc.pos(w, b.k), sc.param[b.k]
        nl = hit_primitive(sc.info[b.k][INFO_TYPE], matTvec(R, sub(o, xp)), matTvec(R, d),
                           P[PARAM_SIZE:PARAM_SIZE + 3])[1]
    n = normalize(matvec(R, nl))
    if dot(n, d) > 0:
        n = mul(n, -ONE)
    return n


# --- the top level's refit (bvh.h) ---------------------------------------------------

def empty_box(b, at):
    for i in range(6):
        b[at + i] = K_INF


def union_box(b, at, c, cat):
    if c[cat] >= K_INF:
        return
    first = b[at] >= K_INF
    for e in range(3):
        b[at + e] = c[cat + e] if first else np.fmin(b[at + e], c[cat + e])
        b[at + 3 + e] = c[cat + 3 + e] if first else np.fmax(b[at + 3 + e], c[cat + 3 + e])


def geom_box(sc, w, k, out, at):
    P = sc.param[k]
    gtype, root = sc.info[k][INFO_TYPE], sc.info[k][INFO_ROOT]
    rb = P[PARAM_RBOUND]
    c, h = (ZERO, ZERO, ZERO), (rb, rb, rb)
    if gtype == SPHERE:
        h = (P[0], P[0], P[0])
    if gtype == CAPSULE:
        h = (P[0], P[0], P[1] + P[0])
    if gtype == CYLINDER:
        h = (P[0], P[0], P[1])
    if gtype in (ELLIPSOID, BOX):
        h = (P[0], P[1], P[2])
    if gtype == MESH and 0 <= root < sc.nnode:
        m = [ZERO] * 6
        empty_box(m, 0)
        row = sc.bvh_boxes[root]
        union_box(m, 0, row, 0)
        union_box(m, 0, row, 6)
        if m[0] < K_INF:
            c = (F32(0.5) * (m[0] + m[3]), F32(0.5) * (m[1] + m[4]), F32(0.5) * (m[2] + m[5]))
            h = (F32(0.5) * (m[3] - m[0]), F32(0.5) * (m[4] - m[1]), F32(0.5) * (m[5] - m[2]))
    xp, R = sc.pos(w, k), sc.mat(w, k)
    cw = add(xp, matvec(R, c))
    A = [abs(x) for x in R]
    hw = (A[0] * h[0] + A[1] * h[1] + A[2] * h[2], A[3] * h[0] + A[4] * h[1] + A[5] * h[2],
          A[6] * h[0] + A[7] * h[1] + A[8] * h[2])
    big = np.fmax(np.fmax(hw[0], hw[1]), hw[2])
    dist = np.fmax(np.fmax(abs(cw[0]), abs(cw[1])), abs(cw[2]))
    pad = F32(1e-3) * big + F32(1e-5) * dist + F32(1e-6)
    for e in range(3):
        out[at + e] = cw[e] - (hw[e] + pad)
        out[at + 3 + e] = cw[e] + (hw[e] + pad)


def refit_leaves(sc, w, j, boxes):
    row = boxes[j]
    for i in range(2):
        link = sc.top_links[j][i]
        if not is_leaf(link):
            continue
        k = leaf_first(link)
        if w >= 0 and leaf_count(link) > 0 and k < sc.ngeom:
            geom_box(sc, w, k, row, 6 * i)
        else:
            empty_box(row, 6 * i)


def refit_unions(sc, j, boxes):
    row = boxes[j]
    for i in range(2):
        link = sc.top_links[j][i]
        if is_leaf(link):
            continue
        empty_box(row, 6 * i)
        if link <= j or link >= sc.ntop:
            continue
        kid = boxes[link]
        union_box(row, 6 * i, kid, 0)
        union_box(row, 6 * i, kid, 6)


# --- pixel.h ---------------------------------------------------------------------------

def cell_index(x) -> int:
    f = np.floor(x)
    return int(f) if (f >= -1073741824.0 and f <= 1073741824.0) else 0


def shadowed_lights(sc, w, top, p, n, t) -> int:
    mask = 0
    so = add(p, mul(n, F32(1e-4) * np.fmax(ONE, t)))
    for l in range(min(sc.nlight, MAX_LIGHTS)):
        L = sc.lights[l]
        ld = (L[0], L[1], L[2])
        if L[9] > 0 and -dot(n, ld) > 0 and trace(sc, w, top, so, mul(ld, -ONE), K_INF, True).k >= 0:
            mask |= 1 << l
    return mask


def shade(sc, w, top, o, d, b: Best, shadows: bool, cm):
    n = hit_normal(sc, w, o, d, b)
    p = add(o, mul(d, b.t))
    hidden = shadowed_lights(sc, w, top, p, n, b.t) if shadows else 0
    H = sc.headlight
    hd = np.fmax(ZERO, dot(n, (cm[2], cm[5], cm[8])))  # MuJoCo's headlight: along the camera's axis
    light = (H[0] + H[3] * hd, H[1] + H[4] * hd, H[2] + H[5] * hd)
    for l in range(sc.nlight):
        L = sc.lights[l]
        light = add(light, (L[3], L[4], L[5]))
        diff = np.fmax(ZERO, -dot(n, (L[0], L[1], L[2])))
        if diff <= 0 or (l < MAX_LIGHTS and (hidden >> l) & 1):
            continue
        light = add(light, mul((L[6], L[7], L[8]), diff))
    P = sc.param[b.k]
    base = tuple(P[PARAM_RGB:PARAM_RGB + 3])
    cell = P[PARAM_CHECKER]
    if cell > 0:  # checkered plane: cells in the plane's local frame
        pl = matTvec(sc.mat(w, b.k), sub(p, sc.pos(w, b.k)))
        if (cell_index(pl[0] / cell) + cell_index(pl[1] / cell)) & 1:
            base = tuple(P[PARAM_RGB2:PARAM_RGB2 + 3])
    return (base[0] * light[0], base[1] * light[1], base[2] * light[2])


def camera_ray(px, py, sx, sy, n, width, height, tan_half_fovy):
    w, h = F32(width * n), F32(height * n)
    hh = tan_half_fovy
    hw = hh * (w / h)
    u = (F32(px * n + sx) + F32(0.5)) / w
    v = (F32(py * n + sy) + F32(0.5)) / h
    return normalize((-hw + F32(2.0) * hw * u, hh - F32(2.0) * hh * v, -ONE))


def to_u8(c) -> int:
    c = (c if c < 1 else ONE) if c > 0 else ZERO
    return int(c * F32(255.0) + F32(0.5))


def tile_pixels(v) -> int:
    return v.npix if v.npix > 0 else v.height * v.width


def tile_world(v, t, nworld) -> int:
    s = t // v.ncam
    w = v.worlds[s] if s < v.nsel else -1
    return w if 0 <= w < nworld else -1


def rgb_index(v, t, q, py, px) -> int:
    """Byte offset / 3 of pixel q of tile t in the flat rgb output (pixel.h rgb_at)."""
    if v.mosaic_cols > 0:
        row, col = t // v.mosaic_cols, t % v.mosaic_cols
        return (row * v.height + py) * (v.mosaic_cols * v.width) + col * v.width + px
    return t * tile_pixels(v) + q


def clear_pixel(v, t, q, py, px):
    if v.rgb is not None:
        v.rgb[rgb_index(v, t, q, py, px)] = (0, 0, 0)
    if t < v.nsel * v.ncam:
        at = t * tile_pixels(v) + q
        if v.depth is not None:
            v.depth[at] = 0.0
        if v.seg is not None:
            v.seg[at] = -1


def _fmaxf(a, b):
    """C's fmaxf/fminf: a NaN argument loses."""
    return b if np.isnan(a) else (a if np.isnan(b) else max(a, b))


def _fminf(a, b):
    return b if np.isnan(a) else (a if np.isnan(b) else min(a, b))


def background(sc, d):
    """pixel.h ``background``: the sky looking up blended into the one looking down."""
    B = sc.background
    up = _fminf(_fmaxf(F32(0.5) + F32(0.5) * d[2], ZERO), ONE)
    return tuple(B[3 + i] + (B[i] - B[3 + i]) * up for i in range(3))


def render_pixel(sc, v, t, w, q, py, px):
    acc = [ZERO, ZERO, ZERO]
    n = v.samples
    for sy in range(n):
        for sx in range(n):
            c = t % v.ncam
            cp = v.cam_pos[w][c]
            dc = camera_ray(px, py, sx, sy, n, v.width, v.height, v.tan_half_fovy[c])
            d = matvec(v.cam_mat[w][c], dc)
            planar = -dc[2]
            top = v.top_boxes[t // v.ncam] if sc.ntop > 0 else None
            b = trace(sc, w, top, cp, d, K_INF, False)
            if b.k >= 0 and v.zfar > 0 and b.t * planar > v.zfar:  # beyond the far plane
                b.k = -1
            if sx == 0 and sy == 0:  # depth and seg from the first sub-sample
                i = t * tile_pixels(v) + q
                if v.depth is not None:
                    v.depth[i] = b.t * planar if b.k >= 0 else ZERO
                if v.seg is not None:
                    v.seg[i] = sc.geom_ids[b.k] if b.k >= 0 else -1
            if v.rgb is not None and b.k < 0:
                col = background(sc, d)
                acc = [acc[0] + col[0], acc[1] + col[1], acc[2] + col[2]]
            if v.rgb is not None and b.k >= 0:
                col = shade(sc, w, top, cp, d, b, v.shadows, v.cam_mat[w][c])
                acc = [acc[0] + col[0], acc[1] + col[1], acc[2] + col[2]]
    if v.rgb is None:
        return
    inv = ONE / F32(n * n)
    v.rgb[rgb_index(v, t, q, py, px)] = (to_u8(acc[0] * inv), to_u8(acc[1] * inv), to_u8(acc[2] * inv))


# --- render_tiles.cuh: the plan, block_pixel and the kernels --------------------------

class Plan:
    """kernels::RenderPlan (plan_render_tiles)."""

    def __init__(self, tiles, H, Wd, P, S):
        T = launch_plan.RENDER_THREADS
        self.tiles, self.threads = tiles, T
        if P > 0:
            self.blocks_x = self.blocks_y = 0
            self.blocks = cdiv(tiles * P, T)
        else:
            self.blocks_x, self.blocks_y = cdiv(Wd, launch_plan.RENDER_TILE_W), cdiv(H, launch_plan.RENDER_TILE_H)
            self.blocks = tiles * self.blocks_x * self.blocks_y
        self.refit_blocks, self.refit_threads = S, launch_plan.REFIT_THREADS


def block_pixel(p: Plan, v, block, thread):
    """(t, q, py, px) of a thread, or None past the image's edge or the list's end."""
    if v.npix > 0:
        i = block * launch_plan.RENDER_THREADS + thread
        if i // v.npix >= p.tiles:
            return None
        t, q = i // v.npix, i % v.npix
        pid = v.pixels[q]
        return t, q, _cdiv_trunc(pid, v.width), _cmod_trunc(pid, v.width)
    per = p.blocks_x * p.blocks_y
    t = block // per
    by, bx = (block % per) // p.blocks_x, block % p.blocks_x
    warp, lane = thread // 32, thread % 32
    ww, wh = 8, 4  # kWarpW, kWarpH
    px = bx * launch_plan.RENDER_TILE_W + (warp % 2) * ww + lane % ww
    py = by * launch_plan.RENDER_TILE_H + (warp // 2) * wh + lane // ww
    if px < v.width and py < v.height:
        return t, py * v.width + px, py, px
    return None


def _cdiv_trunc(a, b):  # C's integer division (truncates towards 0)
    return int(a / b) if (a < 0) != (b < 0) else a // b


def _cmod_trunc(a, b):
    return a - b * _cdiv_trunc(a, b)


def _refit_leaves_phase(ctx, sc, v):
    s = ctx.blockIdx.x
    w = v.worlds[s] if s < v.nsel else -1
    world = w if 0 <= w < sc.nworld else -1
    j = ctx.threadIdx.x
    while j < sc.ntop:
        refit_leaves(sc, world, j, v.top_boxes[s])
        j += ctx.blockDim.x


def _refit_unions_phase(ctx, sc, v):
    if ctx.threadIdx.x == 0:
        for j in range(sc.ntop - 1, -1, -1):
            refit_unions(sc, j, v.top_boxes[ctx.blockIdx.x])


def _render_tiles_kernel(ctx, sc, v, p):
    at = block_pixel(p, v, ctx.blockIdx.x, ctx.threadIdx.x)
    if at is None:
        return
    t, q, py, px = at
    w = tile_world(v, t, sc.nworld)
    if w < 0:
        clear_pixel(v, t, q, py, px)
    else:
        render_pixel(sc, v, t, w, q, py, px)


# --- the kernels' arguments (render_args.cpp make_scene / make_view) ------------------

def _f32(t) -> np.ndarray:
    return np.asarray(torch.as_tensor(t).detach().cpu().to(torch.float32).numpy(), dtype=F32)


def _rows(t, cols) -> list:
    """float32 [N, cols] as lists of numpy float32 scalars (every operation rounds to float32)."""
    a = _f32(t).reshape(-1, cols)
    return [[F32(x) for x in row] for row in a.tolist()]


def _ints(t) -> list:
    return torch.as_tensor(t).detach().cpu().to(torch.int64).tolist()


class SceneArgs:
    """render::Scene: the packed scene and the per-world poses."""

    def __init__(self, geom_xpos, geom_xmat, scene):
        W = geom_xpos.shape[0]
        self.nworld = W
        self.xpos = [[tuple(F32(x) for x in g) for g in wl] for wl in _f32(geom_xpos).reshape(W, -1, 3).tolist()]
        self.xmat = [[tuple(F32(x) for x in g) for g in wl] for wl in _f32(geom_xmat).reshape(W, -1, 9).tolist()]
        self.geom_ids = _ints(scene.geom_ids)
        self.info = _ints(scene.geom_info)
        self.param = _rows(scene.geom_param, 12)
        self.bvh_boxes = _rows(scene.bvh_boxes, BOX_COLS)
        self.bvh_links = _ints(scene.bvh_links)
        self.tris = _rows(scene.tris, 12)
        self.top_links = _ints(scene.top_links)
        self.unbounded = _ints(scene.unbounded)
        self.lights = _rows(scene.lights, 10)
        self.headlight = [F32(x) for x in _f32(scene.headlight).tolist()]
        self.background = [F32(x) for x in _f32(scene.background).tolist()]
        self.ngeom, self.nnode, self.ntri = len(self.geom_ids), len(self.bvh_boxes), len(self.tris)
        self.ntop, self.nunbounded, self.nlight = len(self.top_links), len(self.unbounded), len(self.lights)

    def pos(self, w, k):
        return self.xpos[w][self.geom_ids[k]]

    def mat(self, w, k):
        return self.xmat[w][self.geom_ids[k]]


class ViewArgs:
    """render::View: selection, cameras, pixels and the outputs (flat Python lists)."""


def _cameras(cam_pos, cam_mat):
    cam_pos = cam_pos.unsqueeze(1) if cam_pos.dim() == 2 else cam_pos
    cam_mat = cam_mat.reshape(cam_mat.shape[0], cam_pos.shape[1], 9)
    W, C = cam_pos.shape[:2]
    pos = [[tuple(F32(x) for x in c) for c in wl] for wl in _f32(cam_pos).reshape(W, C, 3).tolist()]
    mat = [[tuple(F32(x) for x in c) for c in wl] for wl in _f32(cam_mat).reshape(W, C, 9).tolist()]
    return pos, mat, C


def refit_top(geom_xpos, geom_xmat, worlds, scene, threads: int = launch_plan.REFIT_THREADS):
    """Grid emulation of ``refit_top_kernel``: float32 [S, Nt, 12] boxes of the selected
    worlds (render_tiles' ``top_boxes`` workspace). ``threads`` other than the plan's
    (32) only to exercise other block sizes."""
    sc = SceneArgs(geom_xpos, geom_xmat, scene)
    v = ViewArgs()
    v.worlds = _ints(worlds)
    v.nsel = len(v.worlds)
    v.top_boxes = [[[F32(1234.5)] * BOX_COLS for _ in range(sc.ntop)] for _ in range(v.nsel)]  # poisoned
    with np.errstate(all="ignore"):
        _refit(sc, v, threads)
    return torch.tensor(np.asarray(v.top_boxes, dtype=F32).reshape(v.nsel, sc.ntop, BOX_COLS))


def _refit(sc, v, threads):
    if sc.ntop > 0 and v.nsel > 0:
        launch([_refit_leaves_phase, _refit_unions_phase], v.nsel, threads, sc, v)


def render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width,
                 samples=1, shadows=False, zfar=None, mosaic_cols=0, pixels=None, rgb=True, depth=True,
                 seg=True):
    """Grid emulation of the render kernels (the top-level refit, then the pixels), with
    render_tiles' arguments (cam_pos [W, C, 3] or [W, 3]; fovy a number or one per
    camera; ``pixels`` a pixel-id list). Returns (rgb, depth, seg): rgb uint8
    [S, C, H, Wd, 3] (pixel list: [S, C, P, 3]; mosaic_cols > 0: the mosaic
    [rows * H, cols * Wd, 3]), depth float32 and seg int32 [S, C, H, Wd] ([S, C, P]),
    without the C dim when cam_pos is [W, 3] (as the float64 reference); an output not
    requested (rgb/depth/seg False) is None. Outputs start poisoned: the kernels must
    write every element."""
    one = cam_pos.dim() == 2
    sc = SceneArgs(geom_xpos, geom_xmat, scene)
    v = ViewArgs()
    v.worlds = _ints(worlds)
    v.nsel = len(v.worlds)
    v.cam_pos, v.cam_mat, C = _cameras(cam_pos, cam_mat)
    v.ncam = C
    fov = [float(f) for f in fovy] if isinstance(fovy, (list, tuple)) else [float(fovy)] * C
    if not 1 <= C <= MAX_CAMS or len(fov) != C:
        raise ValueError(f"1 to {MAX_CAMS} cameras and one fovy each, got {C} cameras and fovy {fov}")
    v.tan_half_fovy = [F32(math.tan(0.5 * f * math.pi / 180.0)) for f in fov]
    v.height, v.width = int(height), int(width)
    v.pixels = _ints(pixels) if pixels is not None else []
    v.npix = len(v.pixels)
    if v.npix and mosaic_cols:
        raise ValueError("a pixel list cannot be drawn into a mosaic")
    v.zfar = F32(scene.zfar if zfar is None else zfar)
    v.samples, v.shadows, v.mosaic_cols = int(samples), bool(shadows), int(mosaic_cols) if rgb else 0
    S, H, Wd, P = v.nsel, v.height, v.width, v.npix
    T = S * C
    tiles = cdiv(T, v.mosaic_cols) * v.mosaic_cols if v.mosaic_cols else T
    per = P if P else H * Wd
    rgb_px = (tiles // v.mosaic_cols) * H * v.mosaic_cols * Wd if v.mosaic_cols else T * per
    v.rgb = [(77, 77, 77)] * rgb_px if rgb else None  # poisoned
    v.depth = [F32(-7.0)] * (T * per) if depth else None
    v.seg = [-99] * (T * per) if seg else None
    v.top_boxes = [[[F32(1234.5)] * BOX_COLS for _ in range(sc.ntop)] for _ in range(S)]  # poisoned
    plan = Plan(tiles, H, Wd, P, S)
    with np.errstate(all="ignore"):  # float32 overflow to inf and NaN as on the device, silently
        if S > 0 and plan.blocks > 0:
            _refit(sc, v, plan.refit_threads)
            launch(_render_tiles_kernel, plan.blocks, plan.threads, sc, v, plan)
    img = (S, C, P) if P else (S, C, H, Wd)
    out_rgb = None
    if rgb:
        out_rgb = torch.tensor(v.rgb, dtype=torch.uint8)
        out_rgb = (out_rgb.view(tiles // v.mosaic_cols * H, v.mosaic_cols * Wd, 3) if v.mosaic_cols
                   else out_rgb.view(*img, 3))
    out_depth = torch.tensor(np.asarray(v.depth, dtype=F32)).view(img) if depth else None
    out_seg = torch.tensor(v.seg, dtype=torch.int32).view(img) if seg else None
    if one:
        out_rgb = out_rgb[:, 0] if (out_rgb is not None and not v.mosaic_cols) else out_rgb
        out_depth = out_depth[:, 0] if out_depth is not None else None
        out_seg = out_seg[:, 0] if out_seg is not None else None
    return out_rgb, out_depth, out_seg
