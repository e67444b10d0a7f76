"""Scale the replay out over processes with torch.distributed (torchrun).

    torchrun --nproc-per-node 2 -m flycuda replay --worlds 1000 --snippet 0.1 --record out.npz

Each rank takes a contiguous share of the worlds (the first ``worlds % ranks``
ranks take one more), runs the same graph-captured loop on its own device
(``cuda:LOCAL_RANK``, or the CPU), and writes its worlds straight into the one
zarr store (``--record out.zarr``: rank 0 creates it, the ranks meet once so
that it exists, then each writes disjoint chunks). Rank 0 gathers only small
metrics (the tracking error's sums, timings) into one report, marks the store
complete, and renders (live: rank 0's worlds; afterwards: any worlds).

Metrics travel over the gloo backend (a few KB; no GPU collectives are needed,
so NCCL is not required). Every rank
always joins the final exchange, also after an exception, so a failing rank
ends the job with its error on rank 0 instead of a hang; a rank that dies
outright is caught by the process group timeout (FLYCUDA_DIST_TIMEOUT seconds,
default 600).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch

from ..errors import ReplayError
from ..recording import store
from ..recording.reader import Recording
from .results import ReplayResult, rmse_from_sums


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int


def rank_info() -> RankInfo | None:
    """This process's place under torchrun, or None when not launched by it."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return RankInfo(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                    int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))


def split_worlds(total: int, ranks: int) -> list[tuple[int, int]]:
    """(start, count) of each rank's contiguous share of ``total`` worlds."""
    if ranks <= 0:
        raise ReplayError(f"ranks must be > 0, got {ranks}")
    base, extra = divmod(total, ranks)
    out, start = [], 0
    for r in range(ranks):
        n = base + (1 if r < extra else 0)
        out.append((start, n))
        start += n
    return out


def init(info: RankInfo) -> None:
    """Joins the process group (gloo) with the configured timeout."""
    import torch.distributed as dist  # noqa: PLC0415  (lazy: only torchrun jobs need torch.distributed)

    timeout = float(os.environ.get("FLYCUDA_DIST_TIMEOUT", "600"))
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=info.rank, world_size=info.world_size,
                                timeout=datetime.timedelta(seconds=timeout))


def device_for(info: RankInfo, requested: str) -> str:
    """``cuda:LOCAL_RANK`` for CUDA runs, else ``cpu``."""
    if requested == "cuda":
        if info.local_rank >= torch.cuda.device_count():
            raise ReplayError(f"rank {info.rank}: LOCAL_RANK {info.local_rank} but only "
                               f"{torch.cuda.device_count()} GPU(s) visible")
        torch.cuda.set_device(info.local_rank)
        return f"cuda:{info.local_rank}"
    return "cpu"


def exchange(payload) -> list:
    """Every rank's payload, in rank order, on every rank."""
    import torch.distributed as dist  # noqa: PLC0415  (lazy: only torchrun jobs need torch.distributed)

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, payload)
    return out


def finish() -> None:
    import torch.distributed as dist  # noqa: PLC0415  (lazy: only torchrun jobs need torch.distributed)

    if dist.is_initialized():
        dist.destroy_process_group()


class Rendezvous:
    """The ranks' one meeting before they write into the store: each rank calls it
    once, either when ready (``()``) or, failing before that point, with
    :meth:`fail`; if any rank failed, every ready rank raises naming it."""

    def __init__(self):
        self.done = False

    def __call__(self, error: str | None = None) -> None:
        if self.done:
            return
        self.done = True
        errors = [p for p in exchange(error) if p is not None]
        if errors and error is None:
            raise ReplayError(f"another rank failed before the store was ready: {errors[0]}")

    def fail(self, why: str) -> None:
        """Joins the meeting with an error, unless this rank already met the others."""
        if not self.done:
            self(why)


def summary(res):
    """What a rank sends rank 0: its ReplayResult without the store handle."""
    res.recording = None
    return res


def mark_failed(path: str | None, why: str) -> None:
    """Marks a store incomplete after a failed rank (rank 0, at the end)."""
    if path and path.endswith(".zarr") and os.path.isdir(path):
        try:
            store.mark(store.open_store(path, "r+"), complete=False, status=f"incomplete: {why}"[:500])
        except store.StoreError:
            pass  # the store was never created


def merge_results(parts: list, worlds: int, record: str | None = None):
    """One ReplayResult from the per-rank results (small metrics only).

    Tracking error: from the ranks' summed squared errors. Timings: the job's wall
    time is the slowest rank's; JIT likewise; the stage split is summed over ranks.
    With a store (``record``), rank 0 marks it complete and opens it for reading."""

    first = parts[0]
    assert sum(p.worlds for p in parts) == worlds
    sq = sum(p.track_sq.double() for p in parts)
    count = sum(p.track_count for p in parts)
    recording = None
    if record and record.endswith(".zarr"):
        group = store.open_store(record, "r+")
        rows = {k: min(p.rows_written.get(k, 0) for p in parts) for k in first.rows_written}
        store.mark(group, complete=True, status="complete", rows_written=rows, ranks=len(parts),
                   rmse_per_dof=rmse_from_sums(sq, count).tolist())
        recording = Recording(group)
    split: dict = {}
    for p in parts:
        for k, v in p.split_seconds.items():
            split[k] = split.get(k, 0.0) + v
    merged = ReplayResult(
        worlds=worlds, steps=first.steps, timestep=first.timestep,
        device=f"{len(parts)} ranks ({', '.join(p.device for p in parts)})", graph=first.graph,
        steps_per_graph=first.steps_per_graph, record_every=first.record_every, dof_names=first.dof_names,
        sim_seconds=first.sim_seconds,
        wall_seconds=max(p.wall_seconds for p in parts), jit_seconds=max(p.jit_seconds for p in parts),
        split_seconds=split, peak_memory="; ".join(f"rank {i}: {p.peak_memory}" for i, p in enumerate(parts)),
        rmse_per_dof=rmse_from_sums(sq, count), recording=recording, track_sq=sq, track_count=count,
        store_bytes=sum(p.store_bytes for p in parts), store_seconds=max(p.store_seconds for p in parts),
        recorder_device_bytes=max(p.recorder_device_bytes for p in parts),
        rank_walls=[p.wall_seconds for p in parts], steps_in_launches=min(p.steps_in_launches for p in parts),
        eager_steps=max(p.eager_steps for p in parts), split_steps=first.split_steps)  # the slowest rank's
    return merged
