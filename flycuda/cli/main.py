"""The ``flycuda`` command line: ``flycuda replay ...``, ``flycuda render STORE``, ``flycuda env TASK``,
``flycuda doctor`` and ``flycuda gpu-check`` (also
``python -m flycuda``).

Errors in what the user gave (missing files, unmatched DOF names, bad numbers)
print one line, ``flycuda: error: ...``, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from ..errors import FlycudaError
from . import doctor, gpucheck
from .env import add_parser as add_env_parser
from .env import run_env
from .render import run_render
from .replay import run_replay


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s}")
    return v


def _nonnegative_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {s!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {s}")
    return v


def _size(s: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 64x48, got {s!r}") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"render size must be positive, got {s}")
    return w, h


def _offsets(s: str) -> list[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated seconds, got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="flycuda", description="flycuda: batched fly-motion replay in MuJoCo Warp")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("replay", help="replay recorded joint angles in N MuJoCo Warp worlds",
                       description="Replay a recording (default: the built-in tripod gait on the built-in "
                                   "hexapod) in N worlds with flycuda's ops; print a performance report.")
    r.add_argument("--worlds", type=_positive_int, default=None,
                   help="number of worlds (default 100 on CUDA, 4 on CPU)")
    r.add_argument("--duration", type=_positive_float, default=None,
                   help="simulated seconds (default: --snippet if given, else 0.5)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--snippet", type=_positive_float, default=None,
                   help="seconds per world; worlds start at evenly spread times of the recording")
    g.add_argument("--offsets", type=_offsets, default=None,
                   help="start time(s) in seconds, comma-separated: one, or one per world")
    r.add_argument("--model", default=None,
                   help="neuromechfly or neuromechfly-capsules (FlyGym's NeuroMechFly as in its GPU tutorial; "
                        "needs flygym), hexapod (the built-in one, the default) or an MJCF file")
    r.add_argument("--motion", default=None,
                   help="spotlight (FlyGym's Spotlight clip; the default for neuromechfly), tripod (the built-in "
                        "gait; the default otherwise) or an .npz recording with angles, fps, dof_names")
    r.add_argument("--interp", choices=["linear", "cubic"], default=None,
                   help="between recorded frames: linear (motion_to_ctrl) or cubic (spline_to_ctrl, FlyGym's "
                        "resampling; the default for spotlight)")
    r.add_argument("--warmup", type=_nonnegative_float, default=None, metavar="SECONDS",
                   help="settle before the replay, the driven joints held at their first targets (default "
                        "0.05 s for neuromechfly, the length of FlyGym's sim.warmup(), which holds the neutral "
                        "pose instead; 0 otherwise)")
    r.add_argument("--mode", choices=["clamp", "loop"], default="clamp",
                   help="past the recording's end: hold the last frame (clamp) or wrap (loop)")
    r.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="default: cuda when a GPU and flycuda's CUDA kernels are present, else cpu")
    r.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                   help="capture the step into a CUDA graph (CUDA only)")
    r.add_argument("--steps-per-graph", type=_positive_int, default=1, metavar="K",
                   help="simulation steps per graph launch")
    r.add_argument("--record-every", type=_positive_int, default=1, metavar="N",
                   help="default sampling interval of the observables (steps)")
    r.add_argument("--observe", nargs="+", default=None, metavar="SPEC",
                   help="what to record, each KIND[:NAMES][@EVERY]: angles (always), qpos, qvel, ctrl, "
                        "actuator_force, body_pos:NAMES, body_quat:NAMES, sensor:NAMES; @N steps or @30hz "
                        "(e.g. --observe qpos@30hz body_pos:c_thorax 'sensor:*contact*'); needs --record "
                        "(or --out). A .zarr store always gets qpos at the video rate too (see --no-qpos)")
    r.add_argument("--no-qpos", action="store_true",
                   help="do not add qpos at the video rate to a .zarr store (then `flycuda render` cannot draw it)")
    r.add_argument("--vision", nargs="?", const="exact", default=None, metavar="SPEC",
                   help="record every world's ommatidia readouts (FlyGym's compound eyes; --model neuromechfly) "
                        "into the store as 'vision': exact or fast[:K] (K rays per ommatidium), @STEPS or "
                        "@RATEhz (default exact@500hz); a video then shows each world's eyes under its tile")
    r.add_argument("--record", default=None, metavar="OUT.zarr",
                   help="the recording: a zarr store (.zarr: streamed in chunks, any size; angles, targets and "
                        "every observable) or .npz (small runs: angles, targets, tracking errors)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing --record store")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="output folder: writes recording.zarr, replay.mp4 (rendered afterwards from the store), "
                        "last_frame.png and joint_angles.png there (each unless its own option names another path)")
    r.add_argument("--render", default=None, metavar="OUT.mp4",
                   help="mosaic video (with a .zarr --record: rendered afterwards from the stored qpos; otherwise "
                        "live, every world, at least the first and the last state)")
    r.add_argument("--render-worlds", default="0:16", metavar="SPEC",
                   help="worlds in a video rendered afterwards (default 0:16)")
    r.add_argument("--frames", default=None, metavar="OUT.png", help="the final state's mosaic as PNG")
    r.add_argument("--plot", default=None, metavar="OUT.png",
                   help="replayed vs target joint angles (one leg, 3 worlds) and the RMSE per DOF (without "
                        "--record the angles are kept in memory: small runs)")
    r.add_argument("--render-every", type=_positive_int, default=None, metavar="N",
                   help="render every N steps (default: 30 frames per simulated second)")
    r.add_argument("--render-size", type=_size, default=(64, 48), metavar="WxH", help="tile size")
    r.add_argument("--camera", default=None,
                   help="model camera(s) to render from, e.g. track or track,side (several: side by side; "
                        "default: track, or the fly's tracking camera)")
    r.add_argument("--renderer", choices=["flycuda", "mjwarp"], default="flycuda",
                   help="flycuda's tile renderer, or MuJoCo Warp's (the baseline)")
    r.add_argument("--profile", default=None, metavar="TRACE.json",
                   help="torch.profiler trace (wait 1, warmup 1, active 3 steps), for Perfetto")
    r.add_argument("--json", default=None, metavar="OUT.json",
                   help="write the report's figures as JSON (for scripts and benchmarks)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    v = sub.add_parser("render", help="render a recording afterwards from its stored qpos",
                       description="Re-poses the selected worlds of a flycuda recording (zarr store with qpos) "
                                   "and renders them with flycuda's tile renderer into a mosaic video.")
    v.add_argument("store", help="the recording (a .zarr store written by flycuda replay --record)")
    v.add_argument("--worlds", default="0:16", help="worlds to show: 0:16, 3, 1,4,9 (default 0:16)")
    v.add_argument("--camera", default=None, help="camera(s), e.g. track,side (default: the replay's)")
    v.add_argument("--out", default="recording.mp4", metavar="VIDEO.mp4", help="the video to write")
    v.add_argument("--frames", default=None, metavar="OUT.png", help="also write the last frame as PNG")
    v.add_argument("--size", type=_size, default=(160, 120), metavar="WxH", help="tile size")
    v.add_argument("--eyes", action=argparse.BooleanOptionalAction, default=None,
                   help="draw each world's recorded eyes (--vision) under its tile (default: when recorded)")
    v.add_argument("--speed", type=_positive_float, default=1.0, help="playback speed (1: real time)")
    v.add_argument("--device", choices=["cuda", "cpu"], default=None)
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_env_parser(sub, _positive_int, _positive_float, _size)
    sub.add_parser("doctor", help="can flycuda run on this machine's GPU (torch, driver, toolkit, archs), and what "
                                  "to do when not", description="Judges torch and its CUDA, the driver, the GPUs, the "
                                  "CUDA toolkit and the archs in flycuda's extension; exits 1 when a GPU is there that "
                                  "flycuda cannot use.")
    c = sub.add_parser("gpu-check", help="self-check on an NVIDIA GPU: CUDA tests, compute-sanitizer, a "
                                         "graph-captured replay, small benchmarks; writes a report",
                       description="Runs flycuda's GPU self-check (see flycuda/cli/gpucheck.py). Without a GPU it "
                                   "says so in one line and exits 1.")
    c.add_argument("--out", default=None, metavar="DIR",
                   help="report folder (default $OUT, else out/gpu-check-<time>)")
    c.add_argument("--results", default=None, metavar="RESULTS.md",
                   help="where the dated section goes (default bench/RESULTS.md)")
    return p


# the replay settings a CLI user sets, by their option (ReplaySettings field -> option)
OPTIONS = {name: "--" + name.replace("_", "-") for name in (
    "worlds", "duration", "snippet", "offsets", "mode", "interp", "device", "graph", "steps_per_graph", "warmup",
    "observe", "record_every", "record", "overwrite", "vision", "render_every", "profile")}


def in_options(message: str) -> str:
    """An error of replay()'s in the command line's words: ``steps_per_graph=4`` is
    ``--steps-per-graph 4`` (``device='cpu'`` is ``--device cpu``), a setting's name is its
    option (one word only where it starts the message, the way the checks name what is wrong)."""
    for name, opt in OPTIONS.items():
        message = re.sub(rf"\b{name}=(['\"]?)([^\s'\",;)]+)\1", rf"{opt} \2", message)
        if "_" in name:
            message = re.sub(rf"(?<![\w-]){name}\b", opt, message)
        elif message.startswith(f"{name} "):
            message = opt + message[len(name):]
    return message


def main(argv=None) -> int:
    """Entry point of the ``flycuda`` command."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "replay":
            return run_replay(args)
        if args.command == "render":
            return run_render(args)
        if args.command == "env":
            return run_env(args)
        if args.command == "gpu-check":
            return gpucheck.main(args.out, args.results)
        if args.command == "doctor":
            return doctor.main()
    except FlycudaError as e:
        line = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"flycuda: error: {in_options(line) if args.command == 'replay' else line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flycuda: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
