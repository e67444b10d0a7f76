"""Grid emulation of ``render_tiles_kernel`` (csrc/cuda/render_tiles.cu), thread by thread.

The per-thread flow mirrors ``refit_top``, ``render_pixel``/``trace``/``shade`` and
``traverse``/``hit_mesh`` in csrc/kernels/render_tiles.h and render_geoms.h line by line:
the top-level refit (one thread per tile, bottom-up), index decomposition, camera
ray, unbounded geoms then the top-level BVH, bounding-sphere reject, world-to-local
transform, BVH traversal with an explicit stack, nearest-hit selection, zfar test,
lighting, quantization and the output addressing (tiles or mosaic). The closed-form geom intersections are the
reference's (flycuda/reference/render.py) applied to one ray. Python per pixel:
tiny images only.
"""

from __future__ import annotations

import math

import torch

from .grid import cdiv, launch
from .render import INF, _hit_local

F64 = torch.float64
K_INF = 3.0e38  # render_geoms.h kInf: an empty box is the point (kInf, kInf, kInf)
K_STACK, K_TOP_STACK = 64, 32  # render_geoms.h kStack, kTopStack


def _v(x):
    return torch.as_tensor(x, dtype=F64).reshape(3)


def _node_entry(o, d, bounds, node, tmax):
    """render_geoms.h ``node_entry``: the slab test with per-axis reciprocals."""
    if not 0 <= node < len(bounds):
        return INF
    b, oo, dd = bounds[node].tolist(), o.tolist(), d.tolist()
    tn, tf = -INF, INF
    for k in range(3):
        if dd[k] == 0:
            if oo[k] < b[k] or oo[k] > b[3 + k]:
                return INF
            continue
        inv = 1.0 / dd[k]
        t1, t2 = (b[k] - oo[k]) * inv, (b[3 + k] - oo[k]) * inv
        tn, tf = max(tn, min(t1, t2)), min(tf, max(t1, t2))
    if tn > tf or tf < 1e-6 or tn > tmax:
        return INF
    return tn


def _traverse(o, d, bounds, index, root, best, leaf, depth=K_STACK):
    """render_geoms.h ``traverse``: nearer child first, entries kept on a stack of
    ``depth``; best["t"] is the current hit distance; leaf(first, count) returns True to stop."""
    t_root = _node_entry(o, d, bounds, root, best["t"])
    stack = [(root, t_root)] if t_root < INF else []
    while stack:
        node, entry = stack.pop()
        if entry > best["t"]:
            continue
        a, c = int(index[node, 0]), int(index[node, 1])
        if c < 0:
            if leaf(a, -c):
                return
            continue
        ta = _node_entry(o, d, bounds, a, best["t"]) if a > node else INF  # links back: skipped
        tc = _node_entry(o, d, bounds, c, best["t"]) if c > node else INF
        (near, t_near), (far, t_far) = ((a, ta), (c, tc)) if ta <= tc else ((c, tc), (a, ta))
        if t_far < INF and len(stack) < depth:
            stack.append((far, t_far))
        if t_near < INF and len(stack) < depth:
            stack.append((near, t_near))


def _hit_mesh(o, d, root, bounds, index, tris, tmax, any_hit):
    """render_geoms.h ``hit_mesh``."""
    best = {"t": tmax, "n": _v([0, 0, 1])}

    def leaf(first, count):
        for k in range(first, first + count):
            t, n = _hit_local(7, o[None], d[None], None, tris[k:k + 1])
            if float(t[0]) < best["t"]:
                best["t"], best["n"] = float(t[0]), n[0]
                if any_hit:
                    return True
        return False

    _traverse(o, d, bounds, index, root, best, leaf)
    return best["t"], best["n"]


def _geom_box(sc, w, k):
    """render_tiles.h ``geom_box``: the padded world box of render-list geom k."""
    P, (gtype, root) = sc["param"][k], sc["info"][k].tolist()
    c, h = _v([0, 0, 0]), P[10].repeat(3)
    if gtype == 2:
        h = P[0].repeat(3)
    elif gtype == 3:
        h = _v([P[0], P[0], P[1] + P[0]])
    elif gtype == 5:
        h = _v([P[0], P[0], P[1]])
    elif gtype in (4, 6):
        h = P[0:3].clone()
    elif gtype == 7 and 0 <= root < len(sc["bounds"]):
        lo, hi = sc["bounds"][root, :3], sc["bounds"][root, 3:]
        c, h = (lo + hi) / 2, (hi - lo) / 2
    g = int(sc["ids"][k])
    R = sc["xmat"][w, g].view(3, 3)
    cw, hw = sc["xpos"][w, g] + R @ c, R.abs() @ h
    pad = 1e-3 * float(hw.max()) + 1e-5 * float(cw.abs().max()) + 1e-6
    return torch.cat([cw - (hw + pad), cw + (hw + pad)])


def _refit_top_kernel(ctx, sc, worlds, top, S):
    """render_tiles.cuh ``refit_top_kernel``: tile s's top-level boxes, bottom-up."""
    s = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if s >= S:
        return
    W, nt, ng = sc["xpos"].shape[0], len(sc["top_index"]), len(sc["ids"])
    w = int(worlds[s]) if 0 <= int(worlds[s]) < W else -1
    for j in range(nt - 1, -1, -1):
        top[s, j] = K_INF  # empty
        if w < 0:
            continue
        a, c = sc["top_index"][j].tolist()
        if c < 0:
            if 0 <= a < ng:
                top[s, j] = _geom_box(sc, w, a)
            continue
        for kid in (a, c):
            if j < kid < nt and not top[s, kid, 0] >= K_INF:  # fmin/fmax: NaN dropped, as fminf/fmaxf
                first = bool(top[s, j, 0] >= K_INF)
                top[s, j, :3] = top[s, kid, :3] if first else torch.fmin(top[s, j, :3], top[s, kid, :3])
                top[s, j, 3:] = top[s, kid, 3:] if first else torch.fmax(top[s, j, 3:], top[s, kid, 3:])


def _test_geom(sc, w, k, o, d, any_hit, r):
    """render_tiles.h ``test_geom``: r = {"k", "t", "n"} takes a nearer hit of geom k, or
    one as near when k comes earlier in the render list (ties resolve in list order)."""
    g = int(sc["ids"][k])
    P = sc["param"][k]
    c = sc["xpos"][w, g]
    rbound = float(P[10])
    if rbound > 0:
        oc = o - c
        b, cc = float(oc @ d), float(oc @ oc) - rbound * rbound
        if cc > 0 and (b > 0 or b * b < cc):
            return False
    R = sc["xmat"][w, g].view(3, 3)
    ol, dl = (o - c) @ R, d @ R
    gtype, root = int(sc["info"][k, 0]), int(sc["info"][k, 1])
    if gtype == 7:
        tmax = math.nextafter(r["t"], INF)  # one float past r.t: a mesh's tie gets through
        t, n = _hit_mesh(ol, dl, root, sc["bounds"], sc["index"], sc["tris"], tmax, any_hit)
    else:
        tt, nn = _hit_local(gtype, ol[None], dl[None], P[0:3], None)
        t, n = float(tt[0]), nn[0]
    if not (t < r["t"] or (t == r["t"] and k < r["k"])):
        return False
    r["k"], r["t"], r["n"] = k, t, R @ n
    return True


def _trace(sc, w, top, o, d, any_hit):
    r = {"k": -1, "t": INF, "n": _v([0, 0, 1])}
    if top is not None:
        stop = False
        for k in sc["unbounded"].tolist():
            if not stop and 0 <= k < len(sc["ids"]):
                stop = _test_geom(sc, w, k, o, d, any_hit, r) and any_hit
        if not stop:
            _traverse(o, d, top, sc["top_index"], 0, r,
                      lambda first, count: any(_test_geom(sc, w, k, o, d, any_hit, r) and any_hit
                                               for k in range(first, first + count) if 0 <= k < len(sc["ids"])),
                      K_TOP_STACK)
    else:
        for k in range(len(sc["ids"])):
            if _test_geom(sc, w, k, o, d, any_hit, r) and any_hit:
                break
    k_best, t_best, n_best = r["k"], r["t"], r["n"]
    if k_best >= 0:
        n_best = n_best / n_best.norm()
        if float(n_best @ d) > 0:
            n_best = -n_best
    return k_best, t_best, n_best


def _shade(sc, w, top, o, d, k, t, n, shadows):
    P = sc["param"][k]
    base = P[3:6].clone()
    p = o + d * t
    if P[9] > 0:
        g = int(sc["ids"][k])
        pl = (p - sc["xpos"][w, g]) @ sc["xmat"][w, g].view(3, 3)
        if (math.floor(pl[0] / P[9]) + math.floor(pl[1] / P[9])) % 2:
            base = P[6:9].clone()
    H = sc["headlight"]
    light = H[0:3] + H[3:6] * max(0.0, -float(n @ d))
    for L in sc["lights"]:
        light = light + L[3:6]
        diff = max(0.0, -float(n @ L[0:3]))
        if diff <= 0:
            continue
        if shadows and L[9] > 0:
            so = p + n * (1e-4 * max(1.0, t))
            if _trace(sc, w, top, so, -L[0:3], True)[0] >= 0:
                continue
        light = light + L[6:9] * diff
    return base * light


def _rgb_at(out, s, py, px, H, Wd):
    if out["cols"] > 0:
        row, col = s // out["cols"], s % out["cols"]
        return row * H + py, col * Wd + px
    return s, py, px


def _render_tiles_kernel(ctx, sc, out, worlds, cam_pos, cam_mat, S, H, Wd, th, zfar, n, shadows, tiles, top):
    idx = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if idx >= tiles * H * Wd:
        return
    px, py, s = idx % Wd, (idx // Wd) % H, idx // (Wd * H)
    if s >= S:  # an empty mosaic cell
        out["rgb"][_rgb_at(out, s, py, px, H, Wd)] = 0
        return
    w = int(worlds[s])
    top = None if top is None else top[s]
    o = cam_pos[w].to(F64)
    Rc = cam_mat[w].to(F64).view(3, 3)
    acc = torch.zeros(3, dtype=F64)
    for sy in range(n):
        for sx in range(n):
            hh, hw = th, th * (Wd * n) / (H * n)
            u, v = (px * n + sx + 0.5) / (Wd * n), (py * n + sy + 0.5) / (H * n)
            dc = _v([-hw + 2 * hw * u, hh - 2 * hh * v, -1.0])
            dc = dc / dc.norm()
            d = Rc @ dc
            k, t, nrm = _trace(sc, w, top, o, d, False)
            if k >= 0 and zfar > 0 and t * -float(dc[2]) > zfar:
                k = -1
            if sx == 0 and sy == 0:
                out["depth"][s, py, px] = t * -float(dc[2]) if k >= 0 else 0.0
                out["seg"][s, py, px] = int(sc["ids"][k]) if k >= 0 else -1
            if k >= 0:
                acc += _shade(sc, w, top, o, d, k, t, nrm, shadows)
    c = torch.nan_to_num(acc / (n * n), nan=0.0).clamp(0, 1)  # NaN -> 0, as to_u8
    out["rgb"][_rgb_at(out, s, py, px, H, Wd)] = (c * 255 + 0.5).floor().to(torch.uint8)


def _scene_arrays(geom_xpos, geom_xmat, scene) -> dict:
    """The Scene struct of the kernels, as float64 CPU tensors."""
    return {"xpos": geom_xpos.cpu().to(F64), "xmat": geom_xmat.cpu().reshape(*geom_xmat.shape[:2], 9).to(F64),
            "ids": scene.geom_ids.cpu(), "info": scene.geom_info.cpu(), "param": scene.geom_param.cpu().to(F64),
            "bounds": scene.bvh_bounds.cpu().to(F64), "index": scene.bvh_index.cpu(),
            "tris": scene.tris.cpu().to(F64), "lights": scene.lights.cpu().to(F64),
            "top_index": scene.top_index.cpu(), "unbounded": scene.unbounded.cpu(),
            "headlight": scene.headlight.cpu().to(F64)}


def _refit(sc, worlds, threads):
    S = len(worlds)
    top = torch.empty(S, len(sc["top_index"]), 6, dtype=F64)
    launch(_refit_top_kernel, cdiv(S, threads), threads, sc, torch.as_tensor(worlds), top, S)
    return top


def refit_top(geom_xpos, geom_xmat, worlds, scene, threads=4):
    """Grid emulation of the top-level refit kernel: float64 [S, Nt, 6] boxes of the
    selected worlds (render_tiles' ``top_bounds``)."""
    return _refit(_scene_arrays(geom_xpos, geom_xmat, scene), worlds, threads)


def render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width,
                 samples=1, shadows=False, zfar=None, mosaic_cols=0, threads=16, top_level=True):
    """Grid emulation of the render kernels (the top-level refit unless ``top_level``
    is False, then the pixels); returns (rgb, depth, seg) like the reference."""
    S = len(worlds)
    sc = _scene_arrays(geom_xpos, geom_xmat, scene)
    rows = cdiv(S, mosaic_cols) if mosaic_cols else 0
    tiles = rows * mosaic_cols if mosaic_cols else S
    out = {"cols": mosaic_cols,
           "rgb": torch.full((rows * height, mosaic_cols * width, 3) if mosaic_cols else (S, height, width, 3),
                              77, dtype=torch.uint8),  # poisoned: the kernel writes every byte
           "depth": torch.zeros(S, height, width), "seg": torch.full((S, height, width), -1, dtype=torch.int32)}
    th = math.tan(0.5 * math.radians(fovy))
    top = _refit(sc, worlds, threads) if top_level and len(sc["top_index"]) else None
    launch(_render_tiles_kernel, cdiv(tiles * height * width, threads), threads, sc, out,
           torch.as_tensor(worlds), cam_pos.cpu().reshape(-1, 3), cam_mat.cpu().reshape(-1, 9), S, height,
           width, th, scene.zfar if zfar is None else zfar, samples, shadows, tiles, top)
    return out["rgb"], out["depth"], out["seg"]
