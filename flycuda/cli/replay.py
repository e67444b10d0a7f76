"""``flycuda replay``: the command line's options turned into worlds, a motion and
a call of :func:`flycuda.replay.replay` (one process, or one rank's share of a
torchrun job)."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import torch

from .._ext import cuda_ready, has_cuda_ops
from ..errors import ReplayError, require
from ..recording import Target
from ..recording.store import check_path, world_chunk
from ..render import FrameWriter, MjwRenderer, TileRenderer, camera_arg
from ..replay import ReplaySettings, distributed, replay
from ..replay.playback import render_recording
from ..replay.plot import plot_tracking
from ..replay.settings import resolve_offsets
from ..replay.vision_stage import parse_vision
from ..sim.mjwarp import unusable_gpu
from ..sim.motion import Motion, load_motion
from ..sim.worlds import NAMED_MODELS, NAMED_MOTIONS, THORAX, build_worlds, is_flygym_model, own_motion, replay_defaults

__all__ = ["run_replay", "replay_share", "choose", "motion_name"]

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


def _check_paths(args) -> None:
    for path, what, names in ((args.model, "model", NAMED_MODELS), (args.motion, "motion", NAMED_MOTIONS)):
        if path is not None and path not in names and not os.path.isfile(path):
            raise ReplayError(f"{what} file not found: {path} (or name one of: {', '.join(names)})")
    nmf = (args.model or "hexapod") in NAMED_MODELS[1:]
    if args.motion == "spotlight" and not nmf:
        raise ReplayError("--motion spotlight is NeuroMechFly's recording: use it with --model neuromechfly")
    if args.motion == "tripod" and nmf:
        raise ReplayError("--motion tripod drives the built-in hexapod: use --model hexapod (or a recording "
                         "named with NeuroMechFly's DOFs)")
    for path in (args.record, args.json, args.profile, args.render, args.frames, args.plot):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ReplayError(f"output directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    if args.render or args.frames:
        require("imageio", "--render/--frames", "video")
    if args.plot:
        require("matplotlib", "--plot", "video")
    if args.vision and (args.model or "hexapod") == "hexapod":
        raise ReplayError("--vision needs a fly with eyes: --model neuromechfly (FlyGym's fly with its eye cameras)")
    if args.vision and args.record and args.record.endswith(".npz"):
        raise ReplayError("--vision readouts go into a .zarr store (--record out.zarr); an .npz keeps only the "
                         "joint angles and targets")
    if args.vision:
        parse_vision(args.vision)  # a bad spec fails before any build
    if args.record is not None and not args.record.endswith((".zarr", ".npz")):
        raise ReplayError(f"--record must end in .zarr (a zarr store) or .npz (small runs), got {args.record}")
    if args.record and args.record.endswith(".zarr"):
        check_path(args.record, args.overwrite)
    extra = [o for o in args.observe or [] if o.split(":")[0].split("@")[0] != "angles"]
    if extra and not args.record:
        raise ReplayError(f"--observe {' '.join(extra)} records into a store: add --record out.zarr (or --out DIR)")
    if extra and args.record.endswith(".npz"):
        raise ReplayError(f"--observe {' '.join(extra)} needs a .zarr store (--record out.zarr); an .npz keeps only "
                          "the joint angles and targets")


MEMORY_LIMIT = 512 * 2**20  # bytes of angles and targets a run without --record may hold in memory (--plot)


def check_memory_recording(args, worlds: int, steps: int, dofs: int) -> None:
    """--plot without --record keeps the run's angles and targets in memory: small runs only."""
    if args.plot and not args.record:
        need = 2 * worlds * (steps + 1) * dofs * 4
        if need > MEMORY_LIMIT:
            raise ReplayError(f"--plot reads the joint angles from a recording, and this run's ({need / 2**20:,.0f} "
                              f"MiB) are too many to hold in memory: add --record out.zarr (or --out DIR)")


def _device(args) -> str:
    why = None if args.device else unusable_gpu()
    if why:
        raise ReplayError(why)
    device = args.device or ("cuda" if cuda_ready() else "cpu")
    if device == "cuda" and not cuda_ready():
        raise ReplayError("--device cuda needs a visible GPU and flycuda built with CUDA "
                         f"(GPU visible: {torch.cuda.is_available()}, CUDA kernels built: {has_cuda_ops()})")
    return device


def _write_json(path: str, res) -> None:
    doc = {"worlds": res.worlds, "steps": res.steps, "timestep": res.timestep, "device": res.device,
           "graph": res.graph, "steps_per_graph": res.steps_per_graph, "steps_in_launches": res.steps_in_launches,
           "eager_steps": res.eager_steps, "wall_seconds": res.wall_seconds,
           "jit_seconds": res.jit_seconds, "realtime_factor": res.realtime_factor,
           "world_steps_per_s": res.world_steps_per_s, "split_seconds": res.split_seconds,
           "rmse_deg_per_dof": [math.degrees(float(x)) for x in res.rmse_per_dof],
           "rank_walls": getattr(res, "rank_walls", [res.wall_seconds])}
    tmp = path + ".part"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def _observe(args) -> list[str]:
    """The observables: --observe, plus qpos at the video rate whenever a .zarr store is
    written (so `flycuda render` can draw any store; not with --no-qpos unless the video is
    rendered afterwards from it) and the fly's thorax path with --out."""
    obs = list(args.observe or ["angles"])
    kinds = {o.split(":")[0].split("@")[0] for o in obs}
    zarr = bool(args.record and args.record.endswith(".zarr"))
    if zarr and "qpos" not in kinds and (args.render_afterwards or not args.no_qpos):
        obs.append(f"qpos@{args.render_every}" if args.render_every else "qpos@30hz")
    model = args.model or "hexapod"
    if args.out and "body_pos" not in kinds and model in THORAX:
        obs.append(f"body_pos:{THORAX[model]}")
    return obs


def _target(args, share=None, worlds: int = 0, rendezvous=None):
    """Where the recording goes (a flycuda.recording.Target) or None."""

    if not args.record:
        return Target(store="memory") if args.plot else None  # --plot alone: the angles in memory
    if args.record.endswith(".npz"):
        return Target(store="memory")
    if share is None:
        return Target(store=args.record, overwrite=args.overwrite)

    shares = distributed.split_worlds(worlds, distributed.rank_info().world_size)
    starts = [s for s, _ in shares]
    return Target(store=args.record, overwrite=args.overwrite, world_offset=share[0], worlds_total=worlds,
                  world_chunk=world_chunk(starts, worlds), finalize=False, create=distributed.rank_info().rank == 0,
                  sync=rendezvous, plan_worlds=max(n for _, n in shares))


def _render_afterwards(args, res) -> None:
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

    if args.record and args.record.endswith(".npz"):
        raise ReplayError("--record .npz gathers nothing across ranks; use a .zarr store with torchrun")
    if args.plot and not args.record:
        raise ReplayError("--plot with torchrun reads the joint angles from the store: add --record out.zarr")
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


def choose(args, device: str, n: int):
    """The worlds and what drives them: (Worlds, motion, act_ids or None, camera, interp, warmup)."""
    model = args.model or "hexapod"
    own = args.motion not in (None, "spotlight", "tripod")
    motion = load_motion(args.motion) if own else None  # a bad file fails before any build
    worlds = build_worlds(model, n, device, vision=bool(getattr(args, "vision", None)))
    act_ids = worlds.act_ids if motion is None else None  # a recording of its own: matched by its DOF names
    motion = motion if motion is not None else own_motion(worlds)
    interp, warmup = replay_defaults(model, own=not own)
    interp = args.interp or interp
    warmup = args.warmup if args.warmup is not None else warmup
    return worlds, motion, act_ids, args.camera or worlds.camera, interp, warmup


def replay_share(args, device: str, worlds: int, share: tuple[int, int] | None, primary: bool, target=None,
                 observe=("angles",)):
    """Runs the worlds [start, start + count) of a ``worlds``-world job (all when share is None).
    ``primary``: this process renders live and profiles (rank 0, or the only process);
    ``target``: where the recording goes (a :class:`flycuda.recording.Target`, or None)."""
    n = worlds if share is None else share[1]
    if n == 0:
        raise ReplayError(f"no worlds to run: {worlds} world(s) over more ranks than that")
    ws, motion, act_ids, camera, interp, warmup = choose(args, device, n)
    sim = ws.sim
    duration = args.duration or (args.snippet if args.snippet else 0.5)
    check_memory_recording(args, n, max(1, round(duration / sim.timestep)), len(motion.dof_names))
    offsets = None
    if share is not None:
        start = share[0]
        # Offsets of the whole job, then this rank's slice (same starts as one process).
        offsets = resolve_offsets(motion, worlds, args.snippet, args.offsets)[start:start + n].clone()
        if motion.angles.dim() == 3 and motion.angles.shape[0] == worlds:
            a64 = motion.angles64[start:start + n] if motion.angles64 is not None else None
            motion = Motion(motion.angles[start:start + n], motion.fps, motion.dof_names, angles64=a64)
    writer = renderer = None
    render_every = 0
    cams = camera_arg(camera)
    for c in cams if isinstance(cams, list) else [cams]:
        sim.camera_id(c)  # a camera the model lacks is an error, rendering or not
    if isinstance(cams, list) and args.renderer != "flycuda":
        raise ReplayError(f"--camera {camera}: several cameras need --renderer flycuda")
    live = primary and (args.render or args.frames) and not getattr(args, "render_afterwards", False)
    if live:
        writer = FrameWriter(video=args.render, png=args.frames, fps=30.0)
        cls = TileRenderer if args.renderer == "flycuda" else MjwRenderer
        kw = {"mosaic": not getattr(args, "vision", None)} if cls is TileRenderer else {}  # eyes: tiles, then a mosaic
        renderer = cls(sim, camera=cams, width=args.render_size[0], height=args.render_size[1], **kw)
        K = args.steps_per_graph  # 30 frames per simulated second, on the launch grid (no eager steps)
        render_every = args.render_every or max(K, round(1.0 / (30.0 * sim.timestep) / K) * K)
    if target is not None:
        target.attrs.update(model=args.model or "hexapod", motion=motion_name(args), camera=camera)
    settings = ReplaySettings(worlds=n, duration=duration, snippet=args.snippet if share is None else None,
                              offsets=args.offsets if share is None else offsets, mode=args.mode, interp=interp,
                              graph=args.graph, steps_per_graph=args.steps_per_graph, warmup=warmup,
                              observe=observe, record_every=args.record_every, record=target,
                              vision=getattr(args, "vision", None), render_every=render_every,
                              profile=args.profile if primary else None, progress=not args.no_progress and primary)
    res = replay(settings, motion=motion, sim=sim, renderer=renderer, frame_writer=writer, act_ids=act_ids)
    res.model = args.model or "hexapod"
    res.motion = motion_name(args)
    if writer is not None:
        res.outputs += writer.close()
    return res


def motion_name(args) -> str:
    """The motion's name for the report and the store: --motion, else the model's own recording."""
    return args.motion or ("spotlight" if is_flygym_model(args.model) else "tripod")
