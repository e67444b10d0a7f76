"""The arguments of flycuda.ops.brain_step for a random mid-run state (the op tests and the
emulator's case)."""

from __future__ import annotations

import torch

from flycuda import brain


def brain_args(B: int, N: int, *, degree: int = 6, step: int = 40, seed: int = 0, log: int = 4096) -> dict:
    """The op's arguments for a random mid-run state: a fifth of the neurons at rest, others between
    reset and past threshold, some refractory, pending spikes in every ring slot, Poisson input on a
    tenth (some at high rates), a tenth silenced."""
    g = torch.Generator().manual_seed(seed)
    model = brain.Model()
    c = brain.synthetic(N, degree, seed=seed)
    delay = model.delay_steps()
    v = model.v_0 + (torch.rand(B, N, generator=g, dtype=torch.float64) - 0.3) * 0.012
    cond = (torch.rand(B, N, generator=g, dtype=torch.float64) - 0.5) * 0.01
    rest = torch.rand(B, N, generator=g) < 0.2
    v[rest], cond[rest] = model.v_0, 0.0
    last = torch.randint(step - 40, step, (B, N), generator=g, dtype=torch.int32)
    last[torch.rand(B, N, generator=g) < 0.5] = -(2 ** 31)
    rate = torch.where(torch.rand(B, N, generator=g) < 0.1, torch.rand(B, N, generator=g, dtype=torch.float64) * 3e3,
                       torch.zeros(B, N, dtype=torch.float64))
    return dict(v=v, g=cond, last=last, acc=torch.zeros(B, N, dtype=torch.int32),
                ring=(torch.rand(delay + 1, B, N, generator=g) < 0.05).to(torch.uint8),
                log=torch.full((log,), -7, dtype=torch.int64), log_count=torch.tensor([3]),
                rate=rate, silence=(torch.rand(B, N, generator=g) < 0.1).to(torch.uint8),
                seeds=torch.randint(-2 ** 62, 2 ** 62, (B,), generator=g), step=torch.tensor([step]),
                rowptr=c.rowptr, post=c.post, count=c.count, consts=model.consts(),
                refractory=model.refractory_steps(), delay=delay)
