"""Benchmark: the per-step glue (targets -> ctrl, counter) at D=42, per step.

Variants, per world count W:
  fused     flycuda.motion_to_ctrl(..., advance=1) on a new_step_counter: one launch
            per step, one atomic per block (the hidden ticket)
  unfused   the same call on a plain [1] counter: the launch plan adds a one-thread
            advance launch (two launches, no atomics)
  separate  flycuda.motion_to_ctrl + flycuda.advance_step: two launches
  warp      the well-known Warp pattern: one kernel copies buffer[w, counter[0], d]
            into ctrl, a second increments the counter (pre-expanded [W, steps, D]
            buffer); captured in a Warp graph on CUDA
  torch     plain torch indexing with a device counter (index_select + index_copy_ + add_)

On CUDA each variant's step is captured once in a graph and replayed --steps times
(timed with CUDA events); on CPU the step runs eagerly --steps times. The median
of --repeats runs is reported as microseconds per step. Beside them, the
emulator's count of atomics per launch of the fused and unfused variants at that
W (the real kernel on the emulated grid, csrc/emu; --no-emu skips it).

    python bench/bench_ops.py                    # CUDA if available, else CPU
    python bench/bench_ops.py --device cpu --worlds 100 1000
"""


import argparse
import statistics
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402
from _timing import time_steps  # noqa: E402

import flycuda  # noqa: E402
from flycuda.sim import streams  # noqa: E402

D = 42


def make_inputs(W: int, T: int, steps: int, device: str, with_expanded: bool):
    g = torch.Generator().manual_seed(0)
    motion = torch.randn(1, T, D, generator=g).to(device)
    offsets = torch.randint(0, T, (W,), generator=g).to(device=device, dtype=torch.float64)
    act_ids = torch.randperm(D, generator=g).to(device=device, dtype=torch.int32)
    ctrl = torch.zeros(W, D, device=device)
    expanded = None
    if with_expanded:  # the usual practice: [W, steps, D] at the simulation rate
        idx = (offsets.long()[:, None] + torch.arange(steps, device=device)[None, :]).clamp(max=T - 1)
        expanded = motion[0][idx]  # [W, steps, D]
    return motion, offsets, act_ids, ctrl, expanded


def warp_variant(W, T, steps, device, expanded, act_ids, ctrl, repeats):
    """The Warp-kernel pattern; returns us/step (graph replays on CUDA)."""
    import warp as wp

    from flycuda.sim.mjwarp import quiet_warp

    quiet_warp(wp)
    wp.init()

    from _warp_pattern import make_step

    wdev = "cuda:0" if device.startswith("cuda") else "cpu"
    step = make_step(wp.from_torch(expanded.contiguous()), wp.from_torch(act_ids), wp.from_torch(ctrl), wdev)

    step()
    if wdev == "cpu":
        return time_steps(step, steps, "cpu", repeats)
    runs = []
    with streams.shared_stream(wdev):
        graph = streams.capture_graph(step, wdev)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(steps):
                streams.launch_graph(graph)
            end.record()
            torch.cuda.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / steps)
    return statistics.median(runs)


def emu_atomics(W: int) -> tuple[str, str]:
    """(fused, unfused) atomics of one motion_to_ctrl call at [W, D] as the emulator
    counts them: "atomics (blocks)" over the call's launches."""
    import os

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from helpers import emu

    out = []
    for counter in (flycuda.new_step_counter("cpu", 0), torch.zeros(1, dtype=torch.int64)):
        case = emu.Case("motion_to_ctrl", W=W, nu=D, frames_per_step=1.0, loop=0, advance=1, ctrl_offset=0,
                        ctrl_s0=D, ctrl_s1=1)
        case.array("motion", torch.zeros(1, 4, D)).array("act_ids", torch.arange(D))
        case.array("ctrl", torch.zeros(W * D))
        case.counter(counter)
        emu.run([case], "plain")
        log = case.out["launches"]  # (blocks, atomics, max per block) per launch
        out.append(f"{int(log[:, 1].sum())} in {len(log)} launch(es), <= {int(log[:, 2].max())}/block")
    return out[0], out[1]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if flycuda.cuda_ready() else "cpu", choices=["cpu", "cuda"])
    p.add_argument("--worlds", type=int, nargs="+", default=[100, 1000, 4096, 8192])
    p.add_argument("--steps", type=int, default=None, help="steps per timed run (default 1000 on CUDA, 200 on CPU)")
    p.add_argument("--frames", type=int, default=660, help="recorded frames T (2 s at 330 Hz)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-warp", action="store_true", help="skip the Warp-kernel variant")
    p.add_argument("--no-emu", action="store_true", help="skip the emulator's atomic counts")
    p.add_argument("--no-record", action="store_true", help="do not append to bench/RESULTS.md")
    args = p.parse_args(argv)
    device = args.device
    if device == "cuda" and not flycuda.cuda_ready():
        p.error("--device cuda needs a GPU and flycuda built with CUDA")
    steps = args.steps or (1000 if device == "cuda" else 200)
    header = ["worlds", "fused us/step", "unfused us/step", "separate us/step", "warp us/step", "torch us/step",
              "warp/fused", "fused atomics (emu)", "unfused atomics (emu)"]
    rows = []
    for W in args.worlds:
        motion, offsets, act_ids, ctrl, expanded = make_inputs(W, args.frames, steps, device,
                                                               not args.no_warp)
        step = flycuda.new_step_counter(device)
        plain = torch.zeros(1, dtype=torch.int64, device=device)  # no hidden ticket: unfused plan

        def unfused():
            flycuda.motion_to_ctrl(motion, plain, ctrl, act_ids, offsets=offsets, mode="loop", advance=1)

        def fused():
            flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, offsets=offsets, mode="loop",
                                   advance=1)

        def separate():
            flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, offsets=offsets, mode="loop")
            flycuda.advance_step(step)

        frame = torch.zeros(1, dtype=torch.int64, device=device)
        act_long = act_ids.long()
        tw = torch.arange(W, device=device)
        offs_long = offsets.long()

        def torch_indexing():
            f = (offs_long + frame) % args.frames  # [W]
            ctrl.index_copy_(1, act_long, motion[0][f])
            frame.add_(1)

        t_fused = time_steps(fused, steps, device, args.repeats)
        t_unf = time_steps(unfused, steps, device, args.repeats)
        t_sep = time_steps(separate, steps, device, args.repeats)
        t_torch = time_steps(torch_indexing, steps, device, args.repeats)
        t_warp = (float("nan") if args.no_warp else
                  warp_variant(W, args.frames, steps, device, expanded, act_ids, ctrl, args.repeats))
        del tw
        a_fused, a_unf = ("-", "-") if args.no_emu else emu_atomics(W)
        rows.append([W, f"{t_fused:.2f}", f"{t_unf:.2f}", f"{t_sep:.2f}", f"{t_warp:.2f}", f"{t_torch:.2f}",
                     f"{t_warp / t_fused:.2f}x", a_fused, a_unf])
        print(f"W={W}: fused {t_fused:.2f} us, unfused {t_unf:.2f} us, separate {t_sep:.2f} us, "
              f"warp {t_warp:.2f} us, torch {t_torch:.2f} us; atomics fused {a_fused}, unfused {a_unf}", flush=True)
    table = format_table(header, rows)
    print(table)
    if not args.no_record:
        append_results("bench_ops: per-step glue, D=42", device, table,
                       notes=f"{steps} steps per run, median of {args.repeats}, T={args.frames}; "
                             + ("graph replays" if device == "cuda" else "eager on CPU"))


if __name__ == "__main__":
    main()
