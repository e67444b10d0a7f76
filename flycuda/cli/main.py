"""The ``flycuda`` command line: ``flycuda replay ...``, ``flycuda render STORE``, ``flycuda env TASK``,
``flycuda brain run``, ``flycuda doctor`` and ``flycuda gpu-check`` (also ``python -m flycuda``). Each subcommand's
module owns its options (``add_parser``) and what it runs (``run``); this one only parses and
reports.

Errors in what the user gave (missing files, unmatched DOF names, bad numbers)
print one line, ``flycuda: error: ...``, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import FlycudaError
from ..recording.store import as_command
from ..sim.preempt import Preempted
from . import brain, doctor, env, gpucheck, render, replay

__all__ = ["build_parser", "main", "SUBCOMMANDS"]

SUBCOMMANDS = (replay, render, env, brain, doctor, gpucheck)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (each sets ``run``, the function it runs)."""
    p = _Parser(prog="flycuda", description="flycuda: batched fly-motion replay in MuJoCo Warp")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in SUBCOMMANDS:
        command.add_parser(sub)
    return p


def main(argv=None) -> int:
    """Entry point of the ``flycuda`` command."""
    args = build_parser().parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with as_command(["flycuda", *argv]):  # what a store records, and --resume runs again
            return args.run(args)
    except FlycudaError as e:
        line = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"flycuda: error: {replay.in_options(line) if args.command == 'replay' else line}", file=sys.stderr)
        return 2
    except Preempted as e:  # SIGTERM / SIGINT: the run wrote its store and a snapshot, then stopped
        how = f"; go on with: flycuda {args.command} --resume {e.store}" if e.store else ""
        print(f"flycuda: preempted: {e}{how}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("flycuda: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
