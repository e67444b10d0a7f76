"""B brains stepped at once over one :class:`~flycuda.brain.connectome.Connectome`: their state on
the device, their inputs (Poisson rates, silenced neurons) per brain, and the spikes they fire."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import FlycudaError
from ..ops.brain import check_brain_setup
from .connectome import Connectome
from .model import Model

__all__ = ["Brains", "Spikes"]

NEVER = -(2 ** 31)  # `last` of a neuron that has not spiked


@dataclass
class Spikes:
    """Spikes as three int64 arrays, sorted by (step, brain, neuron)."""

    step: np.ndarray
    brain: np.ndarray
    neuron: np.ndarray

    @classmethod
    def from_log(cls, entries: torch.Tensor, N: int) -> "Spikes":
        """From brain_step's log entries ``(step << 32) | (b N + i)``, in any order."""
        e = np.sort(entries.cpu().numpy())
        idx = e & 0xFFFFFFFF
        return cls(e >> 32, idx // N, idx % N)

    def __len__(self) -> int:
        return len(self.step)


class Brains:
    """``batch`` brains of the model on one connectome, on ``device``.

    Each brain has its own state, Poisson input rates (``set_rates``), silenced neurons
    (``set_silenced``) and random stream (``seeds``: brain b's events are the same on every device
    and in any batch). :meth:`step` advances all of them by one ``model.dt``; :meth:`spikes`
    drains the spikes fired since the last call.

    Memory: the connectome once (8 bytes a synapse), and per brain 39 bytes a neuron (v, g, rate
    float64; last, acc int32; silence uint8), ``delay + 1`` bytes a neuron of spike flags and 8 of
    spike log (``log_capacity``, default a spike per neuron between drains).

    The connectivity's values are checked once, here; :meth:`step` then calls
    ``torch.ops.flycuda.brain_step`` itself (the wrapper's per-call checks cost more than a step of a
    small network). Change ``rate``, ``silence`` and the state only in place.
    """

    def __init__(self, connectome: Connectome, batch: int = 1, *, model: Model | None = None, device="cpu",
                 seeds=None, log_capacity: int | None = None):
        if batch < 1:
            raise FlycudaError(f"brain: batch must be >= 1, got {batch}")
        self.model = model or Model()
        if not self.model.rest_is_fixed():
            raise FlycudaError("brain: v_0 is not a fixed point of this model's update in float64")
        self.connectome, self.batch, self.device = connectome, batch, torch.device(device)
        B, N, dev = batch, connectome.N, self.device
        self.rowptr, self.post, self.count = (t.to(dev) for t in (connectome.rowptr, connectome.post, connectome.count))
        self.consts, self.refractory, self.delay = self.model.consts(), self.model.refractory_steps(), \
            self.model.delay_steps()
        # the state (its values: reset())
        self.v = torch.empty(B, N, dtype=torch.float64, device=dev)
        self.g = torch.empty(B, N, dtype=torch.float64, device=dev)
        self.last = torch.empty(B, N, dtype=torch.int32, device=dev)
        self.acc = torch.empty(B, N, dtype=torch.int32, device=dev)
        self.ring = torch.empty(self.delay + 1, B, N, dtype=torch.uint8, device=dev)
        self.step_counter = torch.empty(1, dtype=torch.int64, device=dev)
        self.log_count = torch.empty(1, dtype=torch.int64, device=dev)
        # the inputs
        self.rate = torch.zeros(B, N, dtype=torch.float64, device=dev)
        self.silence = torch.zeros(B, N, dtype=torch.uint8, device=dev)
        seeds = np.arange(B) if seeds is None else np.asarray(seeds, dtype=np.int64).reshape(-1)
        if len(seeds) != B:
            raise FlycudaError(f"brain: seeds must hold one seed per brain ({B}), got {len(seeds)}")
        self.seeds = torch.as_tensor(seeds, dtype=torch.int64).to(dev)
        # a spike per neuron of every brain between two drains by default (run() drains every 100 steps;
        # a neuron spikes at most every refractory + 1 steps, an excited one every other step)
        self.log = torch.zeros(log_capacity or max(1 << 16, B * N), dtype=torch.int64, device=dev)
        self.reset()
        # the op's checks of what stays fixed (the options, the connectivity's values) once, here; then
        # step() calls the op itself, without the wrapper's per-call checks
        self.consts = check_brain_setup(self.v, self.rowptr, self.post, consts=self.consts,
                                        refractory=self.refractory, delay=self.delay)
        self._args = (self.v, self.g, self.last, self.acc, self.ring, self.log, self.log_count, self.rate,
                      self.silence, self.seeds, self.step_counter, self.rowptr, self.post, self.count, self.consts,
                      self.refractory, self.delay)

    @property
    def N(self) -> int:
        """Neurons per brain."""
        return self.connectome.N

    def _brains(self, brains) -> list[int]:
        out = list(range(self.batch)) if brains is None else [int(b) for b in np.atleast_1d(brains)]
        bad = [b for b in out if not 0 <= b < self.batch]
        if bad:
            raise FlycudaError(f"brain: brain {bad[0]} is not in [0, {self.batch})")
        return out

    def _neurons(self, neurons) -> torch.Tensor:
        idx = torch.as_tensor(np.atleast_1d(np.asarray(neurons, dtype=np.int64)), device=self.device)
        if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= self.N):
            raise FlycudaError(f"brain: neuron indices must lie in [0, {self.N}), got [{int(idx.min())}, "
                               f"{int(idx.max())}]")
        return idx

    def set_rates(self, neurons, rate: float | None = None, brains=None) -> None:
        """Poisson input at ``rate`` Hz (default: the model's 150 Hz) onto ``neurons`` (Brian2
        indices) of ``brains`` (default all); rate 0 removes it. Other neurons keep theirs."""
        rate = self.model.r_poi if rate is None else float(rate)
        if not (np.isfinite(rate) and rate >= 0):
            raise FlycudaError(f"brain: rate must be finite and >= 0 Hz, got {rate}")
        idx = self._neurons(neurons)
        for b in self._brains(brains):
            self.rate[b, idx] = rate

    def set_silenced(self, neurons, silenced: bool = True, brains=None) -> None:
        """Silences ``neurons`` of ``brains`` (their synapses carry nothing, model.py's ``silence``)."""
        idx = self._neurons(neurons)
        for b in self._brains(brains):
            self.silence[b, idx] = int(silenced)

    def reset(self) -> None:
        """Every brain at rest at step 0 (inputs and silencing kept), the log emptied: the state a
        Brains starts in."""
        self.v.fill_(self.model.v_0)
        for t in (self.g, self.acc, self.ring, self.step_counter, self.log_count):
            t.zero_()
        self.last.fill_(NEVER)
        self._steps = 0  # the counter's value, mirrored on the host (no sync to guard its range)

    def step(self, steps: int = 1) -> None:
        """Advances every brain by ``steps`` steps of ``model.dt``."""
        if self._steps + steps >= 2 ** 31 - 1:  # `last` is int32, log entries hold the step in 31 bits
            raise FlycudaError(f"brain: {self._steps + steps} steps would pass 2^31 - 1 (59.6 simulated hours "
                               "at 0.1 ms); reset() first")
        op = torch.ops.flycuda.brain_step.default
        for _ in range(steps):
            op(*self._args)
            self.step_counter += 1
        self._steps += steps

    @property
    def steps_done(self) -> int:
        """Steps since the start (or the last reset)."""
        return self._steps

    def spikes(self) -> Spikes:
        """The spikes since the last call, sorted (the log is then emptied). Raises if more were
        fired than the log holds (make the Brains with a larger ``log_capacity``, or drain more often)."""
        k = int(self.log_count[0])
        if k > self.log.shape[0]:
            self.log_count.zero_()
            raise FlycudaError(f"brain: {k} spikes since the last drain, but the log holds {self.log.shape[0]}: "
                               "drain more often or raise log_capacity")
        out = Spikes.from_log(self.log[:k], self.N)
        self.log_count.zero_()
        return out
