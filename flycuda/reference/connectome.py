"""flyvis's connectome-constrained network, one step: the reference of
:func:`flycuda.ops.connectome_step` (issue 40), transcribed from flyvis 1.2.0 (TuragaLab, MIT).

* :func:`flyvis_step`: flyvis's own step on its own representation, every edge a (source,
  target) pair in flyvis's edge order (``network/dynamics.py``, ``PPNeuronIGRSynapses``;
  ``network.py``, ``Network._next_state`` and ``target_sum``)::

      inv = 1 / max(tau, float32(dt))
      s   = zeros(B, N).scatter_add_(-1, target, weight * relu(v.index_select(-1, source)))
      v'  = v + (inv * (((-v + bias) + s) + x)) * dt

  float32 throughout; on the CPU ``scatter_add_`` adds each node's inputs in edge order.
* :func:`connectome_step`: the op's signature (CSR rows, a stimulus per column for the first
  ``input_nodes`` nodes) expanded to flyvis's form and stepped by :func:`flyvis_step`.
"""

from __future__ import annotations

import torch

__all__ = ["flyvis_step", "connectome_step", "stimulus_buffer"]


def flyvis_step(v: torch.Tensor, x: torch.Tensor, source: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor, tau: torch.Tensor, dt: float) -> torch.Tensor:
    """flyvis's Euler step: ``v`` [B, N] voltages, ``x`` [B, N] the stimulus buffer (nonzero
    on the input nodes), ``source``/``target`` int64 [E] and ``weight`` [E] the edges in flyvis's
    order, ``bias``/``tau`` [N] per node. Returns the new voltages [B, N]."""
    inv = 1 / torch.max(tau, torch.tensor(dt).float())
    current = weight * torch.relu(v.index_select(-1, source))
    s = torch.zeros(v.shape[0], v.shape[1], dtype=v.dtype, device=v.device)
    s.scatter_add_(-1, target.expand(*current.shape), current)
    return v + (inv * (-v + bias + s + x)) * dt


def stimulus_buffer(stimulus: torch.Tensor, N: int, input_nodes: int) -> torch.Tensor:
    """flyvis's per-step stimulus buffer [B, N]: zeros, the first ``input_nodes`` nodes ``+=``
    their column's value (node n: column n % C; flyvis's R1-R8 blocks of 721 columns)."""
    B, C = stimulus.shape
    x = torch.zeros(B, N, dtype=stimulus.dtype, device=stimulus.device)
    if input_nodes:
        x[:, :input_nodes] += stimulus.repeat(1, input_nodes // C)
    return x


def connectome_step(v: torch.Tensor, stimulus: torch.Tensor, rowptr: torch.Tensor, src: torch.Tensor,
                    weight: torch.Tensor, bias: torch.Tensor, tau: torch.Tensor, out: torch.Tensor, *, dt: float,
                    input_nodes: int) -> None:
    """Reference for ``flycuda.ops.connectome_step``: the rows as flyvis's edge list (targets
    from ``rowptr``), stepped by :func:`flyvis_step`, into ``out``."""
    N = out.shape[1]
    target = torch.repeat_interleave(torch.arange(N, device=v.device), (rowptr[1:] - rowptr[:-1]).long())
    x = stimulus_buffer(stimulus, N, input_nodes)
    out.copy_(flyvis_step(v, x, src.long(), target, weight, bias, tau, dt))
