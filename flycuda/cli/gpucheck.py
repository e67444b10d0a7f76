"""``flycuda gpu-check``: the thin entry of flycuda's GPU self-check (:mod:`flycuda.gpucheck`,
a developer's harness of tests, sanitizers and benchmarks)."""

from __future__ import annotations

from .. import gpucheck
from ..gpucheck import GROUPS  # the step groups --only picks from

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``gpu-check`` subcommand's options."""
    c = sub.add_parser("gpu-check", help="self-check on an NVIDIA GPU: CUDA tests, compute-sanitizer, a "
                                         "graph-captured replay, small benchmarks; writes a report",
                       description="Runs flycuda's GPU self-check (see flycuda/gpucheck). Without a GPU it "
                                   "says so in one line and exits 1.")
    c.add_argument("--out", default=None, metavar="DIR",
                   help="report folder (default $OUT, else out/gpu-check-<time>)")
    c.add_argument("--results", default=None, metavar="RESULTS.md",
                   help="where the dated section goes (default bench/RESULTS.md)")
    c.add_argument("--quick", action="store_true",
                   help="sized for a short lease: sanitizers on a sample of each op test's cases, one size per "
                        "benchmark, a 5-iteration PPO curve")
    c.add_argument("--only", default=None, metavar="GROUPS", type=_groups,
                   help=f"comma-separated groups to run alone, of: {','.join(GROUPS)} (default: all)")
    c.add_argument("--dry-run", action="store_true",
                   help="list the steps (with --only: those), their commands and what would be skipped, and "
                        "run none (no GPU needed)")
    c.set_defaults(run=run)



def _groups(text: str) -> list[str]:
    """``--only``'s value: known group names, comma-separated."""
    import argparse  # noqa: PLC0415

    names = [g.strip() for g in text.split(",") if g.strip()]
    unknown = [g for g in names if g not in GROUPS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"expected comma-separated groups of {','.join(GROUPS)}, got {text!r}")
    return names


def run(args) -> int:
    """Runs the self-check."""
    return gpucheck.main(args.out, args.results, quick=args.quick, only=args.only, dry=args.dry_run)
