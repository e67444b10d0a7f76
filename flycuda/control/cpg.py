"""FlyGym's central pattern generator: six coupled phase-amplitude oscillators per world
(``flygym_demo.complex_terrain.CPGNetwork``), stepped by explicit Euler inside
:func:`flycuda.ops.hybrid_step`:

    dtheta_i/dt = 2 pi nu_i + sum_j r_j w_ij sin(theta_j - theta_i - phi_ij)
    dr_i/dt     = alpha_i (R_i - r_i)

computed as FlyGym computes it, operation by operation in float64 (the coupling summed
over j = 0 .. 5 in order, every derivative from the state before the step). Phases are
never wrapped, as in FlyGym. This module holds its parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["CPGParams", "tripod_params"]


@dataclass(frozen=True)
class CPGParams:
    """The oscillators' parameters (float64): ``freqs`` and ``amps`` [6], ``weights`` and
    ``biases`` [6, 6] (row i: what oscillator i feels from each j), ``convergence`` [6]."""

    freqs: torch.Tensor
    amps: torch.Tensor
    weights: torch.Tensor
    biases: torch.Tensor
    convergence: torch.Tensor

    def to(self, device) -> "CPGParams":
        return CPGParams(*(t.to(device) for t in (self.freqs, self.amps, self.weights, self.biases, self.convergence)))


def tripod_params(frequency: float = 12.0, amplitude: float = 1.0, coupling: float = 10.0,
                  convergence: float = 20.0, device=None) -> CPGParams:
    """FlyGym's tripod network (``make_tripod_cpg_network``'s defaults): legs LF, LH, RM
    in one tripod and LM, RF, RH in the other, half a cycle apart."""
    biases = np.array([[(i + j) % 2 for j in range(6)] for i in range(6)], dtype=float)
    biases *= np.pi
    f64 = dict(dtype=torch.float64, device=device)
    return CPGParams(torch.tensor(np.ones(6) * frequency, **f64), torch.tensor(np.ones(6) * amplitude, **f64),
                     torch.tensor((biases > 0) * coupling, **f64), torch.tensor(biases, **f64),
                     torch.tensor(np.ones(6) * convergence, **f64))
