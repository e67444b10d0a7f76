"""``flycuda replay``: its options, mapped onto :class:`flycuda.replay.ReplaySettings` and
:class:`flycuda.replay.job.Outputs`; :func:`flycuda.replay.job.run_job` does the rest (one
process, or one rank's share of a torchrun job)."""

from __future__ import annotations

import argparse
import re

from ..errors import RankError, ReplayError
from ..replay import ReplaySettings
from ..replay.job import Outputs, run_job
from .args import add_store_options, nonnegative_float, offsets, positive_float, positive_int, size
from .args import resumed_args as args_of_resumed

__all__ = ["add_parser", "run", "settings_of", "in_options"]


def add_parser(sub) -> None:
    """The ``replay`` subcommand's options."""
    r = sub.add_parser("replay", help="replay recorded joint angles in N MuJoCo Warp worlds",
                       description="Replay a recording (default: the built-in tripod gait on the built-in "
                                   "hexapod) in N worlds with flycuda's ops; print a performance report.")
    r.add_argument("--worlds", type=positive_int, default=None,
                   help="number of worlds (default 100 on CUDA, 4 on CPU)")
    r.add_argument("--duration", type=positive_float, default=None,
                   help="simulated seconds (default: --snippet if given, else the whole recording)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--snippet", type=positive_float, default=None,
                   help="seconds per world; worlds start at evenly spread times of the recording")
    g.add_argument("--offsets", type=offsets, default=None,
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
    r.add_argument("--warmup", type=nonnegative_float, default=None, metavar="SECONDS",
                   help="settle before the replay, the driven joints held at their first targets (default "
                        "0.05 s for neuromechfly, the length of FlyGym's sim.warmup(), which holds the neutral "
                        "pose instead; 0 otherwise)")
    r.add_argument("--mode", choices=["clamp", "loop"], default="clamp",
                   help="past the recording's end: hold the last frame (clamp) or wrap (loop)")
    r.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="default: cuda when a GPU and flycuda's CUDA kernels are present, else cpu")
    r.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                   help="capture the step into a CUDA graph (CUDA only)")
    r.add_argument("--steps-per-graph", type=positive_int, default=1, metavar="K",
                   help="simulation steps per graph launch")
    r.add_argument("--record-every", type=positive_int, default=1, metavar="N",
                   help="default sampling interval of the observables (steps)")
    r.add_argument("--observe", nargs="+", default=None, metavar="SPEC",
                   help="what to record, each KIND[:NAMES][@EVERY]: angles (always), qpos, qvel, ctrl, "
                        "actuator_force, body_pos:NAMES, body_quat:NAMES, sensor:NAMES; @N steps or @30hz "
                        "(e.g. --observe qpos@30hz body_pos:c_thorax 'sensor:*contact*'); with --vision also "
                        "connectome[:TYPES] or connectome_columns[:TYPES] (flyvis's network behind the eyes, each "
                        "eye's central column or all; default T4a-d, T5a-d); needs --record (or --out). A .zarr "
                        "store always gets qpos at the video rate too (see --no-qpos)")
    r.add_argument("--no-qpos", action="store_true",
                   help="do not add qpos at the video rate to a .zarr store (then `flycuda render` cannot draw it)")
    r.add_argument("--vision", nargs="?", const="exact", default=None, metavar="SPEC",
                   help="record every world's ommatidia readouts (FlyGym's compound eyes; --model neuromechfly) "
                        "into the store as 'vision': exact or fast[:K] (K rays per ommatidium), @STEPS or "
                        "@RATEhz (default exact@500hz); a video then shows each world's eyes under its tile")
    r.add_argument("--connectome-checkpoint", default=None, metavar="PATH",
                   help="a flyvis checkpoint for --observe connectome (default: the connectome's initial parameters)")
    add_store_options(r, "the recording: a zarr store (.zarr: streamed in chunks, any size; angles, targets and "
                        "every observable) or .npz (small runs: angles, targets, tracking errors)")
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
    r.add_argument("--render-every", type=positive_int, default=None, metavar="N",
                   help="render every N steps (default: 30 frames per simulated second)")
    r.add_argument("--render-size", type=size, default=(64, 48), metavar="WxH", help="tile size")
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
    r.add_argument("--resume", default=None, metavar="STORE.zarr",
                   help="go on with an interrupted or preempted replay from its latest snapshot, into its store, "
                        "bit for bit as if it had never stopped: its settings are the command line it was started "
                        "with (the store keeps it); give no other option but --no-progress")
    r.set_defaults(run=run)


def _replay_parser() -> argparse.ArgumentParser:
    """A parser of ``replay``'s options alone (``flycuda.cli.main`` holds every subcommand's)."""
    p = argparse.ArgumentParser(prog="flycuda")
    add_parser(p.add_subparsers(dest="command", required=True))
    return p


def resumed_args(args):
    """``--resume STORE``: the options the store's run was started with (its ``command``),
    with ``--resume`` and this command's ``--no-progress``; no other option may be given."""
    parsed = args_of_resumed(args, _replay_parser(), "replay", ReplayError)
    if parsed.out is None and parsed.record is None:
        parsed.record = args.resume
    return parsed


def settings_of(args) -> tuple[ReplaySettings, Outputs]:
    """The command line's options as the replay's settings and the job's outputs."""
    settings = ReplaySettings(
        model=args.model, motion=args.motion, worlds=args.worlds, duration=args.duration, snippet=args.snippet,
        offsets=args.offsets, mode=args.mode, interp=args.interp, device=args.device, graph=args.graph,
        steps_per_graph=args.steps_per_graph, warmup=args.warmup, observe=tuple(args.observe or ("angles",)),
        record_every=args.record_every, record=args.record, overwrite=args.overwrite, vision=args.vision,
        render_every=args.render_every or 0, profile=args.profile, progress=not args.no_progress,
        connectome_checkpoint=args.connectome_checkpoint, resume=args.resume)
    outputs = Outputs(out=args.out, video=args.render, frames=args.frames, plot=args.plot, json=args.json,
                      render_worlds=args.render_worlds, render_size=args.render_size, renderer=args.renderer,
                      camera=args.camera, qpos=not args.no_qpos)
    return settings, outputs


def run(args) -> int:
    """``flycuda replay``: the job, then its report (on rank 0 of a torchrun job)."""
    if args.resume is not None:
        args = resumed_args(args)
    try:
        res = run_job(*settings_of(args))
    except RankError as e:
        if e.rank != 0:
            return 2  # rank 0 says why
        raise
    if res is None:  # a rank other than 0
        return 0
    print(res.report())
    if args.profile:
        print(res.profile_summary)
    if len(getattr(res, "rank_walls", ())) > 1:
        print("  per-rank wall  " + ", ".join(f"rank {i}: {w:.3f} s" for i, w in enumerate(res.rank_walls)))
    return 0


# the settings a CLI user sets, by their option (ReplaySettings / Outputs field -> option)
OPTIONS = {name: "--" + name.replace("_", "-") for name in (
    "worlds", "duration", "snippet", "offsets", "mode", "interp", "device", "graph", "steps_per_graph", "warmup",
    "observe", "record_every", "record", "overwrite", "vision", "render_every", "profile", "plot", "model", "motion",
    "camera", "frames", "out", "renderer", "connectome_checkpoint")}
# the names that become their option where they start a message (``model`` and ``motion`` do not:
# "model file not found" is the file's, not the option's)
LEADING = set(OPTIONS) - {"model", "motion"}


def in_options(message: str) -> str:
    """An error of replay()'s in the command line's words: ``steps_per_graph=4`` is
    ``--steps-per-graph 4`` (``device='cpu'`` is ``--device cpu``), a setting's name is its
    option (one word only where it starts the message, the way the checks name what is wrong)."""
    for name, opt in OPTIONS.items():
        message = re.sub(rf"\b{name}=(['\"]?)([^\s'\",;)]+)\1", rf"{opt} \2", message)
        if "_" in name:
            message = re.sub(rf"(?<![\w-]){name}\b", opt, message)
        elif name in LEADING and message.startswith(f"{name} "):
            message = opt + message[len(name):]
    return message
