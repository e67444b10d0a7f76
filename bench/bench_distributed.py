"""Benchmark: replay throughput with 1 vs N processes under torchrun.

Runs ``torchrun --standalone --nproc-per-node P -m flycuda replay ... --json`` for
each P and reports world-steps/s (total worlds x timed steps / slowest rank's
wall time) and the speed-up over one process. On CPU each process gets
OMP_NUM_THREADS = cores / P.

    python bench/bench_distributed.py --device cpu --worlds 8 --procs 1 2
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402


def run(procs: int, device: str, worlds: int, duration: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // procs)))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}",
               "-m", "flycuda", "replay", "--no-progress", "--device", device, "--worlds", str(worlds),
               "--snippet", "0.1", "--duration", str(duration), "--json", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"bench_distributed: {procs} process(es) failed:\n{proc.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--worlds", type=int, default=8)
    p.add_argument("--duration", type=float, default=0.1)
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args(argv)
    rows, base = [], None
    for n in args.procs:
        m = run(n, args.device, args.worlds, args.duration)
        base = base or m["world_steps_per_s"]
        rows.append([n, args.worlds, m["steps"], f"{m['world_steps_per_s']:,.0f}",
                     f"{m['world_steps_per_s'] / base:.2f}x", ", ".join(f"{w:.2f}" for w in m["rank_walls"])])
        print(f"{n} process(es): {m['world_steps_per_s']:,.0f} world-steps/s", flush=True)
    table = format_table(["processes", "worlds", "steps", "world-steps/s", "speed-up", "rank walls (s)"], rows)
    print(table)
    if not args.no_record:
        append_results("bench_distributed: torchrun scale-out of the replay", args.device, table,
                       notes=f"gloo; snippet 0.1 s; duration {args.duration} s; OMP threads = cores / processes")


if __name__ == "__main__":
    main()
