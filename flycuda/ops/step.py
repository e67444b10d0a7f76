"""The device-side step counter: :func:`new_step_counter` and :func:`advance_step`
(the counter's layout and why: docs/design.md, "The step counter")."""

from __future__ import annotations

import torch

from .checks import check_counter
from .launch_plan import COUNTER_BYTES

__all__ = ["new_step_counter", "advance_step"]


def new_step_counter(device: torch.device | str = "cpu", start: int = 0) -> torch.Tensor:
    """A fresh step counter on ``device``: int64 [2] = {``start``, reserved}.

    ``step[0]`` is the step (read it with ``int(step[0])``, set it with any tensor
    op: ``step += k``, ``step.fill_(s)``, ``step.copy_(other)``). ``step[1]`` is
    reserved: no op reads it, so any value there is harmless.

    The tensor views the first 16 of its storage's ``COUNTER_BYTES``; the rest holds the
    ticket that lets :func:`motion_to_ctrl` fuse its advance into its one launch. A counter
    without it (a plain [1], ``step.clone()``) is accepted by every op and advanced by a
    second one-thread launch instead. One counter must not be used on two streams at once.
    Why and how: docs/design.md, "The step counter".
    """
    raw = int(start).to_bytes(8, "little", signed=True) + bytes(COUNTER_BYTES - 8)
    buf = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device)  # one copy to the device
    return torch.empty(0, dtype=torch.int64, device=buf.device).set_(buf.untyped_storage(), 0, (2,), (1,))


def advance_step(step: torch.Tensor, n: int = 1) -> None:
    """Adds ``n`` to the step counter (``step[0]``; [1] or [2]) in place, on its own device."""
    torch.ops.flycuda.advance_step.default(step, int(n))


@torch.library.register_fake("flycuda::advance_step")
def _advance_step_fake(step, n):
    check_counter("advance_step", step)
    return None
