"""Vectorized float64 reference of ``flycuda.render_tiles`` (csrc/kernels/render_tiles.cuh).

Every ray of every selected world at once, intersected with every geom by
closed-form formulas, and meshes by brute force over all their triangles (no
BVH: an independent check of the kernel's BVH traversal). Same conventions,
lighting and outputs as the op. For small scenes and images.
"""

from __future__ import annotations

import math

import torch

from ..ops.scene_layout import leaf_range

EPS = 1e-6
INF = math.inf
F64 = torch.float64


def _quad_entry(a, b, c):
    disc = b * b - a * c
    ok = (a > 0) & (disc >= 0)
    t = (-b - torch.sqrt(disc.clamp(min=0))) / torch.where(a > 0, a, torch.ones_like(a))
    return torch.where(ok & (t > EPS), t, torch.full_like(t, INF))


def _sphere(o, d, c, r):
    oc = o - c
    t = _quad_entry((d * d).sum(-1), (oc * d).sum(-1), (oc * oc).sum(-1) - r * r)
    return t, oc + d * torch.nan_to_num(t, posinf=0.0)[..., None]


def _tube(o, d, r, h):
    t = _quad_entry(d[..., 0] ** 2 + d[..., 1] ** 2, o[..., 0] * d[..., 0] + o[..., 1] * d[..., 1],
                    o[..., 0] ** 2 + o[..., 1] ** 2 - r * r)
    tt = torch.nan_to_num(t, posinf=0.0)
    t = torch.where((o[..., 2] + tt * d[..., 2]).abs() <= h, t, torch.full_like(t, INF))
    p = o + d * tt[..., None]
    return t, torch.stack([p[..., 0], p[..., 1], torch.zeros_like(t)], -1)


def _nearer(a, b):
    ta, na = a
    tb, nb = b
    take = tb < ta
    return torch.where(take, tb, ta), torch.where(take[..., None], nb, na)


def _hit_local(gtype, o, d, s, tris):
    """(t [N], local normal [N, 3]) of local rays o, d [N, 3] with one geom."""
    N = o.shape[0]
    inf = torch.full((N,), INF, dtype=F64)
    up = torch.zeros(N, 3, dtype=F64)
    up[:, 2] = 1
    if gtype == 0:  # plane
        ok = (o[:, 2] > 0) & (d[:, 2] < 0)
        t = torch.where(ok, -o[:, 2] / torch.where(ok, d[:, 2], -torch.ones_like(d[:, 2])), inf)
        tt = torch.nan_to_num(t, posinf=0.0)
        x, y = o[:, 0] + tt * d[:, 0], o[:, 1] + tt * d[:, 1]
        ok = (t > EPS) & ((s[0] <= 0) | (x.abs() <= s[0])) & ((s[1] <= 0) | (y.abs() <= s[1]))
        return torch.where(ok, t, inf), up
    if gtype == 2:
        return _sphere(o, d, torch.zeros(3, dtype=F64), s[0])
    if gtype == 4:  # ellipsoid
        os_, ds = o / s, d / s
        t = _quad_entry((ds * ds).sum(-1), (os_ * ds).sum(-1), (os_ * os_).sum(-1) - 1)
        p = o + d * torch.nan_to_num(t, posinf=0.0)[:, None]
        return t, p / (s * s)
    if gtype in (3, 5):  # capsule, cylinder
        r, h = s[0], s[1]
        best = _tube(o, d, r, h)
        for side in (-1.0, 1.0):
            if gtype == 3:
                t, n = _sphere(o, d, torch.tensor([0.0, 0.0, side * h], dtype=F64), r)
                tt = torch.nan_to_num(t, posinf=0.0)
                t = torch.where(side * (o[:, 2] + tt * d[:, 2]) >= h, t, inf)
            else:
                dz = torch.where(d[:, 2] != 0, d[:, 2], torch.ones_like(d[:, 2]))
                t = (side * h - o[:, 2]) / dz
                x, y = o[:, 0] + t * d[:, 0], o[:, 1] + t * d[:, 1]
                t = torch.where((d[:, 2] != 0) & (t > EPS) & (x * x + y * y <= r * r), t, inf)
                n = up * side
            best = _nearer(best, (t, n))
        return best
    if gtype == 6:  # box
        if True:  # box: slab test
            dd = torch.where(d != 0, d, torch.full_like(d, 1e-300))
            t1, t2 = (-s - o) / dd, (s - o) / dd
            lo, hi = torch.minimum(t1, t2), torch.maximum(t1, t2)
            inside = (o.abs() <= s)
            lo = torch.where(d == 0, torch.where(inside, torch.full_like(lo, -INF), torch.full_like(lo, INF)), lo)
            hi = torch.where(d == 0, torch.where(inside, torch.full_like(hi, INF), torch.full_like(hi, -INF)), hi)
            tn, axis = lo.max(-1)
            tf = hi.min(-1).values
            ok = (tn <= tf) & (tf >= EPS) & (tn > EPS)
            n = torch.zeros(N, 3, dtype=F64)
            n[torch.arange(N), axis] = -torch.sign(d[torch.arange(N), axis])
            return torch.where(ok, tn, inf), n
    if gtype == 7:  # mesh: every triangle (packed: v0, e1, e2)
        v = tris.to(F64).view(-1, 3, 4)[:, :, :3]
        v0, e1, e2 = v[:, 0], v[:, 1], v[:, 2]
        p = torch.cross(d[:, None, :].expand(N, len(v), 3), e2[None].expand(N, -1, 3), dim=-1)
        det = (e1[None] * p).sum(-1)
        inv = 1.0 / torch.where(det.abs() < 1e-12, torch.ones_like(det), det)
        sv = o[:, None, :] - v0[None]
        u = (sv * p).sum(-1) * inv
        q = torch.cross(sv, e1[None].expand(N, -1, 3), dim=-1)
        vv = (d[:, None, :] * q).sum(-1) * inv
        t = (e2[None] * q).sum(-1) * inv
        ok = (det.abs() >= 1e-12) & (u >= 0) & (u <= 1) & (vv >= 0) & (u + vv <= 1) & (t > EPS)
        t = torch.where(ok, t, torch.full_like(t, INF))
        tmin, k = t.min(-1)
        return tmin, torch.cross(e1, e2, dim=-1)[k]
    return inf, up


def _trace(scene, xpos, xmat, o, d, any_hit=False):
    """Nearest hit of world rays (o, d) [N, 3] in one world: (k, t, unit world normal)."""
    N = o.shape[0]
    best_t = torch.full((N,), INF, dtype=F64)
    best_k = torch.full((N,), -1, dtype=torch.long)
    best_n = torch.zeros(N, 3, dtype=F64)
    info, param, gids = scene.geom_info.cpu(), scene.geom_param.cpu().to(F64), scene.geom_ids.cpu()
    for k in range(len(gids)):
        g = int(gids[k])
        c, R = xpos[g].to(F64), xmat[g].to(F64).view(3, 3)
        ol, dl = (o - c) @ R, d @ R  # R^T (o - c), R^T d
        gtype, root = int(info[k, 0]), int(info[k, 1])
        tris = _mesh_tris(scene, root) if gtype == 7 else None
        t, nl = _hit_local(gtype, ol, dl, param[k, 0:3], tris)
        take = t < best_t
        best_t = torch.where(take, t, best_t)
        best_k = torch.where(take, torch.full_like(best_k, k), best_k)
        best_n = torch.where(take[:, None], nl @ R.T, best_n)
    n = best_n / best_n.norm(dim=-1, keepdim=True).clamp(min=1e-300)
    n = torch.where(((n * d).sum(-1) > 0)[:, None], -n, n)
    return best_k, best_t, n


def _mesh_tris(scene, root):
    """All triangles under BVH node ``root`` (the reference does not use the BVH itself)."""
    links, tris = scene.bvh_links.cpu(), scene.tris.cpu()
    out, stack = [], [root]
    while stack:
        for link in (int(x) for x in links[stack.pop()]):
            if link < 0:
                first, count = leaf_range(link)
                out.append(tris[first:first + count])
            else:
                stack.append(link)
    return torch.cat(out)


def render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width,
                 samples=1, shadows=False, zfar=None, pixels=None):
    """Reference for ``flycuda.render_tiles``; returns (rgb uint8 [S, C, H, Wd, 3],
    depth float32 [S, C, H, Wd], seg int32 [S, C, H, Wd]) as float64 math rounded at the
    end; without the C dim for one camera given as cam_pos [W, 3]; with ``pixels``
    (pixel ids), [S, C, P(, 3)] of those pixels."""
    one = cam_pos.dim() == 2
    cam_pos = cam_pos.reshape(cam_pos.shape[0], -1, 3)
    cam_mat = cam_mat.reshape(cam_mat.shape[0], -1, 9)
    C = cam_pos.shape[1]
    fov = list(fovy) if isinstance(fovy, (list, tuple)) else [fovy] * C
    outs = [_render_camera(geom_xpos, geom_xmat, cam_pos[:, c], cam_mat[:, c], worlds, scene, fovy=fov[c],
                           height=height, width=width, samples=samples, shadows=shadows, zfar=zfar)
            for c in range(C)]
    rgb, depth, seg = (torch.stack([o[i] for o in outs], 1) for i in range(3))
    if pixels is not None:
        p = torch.as_tensor(pixels).long().cpu()
        S = rgb.shape[0]
        rgb = rgb.reshape(S, C, -1, 3)[:, :, p]
        depth, seg = depth.reshape(S, C, -1)[:, :, p], seg.reshape(S, C, -1)[:, :, p]
    return (rgb[:, 0], depth[:, 0], seg[:, 0]) if one else (rgb, depth, seg)


def _render_camera(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width,
                   samples=1, shadows=False, zfar=None):
    """One camera (cam_pos [W, 3], cam_mat [W, 9]) of each selected world."""
    zfar = scene.zfar if zfar is None else zfar
    H, Wd, n = height, width, samples
    th = math.tan(0.5 * math.radians(fovy))
    hw = th * (Wd * n) / (H * n)
    S = len(worlds)
    rgb = torch.zeros(S, H, Wd, 3, dtype=torch.uint8)
    depth = torch.zeros(S, H, Wd, dtype=torch.float32)
    seg = torch.full((S, H, Wd), -1, dtype=torch.int32)
    py, px = torch.meshgrid(torch.arange(H, dtype=F64), torch.arange(Wd, dtype=F64), indexing="ij")
    param = scene.geom_param.cpu().to(F64)
    lights = scene.lights.cpu().to(F64)
    hl = scene.headlight.cpu().to(F64)
    bg = scene.background.cpu().to(F64)
    gids = scene.geom_ids.cpu()
    for si, w in enumerate(int(x) for x in worlds):
        if w == -1:  # a skipped image: the op leaves its outputs alone; here they stay as allocated
            continue
        xpos = geom_xpos[w].cpu().to(F64)
        xmat = geom_xmat[w].cpu().reshape(-1, 9).to(F64)
        o = cam_pos[w].cpu().to(F64).reshape(3)
        Rc = cam_mat[w].cpu().to(F64).reshape(3, 3)
        acc = torch.zeros(H * Wd, 3, dtype=F64)
        for sy in range(n):
            for sx in range(n):
                u = (px * n + sx + 0.5) / (Wd * n)
                v = (py * n + sy + 0.5) / (H * n)
                dc = torch.stack([-hw + 2 * hw * u, th - 2 * th * v, -torch.ones_like(u)], -1).reshape(-1, 3)
                dc = dc / dc.norm(dim=-1, keepdim=True)
                d = dc @ Rc.T
                O = o.expand_as(d)
                k, t, nrm = _trace(scene, xpos, xmat, O, d)
                planar = t * -dc[:, 2]
                k = torch.where((k >= 0) & (zfar > 0) & (planar > zfar), torch.full_like(k, -1), k)
                hit = k >= 0
                if sx == 0 and sy == 0:
                    depth[si] = torch.where(hit, planar, torch.zeros_like(t)).view(H, Wd).float()
                    seg[si] = torch.where(hit, gids[k.clamp(min=0)].long(), -torch.ones_like(k)).view(H, Wd).int()
                kk = k.clamp(min=0)
                P = param[kk]
                base = P[:, 3:6].clone()
                p = O + d * torch.nan_to_num(t, posinf=0.0)[:, None]
                checker = P[:, 9] > 0
                if checker.any():
                    g = gids[kk].long()
                    pl = ((p - xpos[g])[:, None, :] @ xmat[g].view(-1, 3, 3)).squeeze(1)
                    odd = (torch.floor(pl[:, 0] / torch.where(checker, P[:, 9], torch.ones_like(P[:, 9]))) +
                           torch.floor(pl[:, 1] / torch.where(checker, P[:, 9], torch.ones_like(P[:, 9])))) % 2 != 0
                    base = torch.where((checker & odd)[:, None], P[:, 6:9], base)
                hd = (nrm @ Rc[:, 2]).clamp(min=0)  # MuJoCo's headlight: along the camera's view axis
                light = hl[0:3] + hl[3:6] * hd[:, None]
                for L in lights:
                    light = light + L[3:6]
                    diff = (-(nrm * L[0:3]).sum(-1)).clamp(min=0)
                    vis = torch.ones_like(diff)
                    if shadows and L[9] > 0:
                        so = p + nrm * (1e-4 * torch.clamp(torch.nan_to_num(t, posinf=0.0), min=1.0))[:, None]
                        ks, _, _ = _trace(scene, xpos, xmat, so, (-L[0:3]).expand_as(d))
                        vis = (ks < 0).to(F64)
                    light = light + L[6:9] * (diff * vis)[:, None]
                up = (0.5 + 0.5 * d[:, 2]).clamp(0, 1)[:, None]  # the background: sky up -> down
                sky = bg[3:6] + (bg[0:3] - bg[3:6]) * up
                acc += torch.where(hit[:, None], base * light, sky)
        c = torch.nan_to_num(acc / (n * n), nan=0.0).clamp(0, 1)  # NaN -> 0, as to_u8
        rgb[si] = (c * 255 + 0.5).floor().to(torch.uint8).view(H, Wd, 3)
    return rgb, depth, seg
