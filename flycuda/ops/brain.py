"""The whole brain: one 0.1 ms step of the FlyWire leaky integrate-and-fire model (Shiu et al.
2024) for B brains over one shared connectivity (:func:`brain_step`,
csrc/kernels/brain_step.cuh; the state, the connectome and the experiments: :mod:`flycuda.brain`).

:func:`flycuda.reference.brain.brain_step` is its torch reference.
"""

from __future__ import annotations

import math

import torch

from ._values import EVERY_DEVICE, check_index, check_offsets
from .checks import check_option, check_same_device

__all__ = ["brain_step", "check_brain_setup", "BRAIN_CONSTS"]

BRAIN_CONSTS = ("v_rest", "v_reset", "v_th", "decay_g", "g_to_v", "v_const", "decay_v", "w_syn", "w_poi", "dt")
"""The names of :func:`brain_step`'s ``consts``, in order (:meth:`flycuda.brain.Model.consts`
computes them as Brian2 does)."""


def brain_step(v: torch.Tensor, g: torch.Tensor, last: torch.Tensor, acc: torch.Tensor, ring: torch.Tensor,
               log: torch.Tensor, log_count: torch.Tensor, rate: torch.Tensor, silence: torch.Tensor,
               seeds: torch.Tensor, step: torch.Tensor, rowptr: torch.Tensor, post: torch.Tensor,
               count: torch.Tensor, *, consts, refractory: int, delay: int) -> None:
    """Step ``step[0] = n`` of B brains of N neurons, in place, in Brian2's schedule::

        acc[b, k] += count[e]  for every synapse e (j -> k) of every neuron j that spiked at step
                               n - delay in brain b and is not silenced there (ring slot (n - delay) % R,
                               cleared)
        nr    = n - last >= (0 if rate > 0 else refractory)
        if nr:  g, v = decay_g g, v_const + ((g_to_v g) + (decay_v v))      (Brian2's "linear" update)
        spike = nr and v > v_th;  last = n
        g    += acc w_syn  if nr;  acc = 0                                 (Brian2 drops a refractory
        v    += w_poi  if nr and uniform(seeds[b], n, i) < rate dt         neuron's inputs; a Poisson event)
        if spike: v, g = v_reset, 0;  ring[n % R, b, i] = 1;  log += (n << 32) | (b N + i)

    in float64, every operation one rounding (no FMA). The caller advances ``step``.

    Args:
        v, g: float64 [B, N] (V), updated: membrane potentials and synaptic conductances.
        last: int32 [B, N]: each neuron's last spike step (start: -2^31, never).
        acc: int32 [B, N]: zeros between steps (the step's synaptic input while it runs).
        ring: uint8 [delay + 1, B, N]: spike flags (start: zeros).
        log, log_count: int64 [L] and [1]: spike entries ``(n << 32) | (b N + i)``, appended in the
            atomics' order (sort to compare); past L they are counted, not written.
        rate: float64 [B, N] (Hz): Poisson input per neuron (> 0 also lifts its refractory period,
            as model.py's excited neurons).
        silence: uint8 [B, N]: nonzero: the neuron's outgoing synapses carry nothing (model.py's
            silencing).
        seeds: int64 [B]: each brain's stream (uniform(seed, n, i): counter-based, the same on
            every device).
        step: int64 [1]: n.
        rowptr, post, count: int32 [N + 1], [E], [E]: the presynaptic CSR (each neuron's synapses),
            their targets in [0, N) and signed synapse counts.
        consts: the 10 numbers of :data:`BRAIN_CONSTS`, finite, dt > 0.
        refractory: steps (model.py: 2.2 ms, 22 steps); delay: steps >= 1 (1.8 ms, 18 steps).

    Every tensor contiguous and on v's device. The CSR's values are checked here once per tensor
    version, on every device (CUDA: with host copies, never while a graph is captured): at
    FlyWire's scale a scan per call would cost more than the step. Values that escape the check
    (``torch.ops.flycuda.brain_step`` called directly, a table changed in place through another
    alias) are never a memory error: a target out of range is skipped, a row read within [0, E).

    Raises:
        RuntimeError: a wrong dtype, shape, device, contiguity, aliasing or table value (naming the
            argument); nothing is written.
        ValueError: ``consts``, ``refractory`` or ``delay`` out of range.
    """
    consts = check_brain_setup(v, rowptr, post, consts=consts, refractory=refractory, delay=delay)
    torch.ops.flycuda.brain_step.default(v, g, last, acc, ring, log, log_count, rate, silence, seeds, step, rowptr,
                                         post, count, consts, int(refractory), int(delay))


def check_brain_setup(v: torch.Tensor, rowptr: torch.Tensor, post: torch.Tensor, *, consts, refractory: int,
                      delay: int) -> list[float]:
    """The checks of what stays fixed over a run, :func:`brain_step`'s own (it calls this): the
    options (a :class:`~flycuda.errors.FlycudaError`, a ValueError, when out of range) and the
    connectivity's values (once per tensor version, on every device; a RuntimeError). Returns
    ``consts`` as floats. :class:`flycuda.brain.Brains` calls it once, then the op directly."""
    consts = [float(c) for c in consts]
    check_option("brain_step", "consts", len(consts) == len(BRAIN_CONSTS) and all(map(math.isfinite, consts))
                 and consts[-1] > 0, f"{len(BRAIN_CONSTS)} finite numbers ({', '.join(BRAIN_CONSTS)}; dt > 0)",
                 consts)
    check_option("brain_step", "delay", 1 <= int(delay) < 4096, "in [1, 4096) steps", delay)
    check_option("brain_step", "refractory", 0 <= int(refractory) < 2 ** 30, "in [0, 2^30) steps", refractory)
    if (v.dim() == 2 and rowptr.dim() == 1 and post.dim() == 1 and rowptr.dtype == torch.int32
            and post.dtype == torch.int32 and rowptr.shape[0] == v.shape[1] + 1):
        check_offsets("brain_step", "rowptr", rowptr, post.shape[0], "E = post.size(0)", ref=v, devices=EVERY_DEVICE)
        check_index("brain_step", "post", post, v.shape[1], "N = v.size(1)", ref=v, devices=EVERY_DEVICE)
    return consts


@torch.library.register_fake("flycuda::brain_step")
def _brain_step_fake(v, g, last, acc, ring, log, log_count, rate, silence, seeds, step, rowptr, post, count, consts,
                     refractory, delay):
    op = "flycuda.brain_step"
    torch._check(v.dim() == 2 and v.dtype == torch.float64,
                 lambda: f"{op}: argument 'v' must be float64 [B, N], got {v.dtype} {tuple(v.shape)}")
    B, N = v.shape
    E = post.shape[0] if post.dim() == 1 else -1
    for name, t, dtype, shape in (("g", g, torch.float64, (B, N)), ("last", last, torch.int32, (B, N)),
                                  ("acc", acc, torch.int32, (B, N)), ("ring", ring, torch.uint8, (delay + 1, B, N)),
                                  ("log", log, torch.int64, None), ("log_count", log_count, torch.int64, (1,)),
                                  ("rate", rate, torch.float64, (B, N)), ("silence", silence, torch.uint8, (B, N)),
                                  ("seeds", seeds, torch.int64, (B,)), ("step", step, torch.int64, (1,)),
                                  ("rowptr", rowptr, torch.int32, (N + 1,)), ("post", post, torch.int32, (E,)),
                                  ("count", count, torch.int32, (E,))):
        torch._check(t.dtype == dtype and (tuple(t.shape) == shape if shape else t.dim() == 1),
                     lambda: f"{op}: argument '{name}' must be {dtype} {list(shape) if shape else '[L]'}, got "
                             f"{t.dtype} {tuple(t.shape)}")
    torch._check_value(len(consts) == len(BRAIN_CONSTS) and all(map(math.isfinite, consts)) and consts[-1] > 0,
                       lambda: f"{op}: argument 'consts' must hold 10 finite numbers, dt > 0")
    torch._check_value(1 <= delay < 4096, lambda: f"{op}: argument 'delay' must be in [1, 4096) steps, got {delay}")
    torch._check_value(0 <= refractory < 2 ** 30,
                       lambda: f"{op}: argument 'refractory' must be in [0, 2^30) steps, got {refractory}")
    check_same_device("brain_step", "v", v, g=g, last=last, acc=acc, ring=ring, log=log, log_count=log_count,
                      rate=rate, silence=silence, seeds=seeds, step=step, rowptr=rowptr, post=post, count=count)
    return None
