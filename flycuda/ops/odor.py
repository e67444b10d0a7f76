"""Smell: every world's odor at its sensors, on the device (csrc/kernels/odor_intensity.cuh).

* :func:`odor_intensity`: FlyGym 1.x's ``OdorArena.get_olfaction`` for every world at once,
  with its inverse power law, or the advection–diffusion plume with wind of the 2026 course;
* :data:`ODOR_FIELDS`: the fields it evaluates;
* :func:`odor_plume`: a replayed plume, a concentration grid over time, read at the sensors.

:func:`flycuda.reference.odor.odor_intensity` is its float64 torch reference, held equal to the
NumPy transcription of FlyGym 1.x (:func:`flycuda.reference.odor.flygym1_olfaction`).
"""

from __future__ import annotations

import math

import torch

from .checks import check_option, check_same_device
from .launch_plan import ODOR_FIELDS, PLUME_TIME_MODES

__all__ = ["odor_intensity", "odor_plume", "ODOR_FIELDS", "PLUME_TIME_MODES"]


def odor_intensity(sources: torch.Tensor, peaks: torch.Tensor, sensors: torch.Tensor, out: torch.Tensor, *,
                   field: str = "power", exponent: float = 2.0, wind: torch.Tensor | None = None,
                   diffusivity: float = 20000.0, decay: float = 500.0) -> None:
    """Every world's odor at its sensors, in place::

        out[w, k, s] = float32( sum_n peaks[(w,) n, k] * f(sensors[w, s] - sources[w, n]) )

    in float64, the sources added in order, as FlyGym 1.x's ``get_olfaction`` (flygym-gymnasium
    1.3.2, ``arena/sensory_environment.py``) computes one fly's ``[k, 4]`` readout. The fields:

    * ``"power"``: ``f(r) = |r| ** -exponent``, the full 3-D distance (FlyGym 1.x's default
      diffusion ``x ** -2``); a sensor exactly on a source reads inf.
    * ``"advection_diffusion"``: the steady plume of a source in a wind,
      ``f(r) = exp(r.u / (2 D)) K0(kappa |r|) / (2 pi D)``, ``kappa = sqrt(|u|^2 / (4 D^2) +
      decay / D)``, in the floor plane (x and y of ``r`` and of the wind ``u``): NeLy-EPFL
      cobar-2026's ``compute_log_concentration`` (``src/miniproject/arena/banana.py``), in its
      log form. Higher downwind; D is ``diffusivity``.

    Args:
        sources: float32 [W, n, 3], any strides (an ``expand`` of [n, 3] shares one set).
        peaks: float32 [n, k] (every world's) or [W, n, k], any strides: each source's peak
            intensity in each of k odor dimensions.
        sensors: float32 [W, s, 3], any strides: e.g. the four sensor sites of
            :func:`flycuda.flygym.olfaction.add_odor_sensors` in MuJoCo Warp's ``site_xpos``.
        out: float32 [W, k, s], written in place; any strides, no overlapping memory, not
            sharing memory with an input.
        field: one of :data:`ODOR_FIELDS`.
        exponent: "power": finite, >= 0.
        wind: "advection_diffusion": float32 [W, 2], each world's wind (length/s) in the floor
            plane, any strides; None: still air. Refused with "power" (it would be ignored).
        diffusivity, decay: "advection_diffusion": D (length^2/s) and the decay rate (1/s),
            finite and > 0 (defaults: the course's).

    Runs on the device with no host synchronization (capturable in a CUDA graph).

    Raises:
        RuntimeError: a wrong dtype, rank, shape, device or aliasing (naming the argument);
            ``out`` is left untouched.
        ValueError: an unknown field, a negative or non-finite exponent, a wind with "power",
            a diffusivity or decay <= 0.
    """
    if field == "power":  # the checks build their messages only on failure (this runs every step)
        if not (wind is None and math.isfinite(exponent) and exponent >= 0):
            check_option("odor_intensity", "exponent", math.isfinite(exponent) and exponent >= 0, "finite and >= 0",
                         exponent)
            check_option("odor_intensity", "wind", wind is None, "None with field 'power' (it applies to field "
                         "'advection_diffusion' only)", "a wind")
    elif field == "advection_diffusion":
        for name, v in (("diffusivity", diffusivity), ("decay", decay)):
            check_option("odor_intensity", name, math.isfinite(v) and v > 0, "finite and > 0", v)
    else:
        check_option("odor_intensity", "field", False, " or ".join(map(repr, ODOR_FIELDS)), repr(field))
    torch.ops.flycuda.odor_intensity.default(sources, peaks, sensors, out, field, float(exponent), wind,
                                             float(diffusivity), float(decay))


@torch.library.register_fake("flycuda::odor_intensity")
def _odor_intensity_fake(sources, peaks, sensors, out, field, exponent, wind, diffusivity, decay):
    torch._check(out.dim() == 3 and out.dtype == torch.float32,
                 lambda: f"flycuda.odor_intensity: argument 'out' must be float32 [W, k, s], got {out.dtype} "
                         f"{tuple(out.shape)}")
    for name, t in (("sources", sources), ("peaks", peaks), ("sensors", sensors), ("wind", wind)):
        torch._check(t is None or t.dtype == torch.float32,
                     lambda name=name, t=t: f"flycuda.odor_intensity: argument '{name}' must have dtype Float, got "
                                            f"{t.dtype}")
    W, k, s = out.shape
    torch._check(W * k * s < 2 ** 31,
                 lambda: f"flycuda.odor_intensity: W * k * s = {W * k * s} must be < 2^31 (32-bit thread indices)")
    torch._check(sources.dim() == 3 and sources.shape[0] == W and sources.shape[2] == 3,
                 lambda: f"flycuda.odor_intensity: argument 'sources' must have shape [W, n, 3] with W = {W}, got "
                         f"{tuple(sources.shape)}")
    n = sources.shape[1]
    want = (n, k) if peaks.dim() == 2 else (W, n, k)
    torch._check(tuple(peaks.shape) == want,
                 lambda: f"flycuda.odor_intensity: argument 'peaks' must have shape {list(want)}, got "
                         f"{tuple(peaks.shape)}")
    torch._check(tuple(sensors.shape) == (W, s, 3),
                 lambda: f"flycuda.odor_intensity: argument 'sensors' must have shape [W, s, 3] = {[W, s, 3]}, got "
                         f"{tuple(sensors.shape)}")
    torch._check(wind is None or tuple(wind.shape) == (W, 2),
                 lambda: f"flycuda.odor_intensity: argument 'wind' must have shape [W, 2], got {tuple(wind.shape)}")
    check_same_device("odor_intensity", "out", out, sources=sources, peaks=peaks, sensors=sensors, wind=wind)
    return None


def odor_plume(plume: torch.Tensor, sensors: torch.Tensor, time: torch.Tensor, out: torch.Tensor, *,
               origin, spacing, fps: float, time_mode: str = "clamp") -> None:
    """A replayed odor plume at every world's sensors, in place::

        out[w, s] = float32( lerp_t( P(t0), P(t1) ) )    at frame time[w] * fps

    where P(t) reads frame t of the grid at the sensor: bilinearly in x, y for a [T, X, Y] plume
    (the floor plane, as FlyGym 1.x's plume arena), trilinearly for [T, X, Y, Z]; nested lerps in
    float64 (x, then y, then z, then time). Node (i, j[, l]) lies at ``origin + (i, j[, l]) *
    spacing``. A sensor outside the grid reads NaN (1.x's arena: NaN outside, nearest cell inside).
    The grid is one tensor for every world: hold it once on the device (T x X x Y[ x Z] x 4 bytes).

    Args:
        plume: float32 [T, X, Y] or [T, X, Y, Z], contiguous, not empty.
        sensors: float32 [W, s, 3], any strides (e.g. MuJoCo Warp's ``site_xpos`` columns).
        time: float32 [W], any stride: each world's time in seconds (``Sim.view("time")``).
        out: float32 [W, s], written in place; any strides, no overlapping memory, not sharing
            memory with an input.
        origin, spacing: the grid's node (0, 0[, 0]) and its step along each spatial axis (2 or 3
            values each, the model's length unit; spacing > 0).
        fps: the recording's frames per second (> 0).
        time_mode: one of :data:`PLUME_TIME_MODES`: a time past the recording holds its last
            frame ("clamp", and before it the first) or wraps around ("loop").

    Runs on the device with no host synchronization (capturable in a CUDA graph).

    Raises:
        RuntimeError: a wrong dtype, rank, shape, device, contiguity or aliasing (naming the
            argument); ``out`` is left untouched.
        ValueError: origin or spacing of the wrong length or not finite, a spacing or fps <= 0, an
            unknown time_mode.
    """
    origin, spacing = [float(v) for v in origin], [float(v) for v in spacing]
    if plume.dim() in (3, 4):  # else the op's shape check speaks first
        dims = plume.dim() - 1
        check_option("odor_plume", "origin", len(origin) == dims and all(map(math.isfinite, origin)),
                     f"{dims} finite values (the grid's spatial axes)", origin)
        check_option("odor_plume", "spacing", len(spacing) == dims and all(math.isfinite(v) and v > 0
                                                                           for v in spacing),
                     f"{dims} finite values > 0", spacing)
    check_option("odor_plume", "fps", math.isfinite(fps) and fps > 0, "finite and > 0", fps)
    check_option("odor_plume", "time_mode", time_mode in PLUME_TIME_MODES, " or ".join(map(repr, PLUME_TIME_MODES)),
                 repr(time_mode))
    torch.ops.flycuda.odor_plume.default(plume, sensors, time, out, origin, spacing, float(fps), time_mode)


@torch.library.register_fake("flycuda::odor_plume")
def _odor_plume_fake(plume, sensors, time, out, origin, spacing, fps, time_mode):
    torch._check(out.dim() == 2 and out.dtype == torch.float32,
                 lambda: f"flycuda.odor_plume: argument 'out' must be float32 [W, s], got {out.dtype} {tuple(out.shape)}")
    W, s = out.shape
    torch._check(plume.dim() in (3, 4) and plume.dtype == torch.float32,
                 lambda: f"flycuda.odor_plume: argument 'plume' must be a float32 [T, X, Y] or [T, X, Y, Z] grid, "
                         f"got {plume.dtype} {tuple(plume.shape)}")
    torch._check(tuple(sensors.shape) == (W, s, 3) and sensors.dtype == torch.float32,
                 lambda: f"flycuda.odor_plume: argument 'sensors' must be float32 [W, s, 3] = {[W, s, 3]}, got "
                         f"{sensors.dtype} {tuple(sensors.shape)}")
    torch._check(tuple(time.shape) == (W,) and time.dtype == torch.float32,
                 lambda: f"flycuda.odor_plume: argument 'time' must be float32 [W], got {time.dtype} {tuple(time.shape)}")
    torch._check(W * s < 2 ** 31, lambda: f"flycuda.odor_plume: W * s = {W * s} must be < 2^31")
    torch._check(plume.numel() > 0 and plume.is_contiguous(),
                 lambda: f"flycuda.odor_plume: argument 'plume' must be a non-empty contiguous grid, got "
                         f"{tuple(plume.shape)}")
    dims = plume.dim() - 1
    torch._check(len(origin) == dims and len(spacing) == dims and all(math.isfinite(v) for v in origin)
                 and all(math.isfinite(v) and v > 0 for v in spacing),
                 lambda: f"flycuda.odor_plume: arguments 'origin' and 'spacing' must each hold {dims} finite values "
                         f"(spacing > 0), got {origin} and {spacing}")
    torch._check(math.isfinite(fps) and fps > 0, lambda: f"flycuda.odor_plume: argument 'fps' must be > 0, got {fps}")
    torch._check(time_mode in PLUME_TIME_MODES,
                 lambda: f"flycuda.odor_plume: argument 'time_mode' must be 'clamp' or 'loop', got {time_mode!r}")
    check_same_device("odor_plume", "out", out, plume=plume, sensors=sensors, time=time)
    return None
