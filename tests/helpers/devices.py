"""Device parameters and poisoned buffers: what every op test starts from."""

import pytest
import torch


def cpu_and_cuda():
    """Device parameters: "cpu" always, "cuda" marked needs_cuda (skipped without GPU)."""
    return ("cpu", pytest.param("cuda", marks=pytest.mark.needs_cuda))


def poison_like(t: torch.Tensor) -> torch.Tensor:
    """Random values far from any motion value, so that a stale entry shows up."""
    return torch.randn(t.shape, dtype=t.dtype) * 100.0 + 7777.0


def strided_view(rows: int, cols: int, kind: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A [rows, cols] float32 view of a poisoned parent buffer, and that parent.

    kind: "contiguous", "row_stride" (a column slice of a wider buffer, as a
    view of MuJoCo Warp's ctrl with extra actuators) or "transposed".
    """
    if kind == "contiguous":
        parent = poison_like(torch.empty(rows, cols)).to(device)
        return parent, parent
    if kind == "row_stride":
        parent = poison_like(torch.empty(rows, cols + 5)).to(device)
        return parent[:, 2:2 + cols], parent
    if kind == "transposed":
        parent = poison_like(torch.empty(cols, rows)).to(device)
        return parent.t(), parent
    raise ValueError(kind)
