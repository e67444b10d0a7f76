"""The FlyWire whole-brain LIF model, one step for B brains: the reference of
:func:`flycuda.ops.brain_step` (issue 55), written from Brian2's schedule and the code Brian2 2.10
generates for philshiu/Drosophila_brain_model's ``model.py`` (its "linear" state update, threshold,
``on_pre='g += w'`` synapses with a delay, PoissonInput onto v, reset), vectorized in torch, float64.

* :func:`brain_uniform`: the counter-based stream, in numpy's uint64 arithmetic;
* :func:`poisson_events`: which (step, brain, neuron) get a Poisson event: the input trains that
  the Brian2 tests give Brian2 as a SpikeGeneratorGroup;
* :func:`brain_step`: the op's signature and effect.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["brain_uniform", "poisson_events", "brain_step"]

_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def brain_uniform(seed, step, neuron) -> np.ndarray:
    """The draws in [0, 1) of neurons ``neuron`` at step ``step`` of stream ``seed`` (broadcast
    together; int64 seeds as their two's-complement uint64), as csrc/kernels/brain_step.cuh's
    ``brain_uniform``."""
    with np.errstate(over="ignore"):
        s = np.asarray(seed, dtype=np.int64).astype(np.uint64)
        key = (np.asarray(step, dtype=np.int64).astype(np.uint64) << np.uint64(32)) | (
            np.asarray(neuron, dtype=np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF))
        x = _mix(_mix(s) + (key + np.uint64(1)) * _GOLDEN)
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def poisson_events(seeds, rate: np.ndarray, steps: int, dt: float, start: int = 0) -> np.ndarray:
    """Every Poisson event of steps [start, start + steps): int64 [K, 3] rows (step, brain, neuron)
    in that order; ``rate`` [B, N] Hz, ``seeds`` [B]. The op adds w_poi to v at exactly these."""
    rate = np.asarray(rate, dtype=np.float64)
    brains, neurons = np.nonzero(rate > 0)
    p = rate[brains, neurons] * dt
    seeds = np.asarray(seeds, dtype=np.int64)[brains]
    out = []
    for n in range(start, start + steps):
        hit = brain_uniform(seeds, n, neurons) < p
        if hit.any():
            out.append(np.stack([np.full(int(hit.sum()), n), brains[hit], neurons[hit]], axis=1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 3), np.int64)


def brain_step(v, g, last, acc, ring, log, log_count, rate, silence, seeds, step, rowptr, post, count, *, consts,
               refractory: int, delay: int) -> None:
    """:func:`flycuda.ops.brain_step`, in place (the log in brain-major, neuron order)."""
    v_rest, v_reset, v_th, decay_g, g_to_v, v_const, decay_v, w_syn, w_poi, dt = (float(c) for c in consts)
    B, N = v.shape
    n, R = int(step[0]), delay + 1
    # 1. the spikes of step n - delay, delivered as integer counts (their slot cleared)
    slot = ring[(n - delay) % R]
    fired = (slot != 0) & (silence == 0)
    slot.zero_()
    pre = torch.repeat_interleave(torch.arange(N, device=v.device), (rowptr[1:] - rowptr[:-1]).long())
    for b in range(B):
        on = fired[b, pre]
        acc[b].index_add_(0, post.long()[on], count[on])
    # 2. the neurons
    excited = rate > 0
    nr = (n - last.long()) >= torch.where(excited, 0, refractory)
    u = torch.from_numpy(brain_uniform(seeds.cpu().numpy()[:, None], n, np.arange(N)[None, :])).to(v.device)
    event = excited & (u < rate * dt)
    g1 = decay_g * g
    v1 = v_const + ((g_to_v * g) + (decay_v * v))
    vv, gg = torch.where(nr, v1, v), torch.where(nr, g1, g)
    spike = nr & (vv > v_th)
    gg = torch.where(nr & (acc != 0), gg + acc.double() * w_syn, gg)  # Brian2 masks the targets with
    vv = torch.where(event & nr, vv + w_poi, vv)                       # not_refractory: a refractory one's are dropped
    vv, gg = torch.where(spike, v_reset, vv), torch.where(spike, 0.0, gg)
    v.copy_(vv)
    g.copy_(gg)
    acc.zero_()
    last.copy_(torch.where(spike, n, last))
    ring[n % R] = torch.where(spike, 1, ring[n % R])
    idx = spike.flatten().nonzero().flatten()
    k0, cap = int(log_count[0]), log.shape[0]
    entries = (n << 32) | idx
    fit = entries[: max(0, cap - k0)]
    log[k0:k0 + len(fit)] = fit
    log_count += len(idx)
