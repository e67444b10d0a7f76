"""The command line's argument types: each parses one option's text or says in one line what
it expected (argparse prints it as ``flycuda: error: ...``)."""

from __future__ import annotations

import argparse
import ast
import math

__all__ = ["positive_int", "positive_float", "nonnegative_float", "size", "offsets", "task_option", "add_store_options",
           "resumed_args"]


def positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _number(expected: str, ok):
    """An argument type: a finite float for which ``ok(v)`` holds, else one line saying
    ``expected``."""
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {s!r}") from None
        if not (math.isfinite(v) and ok(v)):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {s}")
        return v
    return parse


positive_float = _number("a positive number", lambda v: v > 0)
nonnegative_float = _number("a number >= 0", lambda v: v >= 0)


def size(s: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 64x48, got {s!r}") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"render size must be positive, got {s}")
    return w, h


def offsets(s: str) -> list[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated seconds, got {s!r}") from None


def task_option(s: str) -> tuple[str, object]:
    """``NAME=VALUE``: one of a task's options; VALUE a Python literal (``0.5``, ``(200, 400)``,
    ``None``, ``True``) or else the text itself (``advection_diffusion``)."""
    name, eq, text = s.partition("=")
    if not eq or not name.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (e.g. wind=(200,400)), got {s!r}")
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        value = text.strip()
    return name.strip(), value


def add_store_options(parser, record_help: str) -> None:
    """``--record OUT.zarr`` (what goes into the store: ``record_help``) and ``--overwrite``."""
    parser.add_argument("--record", default=None, metavar="OUT.zarr", help=record_help)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --record store")


def resumed_args(args, parser: argparse.ArgumentParser, command: str, error: type) -> argparse.Namespace:
    """``flycuda COMMAND --resume STORE``: the options the store's run was started with (the
    command line the store keeps), parsed by ``parser`` (``COMMAND``'s alone), with ``--resume``
    and this command's ``--no-progress``. Any other option given is refused, as is a store
    another command wrote or that was itself a resume (``error``: the command's error class)."""
    from ..errors import RecordingError, StoreError  # noqa: PLC0415
    from ..recording.reader import Recording  # noqa: PLC0415  (zarr: only a resume needs it)

    defaults = vars(parser.parse_args([command]))
    given = [f"--{k.replace('_', '-')}" if k != "task" else repr(v) for k, v in vars(args).items()
             if k not in ("resume", "no_progress", "run", "command") and v != defaults.get(k)]
    if given:
        raise error(f"--resume takes the settings the store was recorded with; drop {', '.join(given)}")
    try:
        stored = list(Recording.open(args.resume).info.get("command") or [])
    except (RecordingError, StoreError) as e:
        raise error(f"cannot resume {args.resume}: {e}") from None
    if command not in stored:
        raise error(f"cannot resume {args.resume}: it was not written by flycuda {command} (its command: "
                    f"{' '.join(stored) or 'none'})")
    old = stored[stored.index(command) + 1:]
    if "--resume" in old:  # resumed before: the command of the run it resumed is the same store's
        raise error(f"cannot resume {args.resume}: its command is itself a --resume")
    parsed = parser.parse_args([command, *old])
    parsed.resume, parsed.no_progress, parsed.overwrite = args.resume, args.no_progress, False
    return parsed
