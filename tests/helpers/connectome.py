"""connectome_step's arguments for the op tests and the emulator: a random network (each node's
in-degree 0 to ``degree``, sources anywhere, the edges in a shuffled order and then stably sorted
by target into CSR rows, as flycuda.vision.connectome builds flyvis's), random voltages of both
signs, time constants on both sides of dt, out poisoned with NaN."""

from __future__ import annotations

import torch

CONNECTOME_LAYOUTS = ("contiguous", "node_major", "strided")


def random_network(N: int, degree: int, seed: int) -> dict:
    """rowptr/src (int32), weight, bias, tau (float32) of N nodes."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, degree + 1, (N,), generator=g)
    target = torch.repeat_interleave(torch.arange(N), counts)
    target = target[torch.randperm(len(target), generator=g)]  # flyvis's edges are sorted by neither end
    source = torch.randint(0, N, (len(target),), generator=g)
    weight = torch.randn(len(target), generator=g) * 0.5
    order = torch.sort(target, stable=True).indices
    rowptr = torch.zeros(N + 1, dtype=torch.int64)
    rowptr[1:] = torch.cumsum(torch.bincount(target, minlength=N), 0)
    return dict(rowptr=rowptr.int(), src=source[order].int(), weight=weight[order].contiguous(),
                bias=torch.rand(N, generator=g) * 0.6 + 0.2, tau=torch.rand(N, generator=g) * 0.09 + 0.005)


def connectome_args(B: int, N: int, C: int, inputs: int, layout: str = "contiguous", degree: int = 8, seed: int = 0,
                    dt: float = 0.02) -> dict:
    """connectome_step's arguments (flycuda.ops.connectome_step's names): ``inputs`` blocks of C
    input nodes. Layouts: "contiguous"; "node_major" (v and out as torch.empty(N, B).t()); "strided"
    (v and out columns of wider tensors, the stimulus a column subset)."""
    g = torch.Generator().manual_seed(seed + 1)
    net = random_network(N, degree, seed)
    v = torch.randn(B, N, generator=g)
    stimulus = torch.rand(B, C, generator=g)
    out = torch.full((B, N), float("nan"))
    if layout == "node_major":
        v, out = v.t().contiguous().t(), out.t().contiguous().t()
    elif layout == "strided":
        v = torch.cat([v, torch.randn(B, 3, generator=g)], 1)[:, :N]
        out = torch.full((B, 2 * N), float("nan"))[:, ::2]
        wide = torch.rand(B, 2 * C + 1, generator=g)
        wide[:, 1::2] = stimulus
        stimulus = wide[:, 1::2]
    return dict(v=v, stimulus=stimulus, **net, out=out, dt=dt, input_nodes=inputs * C)  # the schema's order
