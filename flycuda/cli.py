"""The ``flycuda`` command line: ``flycuda replay ...``, ``flycuda render STORE`` and ``flycuda gpu-check`` (also
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
                   help="default sampling interval of the observables (steps)")
    r.add_argument("--observe", nargs="+", default=None, metavar="SPEC",
                   help="what to record, each KIND[:NAMES][@EVERY]: angles (always), qpos, qvel, ctrl, "
                        "actuator_force, body_pos:NAMES, body_quat:NAMES, sensor:NAMES; @N steps or @30hz "
                        "(e.g. --observe qpos@30hz body_pos:c_thorax 'sensor:*contact*')")
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
                   help="replayed vs target joint angles (one leg, 3 worlds) and the RMSE per DOF")
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
    c = sub.add_parser("gpu-check", help="self-check on an NVIDIA GPU: CUDA tests, compute-sanitizer, a "
                                         "graph-captured replay, small benchmarks; writes a report",
                       description="Runs flycuda's GPU self-check (see flycuda/gpucheck.py). Without a GPU it "
                                   "says so in one line and exits 1.")
    c.add_argument("--out", default=None, metavar="DIR",
                   help="report folder (default $OUT, else out/gpu-check-<time>)")
    c.add_argument("--results", default=None, metavar="RESULTS.md",
                   help="where the dated section goes (default bench/RESULTS.md)")
    return p


OUT_FILES = {"render": "replay.mp4", "frames": "last_frame.png", "plot": "joint_angles.png",
             "record": "recording.zarr"}


def _apply_out_dir(args) -> None:
    """--out DIR: create it and put every output not named otherwise there."""
    if args.out is None:
        return
    os.makedirs(args.out, exist_ok=True)
    for opt, name in OUT_FILES.items():
        if getattr(args, opt) is None:
            setattr(args, opt, os.path.join(args.out, name))


from .scenario import NAMED_MODELS, NAMED_MOTIONS  # noqa: E402


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
    if args.vision and (args.model or "hexapod") == "hexapod":
        raise ValueError("--vision needs a fly with eyes: --model neuromechfly (FlyGym's fly with its eye cameras)")
    if args.vision and args.record and args.record.endswith(".npz"):
        raise ValueError("--vision readouts go into a .zarr store (--record out.zarr); an .npz keeps only the "
                         "joint angles and targets")
    if args.vision:
        from .vision_stage import parse_vision

        parse_vision(args.vision)  # a bad spec fails before any build
    if args.record is not None and not args.record.endswith((".zarr", ".npz")):
        raise ValueError(f"--record must end in .zarr (a zarr store) or .npz (small runs), got {args.record}")
    if args.record and args.record.endswith(".zarr"):
        from .store import check_path

        check_path(args.record, args.overwrite)


def _device(args) -> str:
    import torch

    import flycuda

    device = args.device or ("cuda" if flycuda.cuda_ready() else "cpu")
    if device == "cuda" and not flycuda.cuda_ready():
        raise ValueError("--device cuda needs a visible GPU and flycuda built with CUDA "
                         f"(GPU visible: {torch.cuda.is_available()}, CUDA kernels built: {flycuda.has_cuda_ops()})")
    return device


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


def _observe(args) -> list[str]:
    """The observables: --observe, plus qpos at the video rate when the video is
    rendered afterwards from the store (and the fly's thorax path with --out)."""
    from .scenario import THORAX

    obs = list(args.observe or ["angles"])
    kinds = {o.split(":")[0].split("@")[0] for o in obs}
    if args.render_afterwards and "qpos" not in kinds:
        obs.append(f"qpos@{args.render_every}" if args.render_every else "qpos@30hz")
    model = args.model or "hexapod"
    if args.out and "body_pos" not in kinds and model in THORAX:
        obs.append(f"body_pos:{THORAX[model]}")
    return obs


def _target(args, share=None, worlds: int = 0, rendezvous=None):
    """Where the recording goes (a flycuda.recording.Target) or None."""
    from .recording import Target
    from .store import world_chunk

    if not args.record:
        return None
    if args.record.endswith(".npz"):
        return Target(store="memory")
    if share is None:
        return Target(store=args.record, overwrite=args.overwrite)
    from . import distributed

    shares = distributed.split_worlds(worlds, distributed.rank_info().world_size)
    starts = [s for s, _ in shares]
    return Target(store=args.record, overwrite=args.overwrite, world_offset=share[0], worlds_total=worlds,
                  world_chunk=world_chunk(starts, worlds), finalize=False, create=distributed.rank_info().rank == 0,
                  sync=rendezvous, plan_worlds=max(n for _, n in shares))


def _render_afterwards(args, res) -> None:
    from .playback import render_recording

    pb = render_recording(args.record, args.render, worlds=args.render_worlds, camera=args.camera,
                          size=args.render_size, png=args.frames, progress=not args.no_progress)
    res.outputs += pb.outputs
    res.render_frames, res.render_tiles = pb.frames, pb.worlds
    res.split_seconds = dict(res.split_seconds, render=pb.seconds)
    res.render_afterwards = True


def _finish(args, res) -> int:
    if args.record and args.record.endswith(".npz"):
        res.recording.to_npz(args.record, {"rmse_per_dof": res.rmse_per_dof.numpy(), "offsets": np.array(
            "snippet" if args.snippet else "offsets" if args.offsets else "zero")})
        res.outputs.append(args.record)
    elif args.record:
        res.outputs.append(args.record)
        if args.render_afterwards:
            _render_afterwards(args, res)
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
    from .scenario import replay_share

    _apply_out_dir(args)
    _check_paths(args)
    args.render_afterwards = bool(args.record and args.record.endswith(".zarr") and (args.render or args.frames))
    info = distributed.rank_info()
    if info is None or info.world_size == 1:
        device = _device(args)
        worlds = args.worlds or (100 if device == "cuda" else 4)
        return _finish(args, replay_share(args, device, worlds, None, primary=True, target=_target(args),
                                          observe=_observe(args)))
    return _run_distributed(args, info)


def _run_distributed(args, info) -> int:
    """One rank of a torchrun job: its share of the worlds, written into the one store
    (rank 0 creates it; every rank waits for that); rank 0 gathers small metrics only."""
    from . import distributed
    from .scenario import replay_share

    if args.record and args.record.endswith(".npz"):
        raise ValueError("--record .npz gathers nothing across ranks; use a .zarr store with torchrun")
    distributed.init(info)
    # the ranks meet once before writing into a store (none without one)
    rendezvous = distributed.Rendezvous() if args.record else None
    try:
        payload = None
        try:
            device = distributed.device_for(info, _device(args))
            worlds = args.worlds or (100 if device.startswith("cuda") else 4)
            share = distributed.split_worlds(worlds, info.world_size)[info.rank]
            target = _target(args, share, worlds, rendezvous)
            res = replay_share(args, device, worlds, share, primary=info.rank == 0, target=target,
                               observe=_observe(args))
            if rendezvous is not None:
                rendezvous()  # a no-op: replay met the others when the store was ready
            payload = ("ok", distributed.summary(res), worlds)
        except Exception as e:  # noqa: BLE001 - every rank must reach the exchanges below
            why = f"rank {info.rank}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            if rendezvous is not None:
                rendezvous.fail(why)
            payload = ("error", why, None)
        parts = distributed.exchange(payload)
        errors = [p[1] for p in parts if p[0] == "error"]
        errors.sort(key=lambda e: "another rank failed" in e)  # the cause first, its echoes after
        if errors:
            if info.rank == 0:
                distributed.mark_failed(args.record, errors[0])
                print(f"flycuda: error: {errors[0]}" + (f" (and {len(errors) - 1} more rank(s) failed)"
                                                        if len(errors) > 1 else ""), file=sys.stderr)
            return 2
        if info.rank != 0:
            return 0
        merged = distributed.merge_results([p[1] for p in parts], parts[0][2], args.record)
        merged.outputs = list(parts[0][1].outputs)
        rc = _finish(args, merged)
        print("  per-rank wall  " + ", ".join(f"rank {i}: {w:.3f} s" for i, w in enumerate(merged.rank_walls)))
        return rc
    finally:
        distributed.finish()


def run_render(args) -> int:
    """``flycuda render STORE``: the recording's worlds rendered afterwards."""
    from .playback import render_recording

    for path in (args.out, args.frames):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise FileNotFoundError(f"output directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    res = render_recording(args.store, args.out, worlds=args.worlds, camera=args.camera, size=args.size,
                           speed=args.speed, png=args.frames, device=args.device, progress=not args.no_progress,
                           eyes=args.eyes)
    print(f"flycuda render: {res.frames} frames x {res.worlds} worlds from {args.store}: "
          f"{res.images_per_s:,.0f} images/s")
    for p in res.outputs:
        print(f"  wrote          {p}")
    return 0


def main(argv=None) -> int:
    """Entry point of the ``flycuda`` command."""
    args = build_parser().parse_args(argv)
    from .bridge import BridgeError
    from .motion import MotionError
    from .render import RenderError
    from .recording import RecordingError
    from .replay import ReplayError
    from .store import StoreError

    try:
        if args.command == "replay":
            return run_replay(args)
        if args.command == "render":
            return run_render(args)
        if args.command == "gpu-check":
            from . import gpucheck

            return gpucheck.main(args.out, args.results)
    except (FileNotFoundError, MotionError, BridgeError, RenderError, ReplayError, RecordingError, StoreError,
            ValueError) as e:
        print(f"flycuda: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flycuda: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
