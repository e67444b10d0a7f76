"""Activation and silencing experiments as model.py's ``run_exp`` runs them (excite a set of
neurons with Poisson input, silence another, record every spike), its trials run as brains of
one batch instead of one process each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FlycudaError
from .brains import Brains
from .connectome import Connectome
from .model import Model

__all__ = ["run", "Experiment"]


@dataclass
class Experiment:
    """What :func:`run` returns: every spike as (trial, neuron, t) (``t`` in s; ``neuron`` the
    Brian2 index, ``root_ids[neuron]`` its FlyWire id), sorted by (t, trial, neuron); and
    ``duration``, ``trials``."""

    root_ids: np.ndarray
    trial: np.ndarray
    neuron: np.ndarray
    t: np.ndarray
    duration: float
    trials: int

    def rates(self) -> np.ndarray:
        """float64 [trials, N]: each neuron's rate (Hz) in each trial."""
        counts = np.zeros((self.trials, len(self.root_ids)))
        np.add.at(counts, (self.trial, self.neuron), 1)
        return counts / self.duration

    def mean_rates(self) -> dict[int, float]:
        """{FlyWire root id: rate averaged over the trials (Hz)} for the neurons that spiked."""
        mean = self.rates().mean(axis=0)
        return {int(self.root_ids[i]): float(mean[i]) for i in np.nonzero(mean)[0]}

    def to_dataframe(self):
        """model.py's result table: one row per spike, columns t, trial, flywire_id."""
        import pandas as pd  # noqa: PLC0415

        return pd.DataFrame({"t": self.t, "trial": self.trial, "flywire_id": self.root_ids[self.neuron]})


def run(connectome, excite=(), silence=(), *, rate: float | None = None, trials: int = 30, duration: float = 1.0,
        model: Model | None = None, batch: int | None = None, device="cpu", seed: int = 0,
        progress: bool = True) -> Experiment:
    """Runs ``trials`` trials of ``duration`` s: the neurons ``excite`` (FlyWire root ids) get
    Poisson input at ``rate`` Hz (default the model's 150 Hz) and no refractory period, the
    neurons ``silence`` (root ids) are silenced; trial k is brain k of a batch with seed
    ``seed + k`` (the same spikes at any batch size, on any device).

    Args:
        connectome: a :class:`Connectome` or the folder of its files (:meth:`Connectome.load`).
        batch: brains stepped at once (default: every trial).
        progress: a progress bar over the steps (tqdm).
    """
    if isinstance(connectome, str):
        connectome = Connectome.load(connectome)
    model = model or Model()
    if trials < 1 or not (duration > 0):
        raise FlycudaError(f"brain.run: trials must be >= 1 and duration > 0, got {trials} and {duration}")
    steps = int(round(duration / model.dt))
    batch = min(trials, batch or trials)
    exc, sil = connectome.index_of(excite) if len(excite) else [], connectome.index_of(silence) if len(silence) else []
    parts = []
    bar = _bar(progress, steps * -(-trials // batch))
    for first in range(0, trials, batch):
        b = min(batch, trials - first)
        brains = Brains(connectome, b, model=model, device=device, seeds=seed + first + np.arange(b))
        if len(exc):
            brains.set_rates(exc, rate)
        if len(sil):
            brains.set_silenced(sil)
        for done in range(0, steps, 100):
            brains.step(min(100, steps - done))
            s = brains.spikes()
            parts.append((s.brain + first, s.neuron, s.step))
            bar.update(min(100, steps - done))
    bar.close()
    trial, neuron, step = (np.concatenate(x) for x in zip(*parts))
    order = np.lexsort((neuron, trial, step))
    return Experiment(connectome.root_ids, trial[order], neuron[order], step[order] * model.dt, duration, trials)


def _bar(show: bool, total: int):
    from tqdm.auto import tqdm  # noqa: PLC0415

    return tqdm(total=total, desc="brain", unit="step", disable=not show)
