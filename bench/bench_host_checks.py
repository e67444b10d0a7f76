"""What the index-value checks cost per call now that the extension is on PyTorch's
stable ABI (no version counter in C++, so no cache there).

- CPU: the op scans its index tensors on every call. Measured as the op's time with
  no work (W = 0 worlds, S = 0 images: every check runs, no kernel) minus advance_step's
  (the dispatch alone), for the index vectors of the real runs: NeuroMechFly's 42
  act_ids, a 42-column record, and an exact FlyGym-sized retina map for pool_ommatidia.
- CUDA: the wrapper checks a tensor once per version (flycuda/ops/_values.py); what
  every later call pays is the cache lookup, measured here on the CPU with the check
  widened to CPU tensors (the copy on a first call or after a change is a device sync,
  not measured without a GPU).

    python bench/bench_host_checks.py [--reps 2000]
"""

from __future__ import annotations

import argparse
import time

import torch
from _results import append_results, format_table

import flycuda
from flycuda.ops import _values
from flycuda.vision import RetinaMap


def per_call_us(fn, reps: int) -> float:
    """The median of 5 runs of `reps` calls, in microseconds per call."""
    for _ in range(min(reps, 200)):
        fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        runs.append((time.perf_counter() - t0) / reps * 1e6)
    return sorted(runs)[2]


def flygym_sized_map():
    """An exact pooling map of FlyGym's size: a 512 x 450 eye image, ~720 ommatidia as
    square cells inside an ellipse (FlyGym's are hexagons; the sizes are what count)."""
    import numpy as np

    H, W, cell = 512, 450, 16
    rows, cols = np.mgrid[0:H, 0:W]
    inside = ((rows - H / 2) / (0.5 * H)) ** 2 + ((cols - W / 2) / (0.5 * W)) ** 2 <= 1
    ids = (rows // cell) * (W // cell + 1) + cols // cell + 1
    used = np.unique(ids[inside])
    remap = np.zeros(ids.max() + 1, dtype=np.int64)
    remap[used] = np.arange(1, len(used) + 1)
    id_map = np.where(inside, remap[ids], 0).astype(np.int16)
    pale = (np.arange(len(used)) % 3 == 0).astype(np.int8)
    return RetinaMap.from_arrays(id_map, pale).exact()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--no-results", action="store_true", help="do not append to bench/RESULTS.md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    D, NU = 42, 48
    step = flycuda.new_step_counter("cpu", 2)
    act_ids = torch.randperm(NU)[:D]
    motion = torch.randn(1, 10, D)
    ctrl0 = torch.zeros(0, NU)
    source0, chunks0 = torch.zeros(0, 60), torch.zeros(2, 0, 8, D)
    cols = torch.randint(0, 60, (D,))
    pm = flygym_sized_map()
    pool_args = pm.args()
    pixels0 = torch.zeros(0, 2, pm.rays, 3, dtype=torch.uint8)
    readouts0 = torch.zeros(0, 2, pm.num_ommatidia, 2)
    ops = torch.ops.flycuda
    rows = []
    base = per_call_us(lambda: ops.advance_step.default(step, 0), args.reps)
    rows.append(("advance_step (dispatch only)", 0, base, 0.0))
    t = per_call_us(lambda: ops.motion_to_ctrl.default(motion, step, ctrl0, act_ids, None, 1.0, "clamp", 0), args.reps)
    rows.append(("motion_to_ctrl, W=0: act_ids (unique)", D, t, t - base))
    t = per_call_us(lambda: ops.record_chunk.default(source0, cols, chunks0, step, 1), args.reps)
    rows.append(("record_chunk, W=0: columns", D, t, t - base))
    t = per_call_us(lambda: ops.pool_ommatidia.default(pixels0, *pool_args, readouts0), max(args.reps // 20, 20))
    nnz = int(pool_args[1].shape[0])
    rows.append(("pool_ommatidia, S=0: exact map (5 tensors)", nnz, t, t - base))
    _values.CHECKED_DEVICES = ("cpu",)  # the CUDA path's cache, timed on the CPU
    _values.check_index("bench", "act_ids", act_ids, NU, "nu", unique=True)
    t = per_call_us(lambda: _values.check_index("bench", "act_ids", act_ids, NU, "nu", unique=True), args.reps)
    rows.append(("wrapper check on CUDA, cached (lookup)", D, t, t))

    table = format_table(["what (CPU, 1 thread)", "index entries", "us per call", "of which the check, us"],
                         [[w, n, f"{us:.2f}", f"{c:.2f}"] for w, n, us, c in rows])
    print(table)
    if not args.no_results:
        append_results("index-value checks per call on the stable ABI (issue 29)", "cpu", table,
                       notes="CPU ops scan their index tensors on every call (no version counter in C++); "
                             "the check's share = the op with no work (W = 0 / S = 0) minus advance_step's "
                             "dispatch. CUDA: the wrapper's per-version cache, its lookup timed on the CPU.")

if __name__ == "__main__":
    main()
