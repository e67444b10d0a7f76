"""Cubic-spline coefficients of a recording, computed once on the host.

FlyGym resamples a recording to the simulation rate with
``scipy.interpolate.interp1d(kind="cubic")``: the not-a-knot cubic spline
through the frames, evaluated in float64, and then stores the result as
float32 [W, steps, D] on the GPU. :func:`spline_coeffs` computes that same
spline once, as per-frame polynomial pieces, so that
:func:`flycuda.spline_to_ctrl` can evaluate it on the device at any step from
O(T x D) memory instead of the pre-expanded buffer.

Row ``i`` of the table holds the piece from frame ``i`` to frame ``i + 1``, in
powers of the in-frame position ``u`` in [0, 1)::
    S(i + u) = c0 + u * (c1 + u * (c2 + u * c3))      with c0 = y[i]

* Frames ``0 .. T-2``: the not-a-knot spline (scipy's ``interp1d`` cubic and
  ``make_interp_spline(k=3)`` default). With fewer than 4 frames (where scipy's
  cubic ``interp1d`` refuses) flycuda uses the interpolating polynomial of
  degree T - 1, which is what the not-a-knot conditions reduce to.
* Row ``T - 1``: the wrap piece used by ``mode="loop"`` only, a cubic Hermite
  from frame T-1 back to frame 0 with the spline's end slopes (so a looped
  recording is C1). In ``mode="clamp"`` it is read only at u = 0 (= y[T-1]).
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import SplineError


def _second_derivatives(y: np.ndarray) -> np.ndarray:
    """Not-a-knot spline second derivatives M [T, D] at unit-spaced frames, T >= 4.

    Rows 1..T-2 of the spline system ``M[i-1] + 4 M[i] + M[i+1] = 6 (y[i+1] - 2 y[i]
    + y[i-1])`` with not-a-knot ends (``M[0] = 2 M[1] - M[2]``, and the mirror at the
    other end) substituted into rows 1 and T-2, which become ``6 M[1] = r[1]`` and
    ``6 M[T-2] = r[T-2]``. The tridiagonal rest is solved by the Thomas algorithm
    (diagonally dominant, no pivoting needed).
    """
    T = y.shape[0]
    r = 6.0 * (y[2:] - 2.0 * y[1:-1] + y[:-2])  # rows 1..T-2, [T-2, D]
    n = T - 2
    diag = np.full(n, 4.0)
    diag[0] = diag[-1] = 6.0
    lower = np.ones(n)
    upper = np.ones(n)
    lower[0] = upper[0] = 0.0  # row 1: 6 M[1] = r[1]
    lower[-1] = upper[-1] = 0.0  # row T-2: 6 M[T-2] = r[T-2]
    cp = np.zeros(n)
    dp = np.zeros_like(r)
    cp[0], dp[0] = upper[0] / diag[0], r[0] / diag[0]
    for i in range(1, n):
        denom = diag[i] - lower[i] * cp[i - 1]
        cp[i] = upper[i] / denom
        dp[i] = (r[i] - lower[i] * dp[i - 1]) / denom
    m_inner = np.empty_like(r)
    m_inner[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        m_inner[i] = dp[i] - cp[i] * m_inner[i + 1]
    M = np.empty_like(y)
    M[1:-1] = m_inner
    M[0] = 2.0 * M[1] - M[2]
    M[-1] = 2.0 * M[-2] - M[-3]
    return M


def _pieces(y: np.ndarray) -> np.ndarray:
    """float64 [T, 4, D] coefficients of one recording y [T, D] (see the module doc)."""
    T, D = y.shape
    c = np.zeros((T, 4, D))
    c[:, 0] = y
    if T == 1:
        return c  # constant; the wrap piece is constant too
    if T == 2:
        c[0, 1] = y[1] - y[0]
    elif T == 3:  # one quadratic through the three frames
        M = np.broadcast_to(y[0] - 2.0 * y[1] + y[2], (3, D))
        c[:2, 1] = (y[1:] - y[:-1]) - (2.0 * M[:-1] + M[1:]) / 6.0
        c[:2, 2] = M[:-1] / 2.0
    else:
        M = _second_derivatives(y)
        c[:-1, 1] = (y[1:] - y[:-1]) - (2.0 * M[:-1] + M[1:]) / 6.0
        c[:-1, 2] = M[:-1] / 2.0
        c[:-1, 3] = (M[1:] - M[:-1]) / 6.0
    # Wrap piece (loop mode): Hermite from (y[T-1], S'(T-1)) to (y[0], S'(0)).
    last = c[T - 2]
    m0 = last[1] + 2.0 * last[2] + 3.0 * last[3]
    m1 = c[0, 1]
    p0, p1 = y[T - 1], y[0]
    c[T - 1, 1] = m0
    c[T - 1, 2] = 3.0 * (p1 - p0) - 2.0 * m0 - m1
    c[T - 1, 3] = 2.0 * (p0 - p1) + m0 + m1
    return c


def spline_coeffs(angles) -> torch.Tensor:
    """Per-frame cubic pieces of one or more recordings, for :func:`flycuda.spline_to_ctrl`.

    Args:
        angles: [T, D] or [M, T, D] joint angles at unit-spaced frames (numpy or
            torch, any float dtype; float64 keeps FlyGym's precision). T >= 1.

    Returns:
        float64 [M, T, 4, D] contiguous CPU tensor (M = 1 for [T, D]); move it to
        the simulation's device once.

    Raises:
        SplineError: wrong rank, T == 0 or non-finite angles.
    """
    y = (angles.detach().cpu().to(torch.float64).numpy() if isinstance(angles, torch.Tensor)
         else np.asarray(angles))
    if y.ndim not in (2, 3) or y.shape[-2] < 1 or (y.ndim == 3 and y.shape[0] < 1):
        raise SplineError(f"spline_coeffs: argument 'angles' must be [T, D] or [M, T, D] with T >= 1, "
                          f"got shape {tuple(y.shape)}")
    y = y.astype(np.float64)
    if not np.isfinite(y).all():
        raise SplineError("spline_coeffs: argument 'angles' has non-finite values (NaN or inf)")
    batch = y[None] if y.ndim == 2 else y
    M, T, D = batch.shape
    # One solve for every column of every recording: the system depends on T only.
    cols = _pieces(np.ascontiguousarray(batch.transpose(1, 0, 2)).reshape(T, M * D))  # [T, 4, M*D]
    return torch.from_numpy(np.ascontiguousarray(cols.reshape(T, 4, M, D).transpose(2, 0, 1, 3)))
