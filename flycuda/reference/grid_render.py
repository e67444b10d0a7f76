"""Grid emulation of ``render_tiles_kernel`` (csrc/cuda/render_tiles.cu), thread by thread.

The per-thread flow mirrors ``render_pixel``/``trace``/``shade``/``hit_mesh`` in
csrc/render_tiles.h line by line: index decomposition, camera ray, bounding-sphere
reject, world-to-local transform, BVH traversal with an explicit stack,
nearest-hit selection, zfar test, lighting, quantization and the output
addressing (tiles or mosaic). The closed-form geom intersections are the
reference's (flycuda/reference/render.py) applied to one ray. Python per pixel:
tiny images only.
"""

from __future__ import annotations

import math

import torch

from .grid import cdiv, launch
from .render import INF, _hit_local

F64 = torch.float64


def _v(x):
    return torch.as_tensor(x, dtype=F64).reshape(3)


def _slab(o, d, lo, hi, tmax):
    tn, tf = -INF, INF
    for k in range(3):
        if d[k] == 0:
            if o[k] < lo[k] or o[k] > hi[k]:
                return INF
            continue
        t1, t2 = (lo[k] - o[k]) / d[k], (hi[k] - o[k]) / d[k]
        t1, t2 = min(t1, t2), max(t1, t2)
        tn, tf = max(tn, t1), min(tf, t2)
    if tn > tf or tf < 1e-6 or tn > tmax:
        return INF
    return tn


def _node_entry(o, d, bounds, node, tmax):
    b = bounds[node].tolist()
    return _slab(o.tolist(), d.tolist(), b[:3], b[3:], tmax)


def _hit_mesh(o, d, root, bounds, index, tris, tmax, any_hit):
    """render_geoms.h ``hit_mesh``: nearer child first, entries kept on the stack."""
    best_t, best_n = tmax, _v([0, 0, 1])
    t_root = _node_entry(o, d, bounds, root, best_t)
    stack = [(root, t_root)] if t_root < INF else []
    while stack:
        node, entry = stack.pop()
        if entry > best_t:
            continue
        a, c = int(index[node, 0]), int(index[node, 1])
        if c < 0:
            for k in range(a, a - c):
                t, n = _hit_local(7, o[None], d[None], None, tris[k:k + 1])
                if float(t[0]) < best_t:
                    best_t, best_n = float(t[0]), n[0]
                    if any_hit:
                        return best_t, best_n
            continue
        ta, tc = _node_entry(o, d, bounds, a, best_t), _node_entry(o, d, bounds, c, best_t)
        (near, t_near), (far, t_far) = ((a, ta), (c, tc)) if ta <= tc else ((c, tc), (a, ta))
        if t_far < INF:
            stack.append((far, t_far))
        if t_near < INF:
            stack.append((near, t_near))
    return best_t, best_n


def _trace(sc, w, o, d, any_hit):
    k_best, t_best, n_best = -1, INF, _v([0, 0, 1])
    for k in range(len(sc["ids"])):
        g = int(sc["ids"][k])
        P = sc["param"][k]
        c = sc["xpos"][w, g]
        R = sc["xmat"][w, g].view(3, 3)
        rbound = float(P[10])
        if rbound > 0:
            oc = o - c
            b, cc = float(oc @ d), float(oc @ oc) - rbound * rbound
            if cc > 0 and (b > 0 or b * b < cc):
                continue
        ol, dl = (o - c) @ R, d @ R
        gtype, root = int(sc["info"][k, 0]), int(sc["info"][k, 1])
        if gtype == 7:
            t, n = _hit_mesh(ol, dl, root, sc["bounds"], sc["index"], sc["tris"], t_best, any_hit)
        else:
            tt, nn = _hit_local(gtype, ol[None], dl[None], P[0:3], None)
            t, n = float(tt[0]), nn[0]
        if t < t_best:
            k_best, t_best, n_best = k, t, R @ n
            if any_hit:
                return k_best, t_best, n_best
    if k_best >= 0:
        n_best = n_best / n_best.norm()
        if float(n_best @ d) > 0:
            n_best = -n_best
    return k_best, t_best, n_best


def _shade(sc, w, o, d, k, t, n, shadows):
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
            if _trace(sc, w, so, -L[0:3], True)[0] >= 0:
                continue
        light = light + L[6:9] * diff
    return base * light


def _rgb_at(out, s, py, px, H, Wd):
    if out["cols"] > 0:
        row, col = s // out["cols"], s % out["cols"]
        return row * H + py, col * Wd + px
    return s, py, px


def _render_tiles_kernel(ctx, sc, out, worlds, cam_pos, cam_mat, S, H, Wd, th, zfar, n, shadows, tiles):
    idx = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if idx >= tiles * H * Wd:
        return
    px, py, s = idx % Wd, (idx // Wd) % H, idx // (Wd * H)
    if s >= S:  # an empty mosaic cell
        out["rgb"][_rgb_at(out, s, py, px, H, Wd)] = 0
        return
    w = int(worlds[s])
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
            k, t, nrm = _trace(sc, w, o, d, False)
            if k >= 0 and zfar > 0 and t * -float(dc[2]) > zfar:
                k = -1
            if sx == 0 and sy == 0:
                out["depth"][s, py, px] = t * -float(dc[2]) if k >= 0 else 0.0
                out["seg"][s, py, px] = int(sc["ids"][k]) if k >= 0 else -1
            if k >= 0:
                acc += _shade(sc, w, o, d, k, t, nrm, shadows)
    c = torch.nan_to_num(acc / (n * n), nan=0.0).clamp(0, 1)  # NaN -> 0, as to_u8
    out["rgb"][_rgb_at(out, s, py, px, H, Wd)] = (c * 255 + 0.5).floor().to(torch.uint8)


def render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width,
                 samples=1, shadows=False, zfar=None, mosaic_cols=0, threads=16):
    """Grid emulation of the render kernel; returns (rgb, depth, seg) like the reference."""
    S = len(worlds)
    sc = {"xpos": geom_xpos.cpu().to(F64), "xmat": geom_xmat.cpu().reshape(*geom_xmat.shape[:2], 9).to(F64),
          "ids": scene.geom_ids.cpu(), "info": scene.geom_info.cpu(), "param": scene.geom_param.cpu().to(F64),
          "bounds": scene.bvh_bounds.cpu().to(F64), "index": scene.bvh_index.cpu(),
          "tris": scene.tris.cpu().to(F64), "lights": scene.lights.cpu().to(F64),
          "headlight": scene.headlight.cpu().to(F64)}
    rows = cdiv(S, mosaic_cols) if mosaic_cols else 0
    tiles = rows * mosaic_cols if mosaic_cols else S
    out = {"cols": mosaic_cols,
           "rgb": torch.full((rows * height, mosaic_cols * width, 3) if mosaic_cols else (S, height, width, 3),
                              77, dtype=torch.uint8),  # poisoned: the kernel writes every byte
           "depth": torch.zeros(S, height, width), "seg": torch.full((S, height, width), -1, dtype=torch.int32)}
    th = math.tan(0.5 * math.radians(fovy))
    launch(_render_tiles_kernel, cdiv(tiles * height * width, threads), threads, sc, out,
           torch.as_tensor(worlds), cam_pos.cpu().reshape(-1, 3), cam_mat.cpu().reshape(-1, 9), S, height,
           width, th, scene.zfar if zfar is None else zfar, samples, shadows, tiles)
    return out["rgb"], out["depth"], out["seg"]
