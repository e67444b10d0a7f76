"""A replayed odor plume at the fly's sensors: the reference of :func:`flycuda.ops.odor_plume`
(issue 41), float64 torch, every world at once.

A plume is a concentration grid [T, X, Y] (sampled in the floor plane) or [T, X, Y, Z], its node
(i, j[, l]) at ``origin + (i, j[, l]) * spacing``, frame t at time ``t / fps``. At each world's time
and each sensor it is read trilinearly (bilinearly) in space and linearly in time, each
interpolation a nested lerp ``a + w (b - a)`` in float64 (x first, then y, then z, then time).
Outside the grid in space it reads NaN, as FlyGym 1.x's plume arena does (where 1.x takes the
nearest cell); in time it is clamped to the recording or loops (``time_mode``).
"""

from __future__ import annotations

import math

import torch

__all__ = ["odor_plume", "TIME_MODES"]

TIME_MODES = ("clamp", "loop")
"""How a time outside the recording maps into it: held at its ends, or wrapped (the last frame
interpolating into the first)."""


def _axis(u: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inside, i0, i1, weight) of grid coordinates ``u`` on an axis of ``n`` nodes."""
    inside = (u >= 0) & (u <= n - 1)
    u = torch.where(inside, u, torch.zeros_like(u))
    i0 = torch.floor(u).clamp(max=max(n - 2, 0))
    return inside, i0.long(), torch.clamp(i0 + 1, max=n - 1).long(), u - i0


def _lerp(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return a + w * (b - a)


def odor_plume(plume: torch.Tensor, sensors: torch.Tensor, time: torch.Tensor, out: torch.Tensor, *, origin,
               spacing, fps: float, time_mode: str = "clamp") -> torch.Tensor:
    """Every world's plume at its sensors, into ``out`` (float32 [W, s]; returned).

    Args:
        plume: [T, X, Y] or [T, X, Y, Z] concentrations.
        sensors: [W, s, 3] sensor positions (x, y, z; z unused by a [T, X, Y] plume).
        time: [W] each world's time (s).
        out: float32 [W, s].
        origin, spacing: the grid's node (0, 0[, 0]) and its step per axis (length; 2 or 3 each).
        fps: frames per second of the recording.
        time_mode: :data:`TIME_MODES`.
    """
    if time_mode not in TIME_MODES:
        raise ValueError(f"odor_plume: time_mode must be one of {', '.join(TIME_MODES)}, got {time_mode!r}")
    g = plume.to(torch.float64)
    T, D = g.shape[0], g.dim() - 1
    p = sensors.to(torch.float64)[..., :D]
    inside = torch.ones(p.shape[:2], dtype=torch.bool, device=p.device)
    idx, wts = [], []
    for d in range(D):
        ok, i0, i1, w = _axis((p[..., d] - origin[d]) / spacing[d] + 0.0, g.shape[1 + d])  # -0 -> +0
        inside &= ok
        idx.append((i0, i1))
        wts.append(w)
    f = time.to(torch.float64) * fps + 0.0  # -0 -> +0
    good = torch.isfinite(f)
    f = torch.where(good, f, torch.zeros_like(f))
    if time_mode == "clamp":
        f = f.clamp(0, T - 1)
        t0 = torch.floor(f).clamp(max=max(T - 2, 0))
        wt, t1 = f - t0, torch.clamp(t0 + 1, max=T - 1)
    else:
        fl = torch.floor(f)
        wt = f - fl
        t0 = torch.fmod(fl, T)  # exact for a whole fl, however large
        t0 = torch.where(t0 < 0, t0 + T, t0).clamp(max=T - 1)
        t1 = torch.where(t0 + 1 >= T, torch.zeros_like(t0), t0 + 1)
    t0, t1 = t0.long()[:, None].expand_as(inside), t1.long()[:, None].expand_as(inside)

    def at(t):  # the spatial interpolation at frame indices t [W, s]
        def corner(*c):
            return g[(t,) + tuple(idx[d][c[d]] for d in range(D))]
        v = [_lerp(corner(0, j, *k), corner(1, j, *k), wts[0]) for k in ([(0,), (1,)] if D == 3 else [()])
             for j in (0, 1)]  # x first: [(y0, z0), (y1, z0), (y0, z1), (y1, z1)]
        v = [_lerp(v[2 * k], v[2 * k + 1], wts[1]) for k in range(len(v) // 2)]  # then y
        return _lerp(v[0], v[1], wts[2]) if D == 3 else v[0]  # then z

    val = _lerp(at(t0), at(t1), wt[:, None].expand_as(inside))
    val = torch.where(inside & good[:, None], val, torch.full_like(val, math.nan))
    return out.copy_(val)
