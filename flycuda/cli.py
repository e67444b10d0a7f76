"""The ``flycuda`` command line: ``flycuda replay ...`` and ``flycuda gpu-check`` (also
``python -m flycuda``).

Errors in what the user gave (missing files, unmatched DOF names, bad numbers)
print one line, ``flycuda: error: ...``, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np


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
                   help="record joint angles every N steps")
    r.add_argument("--record", default=None, metavar="OUT.npz",
                   help="write recorded joint angles, targets and tracking errors")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="output folder: writes replay.mp4, last_frame.png, joint_angles.png and recording.npz "
                        "there (each unless its own option names another path)")
    r.add_argument("--render", default=None, metavar="OUT.mp4",
                   help="mosaic video of all worlds (at least the first and the last state)")
    r.add_argument("--frames", default=None, metavar="OUT.png", help="the final state's mosaic as PNG")
    r.add_argument("--plot", default=None, metavar="OUT.png",
                   help="replayed vs target joint angles (one leg, 3 worlds) and the RMSE per DOF")
    r.add_argument("--render-every", type=_positive_int, default=None, metavar="N",
                   help="render every N steps (default: 30 frames per simulated second)")
    r.add_argument("--render-size", type=_size, default=(64, 48), metavar="WxH", help="tile size")
    r.add_argument("--camera", default=None,
                   help="model camera to render from (default: track, or the fly's tracking camera)")
    r.add_argument("--renderer", choices=["flycuda", "mjwarp"], default="flycuda",
                   help="flycuda's tile renderer, or MuJoCo Warp's (the baseline)")
    r.add_argument("--profile", default=None, metavar="TRACE.json",
                   help="torch.profiler trace (wait 1, warmup 1, active 3 steps), for Perfetto")
    r.add_argument("--json", default=None, metavar="OUT.json",
                   help="write the report's figures as JSON (for scripts and benchmarks)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    c = sub.add_parser("gpu-check", help="self-check on an NVIDIA GPU: CUDA tests, compute-sanitizer, a "
                                         "graph-captured replay, small benchmarks; writes a report",
                       description="Runs flycuda's GPU self-check (see flycuda/gpucheck.py). Without a GPU it "
                                   "says so in one line and exits 1.")
    c.add_argument("--out", default=None, metavar="DIR",
                   help="report folder (default $OUT, else out/gpu-check-<time>)")
    c.add_argument("--results", default=None, metavar="RESULTS.md",
                   help="where the dated section goes (default bench/RESULTS.md)")
    return p


def _write_record(path: str, res, offsets_note: str) -> None:
    tmp = path + ".part.npz"
    np.savez(tmp, recorded=res.recorded.numpy(), targets=res.targets.numpy(),
             rmse_per_dof=res.rmse_per_dof.numpy(), dof_names=np.array(res.dof_names),
             times=np.arange(res.recorded.shape[1]) * res.record_every * res.timestep,
             timestep=np.float64(res.timestep), worlds=np.int64(res.worlds), offsets=offsets_note)
    os.replace(tmp, path)


OUT_FILES = {"render": "replay.mp4", "frames": "last_frame.png", "plot": "joint_angles.png",
             "record": "recording.npz"}


def _apply_out_dir(args) -> None:
    """--out DIR: create it and put every output not named otherwise there."""
    if args.out is None:
        return
    os.makedirs(args.out, exist_ok=True)
    for opt, name in OUT_FILES.items():
        if getattr(args, opt) is None:
            setattr(args, opt, os.path.join(args.out, name))


NAMED_MODELS = ("hexapod", "neuromechfly", "neuromechfly-capsules")
NAMED_MOTIONS = ("tripod", "spotlight")


def _check_paths(args) -> None:
    for path, what, names in ((args.model, "model", NAMED_MODELS), (args.motion, "motion", NAMED_MOTIONS)):
        if path is not None and path not in names and not os.path.isfile(path):
            raise FileNotFoundError(f"{what} file not found: {path} (or name one of: {', '.join(names)})")
    nmf = (args.model or "hexapod") in NAMED_MODELS[1:]
    if args.motion == "spotlight" and not nmf:
        raise ValueError("--motion spotlight is NeuroMechFly's recording: use it with --model neuromechfly")
    if args.motion == "tripod" and nmf:
        raise ValueError("--motion tripod drives the built-in hexapod: use --model hexapod (or a recording "
                         "named with NeuroMechFly's DOFs)")
    for path in (args.record, args.json, args.profile, args.render, args.frames, args.plot):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise FileNotFoundError(f"output directory does not exist: {os.path.dirname(os.path.abspath(path))}")


def _device(args) -> str:
    import torch

    import flycuda

    device = args.device or ("cuda" if flycuda.cuda_ready() else "cpu")
    if device == "cuda" and not flycuda.cuda_ready():
        raise ValueError("--device cuda needs a visible GPU and flycuda built with CUDA "
                         f"(GPU visible: {torch.cuda.is_available()}, CUDA kernels built: {flycuda.has_cuda_ops()})")
    return device


def _setup(args, device: str, n: int):
    """The worlds and what drives them: (sim, motion, act_ids or None, camera, interp, warmup)."""
    from .bridge import Sim
    from .motion import load_motion, tripod_gait

    model = args.model or "hexapod"
    nmf = model in NAMED_MODELS[1:]
    own = args.motion not in (None, "spotlight", "tripod")
    motion = load_motion(args.motion) if own else None  # a bad file fails before any build
    if nmf:
        from . import flygym as fg

        setup = fg.Setup(model, n, device=device)
        sim, act_ids, camera, warmup = setup.sim, setup.act_ids, setup.camera, 0.05
        if motion is None:
            motion = fg.spotlight(setup.fly)
        else:
            act_ids = None  # a recording of its own: matched by its DOF names
    else:
        sim = Sim.build(None if model == "hexapod" else model, n, device=device)
        act_ids, camera, warmup = None, "track", 0.0
        motion = motion if motion is not None else tripod_gait()
    interp = args.interp or ("cubic" if nmf and not own else "linear")
    warmup = args.warmup if args.warmup is not None else warmup
    return sim, motion, act_ids, args.camera or camera, interp, warmup


def _replay_share(args, device: str, worlds: int, share: tuple[int, int] | None, primary: bool):
    """Runs the worlds [start, start + count) of a ``worlds``-world job (all when share is None).
    ``primary``: this process renders and profiles (rank 0, or the only process)."""
    from .motion import Motion
    from .render import FrameWriter, MjwRenderer, TileRenderer
    from .replay import ReplayError, _resolve_offsets, replay

    n = worlds if share is None else share[1]
    if n == 0:
        raise ReplayError(f"no worlds to run: {worlds} world(s) over more ranks than that")
    sim, motion, act_ids, camera, interp, warmup = _setup(args, device, n)
    duration = args.duration or (args.snippet if args.snippet else 0.5)
    offsets = None
    if share is not None:
        start = share[0]
        # Offsets of the whole job, then this rank's slice (same starts as one process).
        offsets = _resolve_offsets(motion, worlds, args.snippet, args.offsets)[start:start + n].clone()
        if motion.angles.dim() == 3 and motion.angles.shape[0] == worlds:
            a64 = motion.angles64[start:start + n] if motion.angles64 is not None else None
            motion = Motion(motion.angles[start:start + n], motion.fps, motion.dof_names, angles64=a64)
    writer = renderer = None
    render_every = 0
    sim.camera_id(camera)  # a camera the model lacks is an error, rendering or not
    if primary and (args.render or args.frames):
        writer = FrameWriter(video=args.render, png=args.frames, fps=30.0)
        cls = TileRenderer if args.renderer == "flycuda" else MjwRenderer
        kw = {"mosaic": True} if cls is TileRenderer else {}
        renderer = cls(sim, camera=camera, width=args.render_size[0], height=args.render_size[1], **kw)
        render_every = args.render_every or max(1, round(1.0 / (30.0 * sim.timestep)))
    res = replay(motion=motion, worlds=n, duration=duration,
                 snippet=args.snippet if share is None else None,
                 offsets=args.offsets if share is None else offsets, mode=args.mode, graph=args.graph,
                 steps_per_graph=args.steps_per_graph, record_every=args.record_every,
                 render_every=render_every, renderer=renderer, frame_writer=writer,
                 profile=args.profile if primary else None, progress=not args.no_progress and primary,
                 sim=sim, interp=interp, act_ids=act_ids, warmup=warmup)
    res.model = args.model or "hexapod"
    res.motion = args.motion or ("spotlight" if res.model in NAMED_MODELS[1:] else "tripod")
    if writer is not None:
        res.outputs += writer.close()
    return res


def _write_json(path: str, res) -> None:
    import json

    doc = {"worlds": res.worlds, "steps": res.steps, "timestep": res.timestep, "device": res.device,
           "graph": res.graph, "steps_per_graph": res.steps_per_graph, "wall_seconds": res.wall_seconds,
           "jit_seconds": res.jit_seconds, "realtime_factor": res.realtime_factor,
           "world_steps_per_s": res.world_steps_per_s, "split_seconds": res.split_seconds,
           "rmse_deg_per_dof": [math.degrees(float(x)) for x in res.rmse_per_dof],
           "rank_walls": getattr(res, "rank_walls", [res.wall_seconds])}
    tmp = path + ".part"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def _finish(args, res) -> int:
    if args.record:
        _write_record(args.record, res, "snippet" if args.snippet else "offsets" if args.offsets else "zero")
        res.outputs.append(args.record)
    if args.plot:
        from .plot import plot_tracking

        plot_tracking(res, args.plot)
        res.outputs.append(args.plot)
    res.out_dir = args.out or ""
    if args.profile:
        res.outputs.append(args.profile)
    if args.json:
        _write_json(args.json, res)
        res.outputs.append(args.json)
    print(res.report())
    if args.profile:
        print(res.profile_summary)
    return 0


def run_replay(args) -> int:
    """``flycuda replay`` in one process, or as one rank of a torchrun job."""
    from . import distributed

    _apply_out_dir(args)
    _check_paths(args)
    info = distributed.rank_info()
    if info is None or info.world_size == 1:
        device = _device(args)
        worlds = args.worlds or (100 if device == "cuda" else 4)
        return _finish(args, _replay_share(args, device, worlds, None, primary=True))
    return _run_distributed(args, info)


def _run_distributed(args, info) -> int:
    from . import distributed

    distributed.init(info)
    try:
        payload = None
        try:
            device = distributed.device_for(info, _device(args))
            worlds = args.worlds or (100 if device.startswith("cuda") else 4)
            share = distributed.split_worlds(worlds, info.world_size)[info.rank]
            res = _replay_share(args, device, worlds, share, primary=info.rank == 0)
            payload = ("ok", res, worlds)
        except Exception as e:  # noqa: BLE001 - every rank must reach the exchange below
            payload = ("error", f"rank {info.rank}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", None)
        parts = distributed.exchange(payload)
        errors = [p[1] for p in parts if p[0] == "error"]
        if errors:
            if info.rank == 0:
                print(f"flycuda: error: {errors[0]}" + (f" (and {len(errors) - 1} more rank(s) failed)"
                                                        if len(errors) > 1 else ""), file=sys.stderr)
            return 2
        if info.rank != 0:
            return 0
        merged = distributed.merge_results([p[1] for p in parts], parts[0][2])
        merged.outputs = list(parts[0][1].outputs)
        rc = _finish(args, merged)
        print("  per-rank wall  " + ", ".join(f"rank {i}: {w:.3f} s" for i, w in enumerate(merged.rank_walls)))
        return rc
    finally:
        distributed.finish()


def main(argv=None) -> int:
    """Entry point of the ``flycuda`` command."""
    args = build_parser().parse_args(argv)
    from .bridge import BridgeError
    from .motion import MotionError
    from .render import RenderError
    from .replay import ReplayError

    try:
        if args.command == "replay":
            return run_replay(args)
        if args.command == "gpu-check":
            from . import gpucheck

            return gpucheck.main(args.out, args.results)
    except (FileNotFoundError, MotionError, BridgeError, RenderError, ReplayError, ValueError) as e:
        print(f"flycuda: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flycuda: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
