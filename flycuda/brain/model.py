"""The model's parameters: philshiu/Drosophila_brain_model ``model.py``'s ``default_params``
(Shiu et al., Nature 2024), in SI units as Brian2 holds them, and the constants of its exact
("linear") state update computed as Brian2 2.10's numpy code computes them, so that one step is
Brian2's step bit for bit."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Model"]

_MV = _MS = 0.001  # Brian2's mV and ms: a quantity is its number times these (-52 * mV = -52 * 0.001 V)


@dataclass(frozen=True)
class Model:
    """model.py's ``default_params`` (V, s, Hz) and the step. Change a field with
    ``dataclasses.replace(Model(), tau=...)``.

    Attributes:
        v_0, v_rst, v_th: resting, reset and threshold potentials (-52, -52, -45 mV).
        t_mbr: membrane time constant (20 ms); tau: synaptic time constant (5 ms).
        t_rfc: refractory period (2.2 ms; 0 for neurons with Poisson input, as model.py).
        t_dly: synaptic delay (1.8 ms).
        w_syn: weight per synapse (0.275 mV, times the signed synapse count).
        r_poi: Poisson input rate (150 Hz); f_poi: its weight in synapses (250).
        dt: the step (0.1 ms, Brian2's default clock; NeuroMechFly's physics step).
    """

    v_0: float = -52 * _MV
    v_rst: float = -52 * _MV
    v_th: float = -45 * _MV
    t_mbr: float = 20 * _MS
    tau: float = 5 * _MS
    t_rfc: float = 2.2 * _MS
    t_dly: float = 1.8 * _MS
    w_syn: float = 0.275 * _MV
    r_poi: float = 150.0
    f_poi: float = 250.0
    dt: float = 0.1 * _MS

    def consts(self) -> list[float]:
        """The op's ``consts`` (:data:`flycuda.ops.BRAIN_CONSTS`): Brian2's scalar code for
        ``dv/dt = (v_0 - v + g) / t_mbr, dg/dt = -g / tau`` (method 'linear'), term for term."""
        dt, tau, t_mbr, v_0 = self.dt, self.tau, self.t_mbr, self.v_0
        lio_1 = (-dt) / tau
        lio_3 = tau / (t_mbr - tau)
        lio_6 = (-dt) / t_mbr
        decay_g = float(np.exp(lio_1))
        v_const = float(v_0 - (v_0 * np.exp(lio_6)))
        g_to_v = float(((lio_3 * ((-np.exp(dt / t_mbr)) + np.exp(dt / tau))) * np.exp(lio_6)) * np.exp(lio_1))
        decay_v = float(np.exp(lio_6))
        return [self.v_0, self.v_rst, self.v_th, decay_g, g_to_v, v_const, decay_v, self.w_syn,
                self.w_syn * self.f_poi, dt]

    def refractory_steps(self) -> int:
        """Brian2's ``timestep(t_rfc, dt)``: 22."""
        return int(np.int64((self.t_rfc + 1e-3 * self.dt) / self.dt))

    def delay_steps(self) -> int:
        """The synaptic delay in steps, as Brian2's spike queue rounds it: 18."""
        return int(round(self.t_dly / self.dt))

    def rest_is_fixed(self) -> bool:
        """Does a neuron at v_0 with g = 0 stay there bit for bit? (The kernels skip such neurons.)"""
        _, _, _, _, g_to_v, v_const, decay_v, *_ = self.consts()
        return v_const + ((g_to_v * 0.0) + (decay_v * self.v_0)) == self.v_0

    def as_dict(self) -> dict:
        """The parameters by name (SI units)."""
        return asdict(self)
