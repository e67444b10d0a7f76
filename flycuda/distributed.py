"""Scale the replay out over processes with torch.distributed (torchrun).

    torchrun --nproc-per-node 2 -m flycuda replay --worlds 1000 --snippet 0.1 --record out.npz

Each rank takes a contiguous share of the worlds (the first ``worlds % ranks``
ranks take one more), runs the same graph-captured loop on its own device
(``cuda:LOCAL_RANK``, or the CPU), and rank 0 gathers the recorded joint
angles, targets and per-rank timings into one report and one output file.
Only rank 0 renders: the mosaic video shows rank 0's worlds.

Results travel as CPU tensors over the gloo backend (a few MB at the end of a
run; no GPU collectives are needed, so NCCL is not required). Every rank
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
        raise ValueError(f"ranks must be > 0, got {ranks}")
    base, extra = divmod(total, ranks)
    out, start = [], 0
    for r in range(ranks):
        n = base + (1 if r < extra else 0)
        out.append((start, n))
        start += n
    return out


def init(info: RankInfo) -> None:
    """Joins the process group (gloo) with the configured timeout."""
    import torch.distributed as dist

    timeout = float(os.environ.get("FLYCUDA_DIST_TIMEOUT", "600"))
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=info.rank, world_size=info.world_size,
                                timeout=datetime.timedelta(seconds=timeout))


def device_for(info: RankInfo, requested: str) -> str:
    """``cuda:LOCAL_RANK`` for CUDA runs, else ``cpu``."""
    if requested == "cuda":
        if info.local_rank >= torch.cuda.device_count():
            raise RuntimeError(f"rank {info.rank}: LOCAL_RANK {info.local_rank} but only "
                               f"{torch.cuda.device_count()} GPU(s) visible")
        torch.cuda.set_device(info.local_rank)
        return f"cuda:{info.local_rank}"
    return "cpu"


def exchange(payload) -> list:
    """Every rank's payload, in rank order, on every rank."""
    import torch.distributed as dist

    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, payload)
    return out


def finish() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def merge_results(parts: list, worlds: int):
    """One ReplayResult from the per-rank results, in world order.

    Timings: the job's wall time is the slowest rank's; JIT likewise; the stage
    split is summed over ranks."""
    from .replay import ReplayResult, tracking_rmse

    first = parts[0]
    rec = torch.cat([p.recorded for p in parts], dim=0)
    tgt = torch.cat([p.targets for p in parts], dim=0)
    assert rec.shape[0] == worlds
    rmse = tracking_rmse(rec, tgt, first.timestep, first.record_every)
    split: dict = {}
    for p in parts:
        for k, v in p.split_seconds.items():
            split[k] = split.get(k, 0.0) + v
    merged = ReplayResult(
        worlds=worlds, steps=first.steps, timestep=first.timestep,
        device=f"{len(parts)} ranks ({', '.join(p.device for p in parts)})", graph=first.graph,
        steps_per_graph=first.steps_per_graph, record_every=first.record_every, dof_names=first.dof_names,
        recorded=rec, targets=tgt, sim_seconds=first.sim_seconds,
        wall_seconds=max(p.wall_seconds for p in parts), jit_seconds=max(p.jit_seconds for p in parts),
        split_seconds=split, peak_memory="; ".join(f"rank {i}: {p.peak_memory}" for i, p in enumerate(parts)),
        rmse_per_dof=rmse)
    merged.rank_walls = [p.wall_seconds for p in parts]
    return merged
