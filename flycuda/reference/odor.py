"""Odor at the fly's sensors: the references of the odor op to come (issue 41), from its anchors.

* :func:`flygym1_olfaction`: FlyGym 1.x's ``OdorArena.get_olfaction`` transcribed (NumPy, one fly:
  flygym-gymnasium 1.3.2, ``flygym/arena/sensory_environment.py`` lines 154-184, identical to
  NeLy-EPFL/flygym@1573a8fb): ``I[k, w] = sum_n P[n, k] f(|s_w - x_n|)``, the full 3-D distance, no
  clipping (a sensor on a source reads inf), sources summed in order.
* :func:`odor_intensity`: the batched torch reference, every world at once, float64. Fields:

  - ``"power"``: 1.x's default diffusion ``f(d) = d ** -exponent`` (exponent 2);
  - ``"advection_diffusion"``: the steady state of ``u . grad C = D lap C - decay C + q delta`` in
    the floor plane (NeLy-EPFL/cobar-2026 ``src/miniproject/arena/banana.py``,
    ``compute_log_concentration``): ``C(r) = exp(r . u / (2 D)) K0(kappa |r|) / (2 pi D)``,
    ``kappa = sqrt(|u|^2 / (4 D^2) + decay / D)``, ``r = s - x`` in x and y only, ``u`` each world's
    wind (higher downwind), evaluated in log form as the course does
    (``log(k0e(kappa r)) - kappa r``); the peak scales it.

The sensors are 1.x's four, in its order: left and right maxillary palps, then left and right
antennae (:data:`SENSORS`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["odor_intensity", "flygym1_olfaction", "FIELDS", "SENSORS"]

FIELDS = ("power", "advection_diffusion")
"""The odor fields :func:`odor_intensity` evaluates."""
SENSORS = ("l_maxillary_palp", "r_maxillary_palp", "l_antenna", "r_antenna")
"""FlyGym 1.x's four odor sensors, in its order (its config.yaml ``olfaction.sensor_positions``)."""


def flygym1_olfaction(sensors: np.ndarray, sources: np.ndarray, peaks: np.ndarray, diffuse=lambda x: x ** -2
                      ) -> np.ndarray:
    """FlyGym 1.x's ``OdorArena.get_olfaction`` for one fly, as it computes it: ``sensors`` [w, 3],
    ``sources`` [n, 3], ``peaks`` [n, k], ``diffuse(distance)``; returns [k, w] (float64)."""
    sources, peaks = np.asarray(sources), np.asarray(peaks)
    k, w = peaks.shape[1], sensors.shape[0]
    src = np.repeat(np.repeat(sources[:, None, None, :], k, axis=1), w, axis=2)  # its _odor_source_repeated
    peak = np.repeat(peaks[:, :, None], w, axis=2)  # its _peak_intensity_repeated
    dist_3d = sensors[None, None, :, :] - src  # (n, k, w, 3)
    dist_euc = np.linalg.norm(dist_3d, axis=3)  # (n, k, w)
    return (peak * diffuse(dist_euc)).sum(axis=0)  # (k, w)


def odor_intensity(sources: torch.Tensor, peaks: torch.Tensor, sensors: torch.Tensor, out: torch.Tensor, *,
                   field: str = "power", exponent: float = 2.0, wind: torch.Tensor | None = None,
                   diffusivity: float = 20000.0, decay: float = 500.0) -> torch.Tensor:
    """Every world's odor at its sensors, into ``out`` (float32 [W, k, s]; returned).

    Args:
        sources: [W, n, 3] each world's odor sources (the model's length unit).
        peaks: [n, k] each source's peak intensity in each of k odor dimensions (or [W, n, k]:
            each world's).
        sensors: [W, s, 3] each world's sensor positions.
        out: float32 [W, k, s].
        field: :data:`FIELDS`.
        exponent: "power": ``f(d) = d ** -exponent``, exponent >= 0.
        wind: "advection_diffusion": [W, 2] each world's wind in the floor plane (length/s;
            None: still air).
        diffusivity, decay: "advection_diffusion": D (length^2/s) and the decay rate (1/s), > 0
            (defaults: the course's, 20000 and 500).
    """
    if field not in FIELDS:
        raise ValueError(f"odor_intensity: field must be one of {', '.join(FIELDS)}, got {field!r}")
    x = sources.to(torch.float64)
    s = sensors.to(torch.float64)
    W, n, S = x.shape[0], x.shape[1], s.shape[1]
    p = peaks.to(torch.float64).expand(W, n, peaks.shape[-1])  # [n, k]: every world's
    acc = torch.zeros(W, p.shape[2], S, dtype=torch.float64, device=s.device)
    for i in range(n):  # the sources in order, as FlyGym sums them
        r = s - x[:, i:i + 1, :]  # [W, S, 3]
        if field == "power":
            f = torch.linalg.vector_norm(r, dim=2).pow(-exponent)
        else:
            f = _advection_diffusion(r[..., :2], wind, diffusivity, decay, W, s.device)
        acc += p[:, i].unsqueeze(2) * f.unsqueeze(1)
    return out.copy_(acc)


def _advection_diffusion(r: torch.Tensor, wind, D: float, decay: float, W: int, device) -> torch.Tensor:
    """The course's steady plume of a unit source, [W, S], at offsets ``r`` [W, S, 2] from it."""
    u = torch.zeros(W, 2, dtype=torch.float64, device=device) if wind is None else wind.to(torch.float64)
    dist = torch.linalg.vector_norm(r, dim=2)
    kappa = torch.sqrt((u * u).sum(1, keepdim=True) / (4 * D * D) + decay / D)  # [W, 1]
    kr = kappa * dist
    log_c = (math.log(1.0 / (2 * math.pi * D)) + (r * u.unsqueeze(1)).sum(2) / (2 * D)
             + torch.log(torch.special.scaled_modified_bessel_k0(kr)) - kr)
    return torch.exp(log_c)
