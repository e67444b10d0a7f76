"""A replay job as ``flycuda replay`` runs it: the replay (:func:`flycuda.replay.replay`) with its
outputs (a store or an .npz, a video live or rendered afterwards from the store, the last
frame, the joint-angle plot, a JSON of the figures), in one process or as one rank's share of
a torchrun job (its slice of the worlds, the motion and the start frames, all written into one
store). ``flycuda replay`` maps its options onto :class:`ReplaySettings` and :class:`Outputs`
and calls :func:`run_job`; so can Python.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from .._ext import cuda_ready, has_cuda_ops
from ..errors import RankError, ReplayError, require
from ..recording.reader import Target
from ..recording.store import check_path, world_chunk
from ..render import FrameWriter, MjwRenderer, TileRenderer, camera_arg
from ..render.frames import VIDEO_FPS, frames_every
from ..sim.mjwarp import unusable_gpu
from ..sim.motion import Motion, check_duration
from ..vision.spec import parse_vision
from ..worlds import default_worlds, resolve
from . import distributed
from .entry import replay
from .playback import render_recording
from .plot import plot_tracking
from .settings import ReplaySettings, resolve_offsets

__all__ = ["Outputs", "run_job", "replay_share", "OUT_FILES", "MEMORY_LIMIT"]

OUT_FILES = {"video": "replay.mp4", "frames": "last_frame.png", "plot": "joint_angles.png",
             "record": "recording.zarr"}
MEMORY_LIMIT = 512 * 2**20  # bytes of angles and targets a run without a store may hold in memory (plot)


@dataclass
class Outputs:
    """What a replay job writes besides its store (``ReplaySettings.record``: a .zarr store, or
    an .npz of the angles, targets and tracking errors for small runs).

    Attributes:
        out: a folder: the store, the video, the last frame and the plot go there unless named.
        video: a mosaic video (with a .zarr store rendered afterwards from its qpos, else live).
        frames: the final state's mosaic as PNG. plot: replayed vs target joint angles.
        json: the report's figures as JSON. render_worlds: the worlds a video rendered
            afterwards shows ("0:16"). render_size: (width, height) of a tile.
        renderer: "flycuda" (the tile renderer) or "mjwarp" (MuJoCo Warp's, the baseline).
        camera: camera(s) to render from ("track", "track,side"; None: the model's).
        qpos: add qpos at the video rate to a .zarr store, so ``flycuda render`` can draw it.
    """

    out: str | None = None
    video: str | None = None
    frames: str | None = None
    plot: str | None = None
    json: str | None = None
    render_worlds: str = "0:16"
    render_size: tuple = (64, 48)
    renderer: str = "flycuda"
    camera: str | None = None
    qpos: bool = True


def run_job(settings: ReplaySettings, outputs: Outputs | None = None):
    """Runs ``settings`` and writes ``outputs``: in one process, or as this rank's share of a
    torchrun job. Returns the :class:`ReplayResult` (merged over the ranks on rank 0; None on
    the other ranks), its ``outputs`` listing what was written."""
    settings, outputs = _with_out_dir(settings, outputs or Outputs())
    _check_outputs(settings, outputs)
    info = distributed.rank_info()
    if info is None or info.world_size == 1:
        device = choose_device(settings.device)
        worlds = settings.worlds or default_worlds(device)
        res = replay_share(settings, outputs, device, worlds, None, primary=True, target=_target(settings, outputs))
        return _finish(settings, outputs, res)
    return _run_distributed(settings, outputs, info)


def choose_device(device: str | None) -> str:
    """``device``, or CUDA when a GPU is there that flycuda can run on (one line why not, when
    a GPU is there that it cannot), else the CPU."""
    why = None if device else unusable_gpu()
    if why:
        raise ReplayError(why)
    device = device or ("cuda" if cuda_ready() else "cpu")
    if device == "cuda" and not cuda_ready():
        raise ReplayError("device='cuda' needs a visible GPU and flycuda built with CUDA "
                          f"(GPU visible: {torch.cuda.is_available()}, CUDA kernels built: {has_cuda_ops()})")
    return device


def _with_out_dir(s: ReplaySettings, o: Outputs) -> tuple[ReplaySettings, Outputs]:
    """An ``out`` folder, made; every output not named otherwise goes there (a resumed run:
    its store is the recording)."""
    if s.resume is not None and s.record is None and o.out is None:
        s = dataclasses.replace(s, record=os.fspath(s.resume))
    if o.out is None:
        return s, o
    os.makedirs(o.out, exist_ok=True)
    named = {k: os.path.join(o.out, v) for k, v in OUT_FILES.items() if k != "record" and getattr(o, k) is None}
    o = dataclasses.replace(o, **named)
    if s.record is None:
        s = dataclasses.replace(s, record=os.path.join(o.out, OUT_FILES["record"]))
    return s, o


def _zarr(s: ReplaySettings) -> bool:
    return isinstance(s.record, str) and s.record.endswith(".zarr")


def _npz(s: ReplaySettings) -> bool:
    return isinstance(s.record, str) and s.record.endswith(".npz")


def _afterwards(s: ReplaySettings, o: Outputs) -> bool:
    """Is the video (or last frame) rendered afterwards from the store's qpos?"""
    return _zarr(s) and bool(o.video or o.frames)


def _check_outputs(s: ReplaySettings, o: Outputs) -> None:
    """Every output checked before anything is built (one line naming the first problem)."""
    for path in (s.record, o.json, s.profile, o.video, o.frames, o.plot):
        if isinstance(path, str) and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ReplayError(f"output directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    if o.video or o.frames:
        require("imageio", "video=/frames=", "video")
    if o.plot:
        require("matplotlib", "plot=", "video")
    if s.vision and s.model in (None, "hexapod"):
        raise ReplayError("vision needs a fly with eyes: model='neuromechfly' (FlyGym's fly with its eye cameras)")
    if s.vision and _npz(s):
        raise ReplayError("vision readouts go into a .zarr store (record='out.zarr'); an .npz keeps only the "
                          "joint angles and targets")
    if s.vision:
        parse_vision(s.vision)  # a bad spec fails before any build
    if isinstance(s.record, str) and not (_zarr(s) or _npz(s)):
        raise ReplayError(f"record must end in .zarr (a zarr store) or .npz (small runs), got {s.record}")
    if _zarr(s) and s.resume is None:  # a resumed run writes on into its store (ReplaySettings.check_resume)
        check_path(s.record, s.overwrite)
    observe = [s.observe] if isinstance(s.observe, str) else list(s.observe)
    extra = [x for x in observe if isinstance(x, str) and x.split(":")[0].split("@")[0] != "angles"]
    if extra and not s.record:
        raise ReplayError(f"observe {' '.join(extra)} records into a store: add record='out.zarr' (or out=DIR)")
    if extra and _npz(s):
        raise ReplayError(f"observe {' '.join(extra)} needs a .zarr store (record='out.zarr'); an .npz keeps only "
                          "the joint angles and targets")


def _check_memory(o: Outputs, s: ReplaySettings, worlds: int, steps: int, dofs: int) -> None:
    """A plot without a store keeps the run's angles and targets in memory: small runs only."""
    if o.plot and not s.record:
        need = 2 * worlds * (steps + 1) * dofs * 4
        if need > MEMORY_LIMIT:
            raise ReplayError(f"plot reads the joint angles from a recording, and this run's ({need / 2**20:,.0f} "
                              f"MiB) are too many to hold in memory: add record='out.zarr' (or out=DIR)")


def _observe(s: ReplaySettings, o: Outputs, ws) -> list:
    """The observables: the settings', plus qpos at the video rate whenever a .zarr store is
    written (so ``flycuda render`` can draw any store; not without ``qpos`` unless the video is
    rendered afterwards from it) and the fly's thorax path with an ``out`` folder."""
    qpos = _zarr(s) and (_afterwards(s, o) or o.qpos)
    return ws.observables(s.observe, qpos_every=(s.render_every or "30hz") if qpos else None, thorax=bool(o.out))


def _target(s: ReplaySettings, o: Outputs, share=None, worlds: int = 0, rendezvous=None):
    """Where the recording goes (a :class:`flycuda.recording.Target`) or None."""
    if not s.record:
        return Target(store="memory") if o.plot else None  # a plot alone: the angles in memory
    if _npz(s):
        return Target(store="memory")
    if not isinstance(s.record, str) or share is None:
        return s.record if isinstance(s.record, Target) else Target(store=s.record, overwrite=s.overwrite)
    shares = distributed.split_worlds(worlds, distributed.rank_info().world_size)
    starts = [a for a, _ in shares]
    return Target(store=s.record, overwrite=s.overwrite, world_offset=share[0], worlds_total=worlds,
                  world_chunk=world_chunk(starts, worlds), finalize=False, create=distributed.rank_info().rank == 0,
                  sync=rendezvous, plan_worlds=max(n for _, n in shares))


def _render_afterwards(s: ReplaySettings, o: Outputs, res) -> None:
    pb = render_recording(s.record, o.video, worlds=o.render_worlds, camera=o.camera, size=o.render_size,
                          png=o.frames, progress=s.progress)
    res.outputs += pb.outputs
    res.render_frames, res.render_tiles = pb.frames, pb.worlds
    res.split_seconds = dict(res.split_seconds, render=pb.seconds)
    res.render_afterwards = True


def _finish(s: ReplaySettings, o: Outputs, res):
    if _npz(s):
        res.recording.to_npz(s.record, {"rmse_per_dof": res.rmse_per_dof.numpy(), "offsets": np.array(
            "snippet" if s.snippet else "offsets" if s.offsets is not None else "zero")})
        res.outputs.append(s.record)
    elif isinstance(s.record, str):
        res.outputs.append(s.record)
        if _afterwards(s, o):
            _render_afterwards(s, o, res)
    if o.plot:
        plot_tracking(res, o.plot)
        res.outputs.append(o.plot)
    res.out_dir = o.out or ""
    if s.profile:
        res.outputs.append(s.profile)
    if o.json:
        _write_json(o.json, res)
        res.outputs.append(o.json)
    return res


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


def _run_distributed(s: ReplaySettings, o: Outputs, info):
    """One rank of a torchrun job: its share of the worlds, written into the one store
    (rank 0 creates it; every rank waits for that); rank 0 gathers small metrics only."""
    if _npz(s):
        raise ReplayError("record .npz gathers nothing across ranks; use a .zarr store with torchrun")
    if s.record is not None and not _zarr(s):
        raise ReplayError(f"record must be a .zarr path with torchrun (every rank writes its worlds into it), "
                          f"got {type(s.record).__name__}")
    if o.plot and not s.record:
        raise ReplayError("plot with torchrun reads the joint angles from the store: add record='out.zarr'")
    distributed.init(info)
    rendezvous = distributed.Rendezvous() if s.record else None  # the ranks meet once before writing a store
    try:
        try:
            device = distributed.device_for(info, choose_device(s.device))
            worlds = s.worlds or default_worlds(device)
            share = distributed.split_worlds(worlds, info.world_size)[info.rank]
            res = replay_share(s, o, device, worlds, share, primary=info.rank == 0,
                               target=_target(s, o, share, worlds, rendezvous))
            if rendezvous is not None:
                rendezvous()  # a no-op: replay met the others when the store was ready
            payload = ("ok", distributed.summary(res), worlds)
        except Exception as e:  # noqa: BLE001 - every rank must reach the exchanges below
            why = f"rank {info.rank}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            if rendezvous is not None:
                rendezvous.fail(why)
            payload = ("error", why, None)
        parts = distributed.exchange(payload)
        errors = sorted((p[1] for p in parts if p[0] == "error"), key=lambda e: "another rank failed" in e)
        if errors:  # the cause first, its echoes after
            if info.rank == 0:
                distributed.mark_failed(s.record, errors[0])
            raise RankError(errors[0] + (f" (and {len(errors) - 1} more rank(s) failed)"
                                                     if len(errors) > 1 else ""), rank=info.rank)
        if info.rank != 0:
            return None
        merged = distributed.merge_results([p[1] for p in parts], parts[0][2], s.record)
        merged.outputs = list(parts[0][1].outputs)
        return _finish(s, o, merged)
    finally:
        distributed.finish()


def replay_share(s: ReplaySettings, o: Outputs, device: str, worlds: int, share: tuple[int, int] | None,
                 primary: bool, target=None):
    """Runs the worlds [start, start + count) of a ``worlds``-world job (all when share is None).
    ``primary``: this process renders live and profiles (rank 0, or the only process);
    ``target``: where the recording goes (a :class:`flycuda.recording.Target`, or None)."""
    n = worlds if share is None else share[1]
    if n == 0:
        raise ReplayError(f"no worlds to run: {worlds} world(s) over more ranks than that")
    ws = resolve(s.model, n, device=device, motion=s.motion, vision=bool(s.vision), interp=s.interp,
                 warmup=s.warmup, camera=o.camera, nconmax=s.nconmax, njmax=s.njmax)
    sim, motion, offsets = ws.sim, ws.motion, s.offsets
    steps = max(1, round(check_duration(motion, s.duration, s.snippet) / sim.timestep))
    _check_memory(o, s, n, steps, len(motion.dof_names))
    if share is not None:  # the whole job's start frames, then this rank's slice (as one process)
        offsets, motion = _slice(motion, worlds, share, s.snippet, s.offsets)
    renderer, writer, render_every = _live_renderer(s, o, ws, primary)
    if target is not None:  # the store names what `flycuda render` can build again (nothing else)
        target.attrs.update(motion=ws.motion_name, camera=ws.camera, **({"model": ws.model} if ws.model else {}))
    settings = dataclasses.replace(  # a rank's share: its start frames, for the snippet's duration
        s, motion=motion, worlds=n, duration=s.duration if s.duration is not None or share is None else s.snippet,
        snippet=s.snippet if share is None else None, offsets=offsets,
        interp=ws.interp, warmup=ws.warmup, observe=_observe(s, o, ws), record=target, render_every=render_every,
        profile=s.profile if primary else None, progress=s.progress and primary,
        preemptible=s.preemptible and share is None)  # torchrun: a rank's stop is the job's failure
    res = replay(settings, sim=sim, renderer=renderer, frame_writer=writer, act_ids=ws.act_ids)
    res.model = ws.model or "custom"
    res.motion = ws.motion_name
    if writer is not None:
        res.outputs += writer.close()
    return res


def _slice(motion: Motion, worlds: int, share, snippet, offsets):
    """This rank's start frames and, for a per-world buffer, its recordings."""
    start, n = share
    offs = resolve_offsets(motion, worlds, snippet, offsets)[start:start + n].clone()
    if motion.angles.dim() == 3 and motion.angles.shape[0] == worlds:
        a64 = motion.angles64[start:start + n] if motion.angles64 is not None else None
        motion = Motion(motion.angles[start:start + n], motion.fps, motion.dof_names, angles64=a64)
    return offs, motion


def _live_renderer(s: ReplaySettings, o: Outputs, ws, primary: bool):
    """(renderer, frame writer, render every N steps) of a video rendered live, or Nones and 0."""
    cams = camera_arg(ws.camera)
    for c in cams if isinstance(cams, list) else [cams]:
        ws.sim.camera_id(c)  # a camera the model lacks is an error, rendering or not
    if isinstance(cams, list) and o.renderer != "flycuda":
        raise ReplayError(f"camera={ws.camera}: several cameras need renderer='flycuda'")
    if not (primary and (o.video or o.frames) and not _afterwards(s, o)):
        return None, None, 0
    writer = FrameWriter(video=o.video, png=o.frames, fps=VIDEO_FPS)
    cls = TileRenderer if o.renderer == "flycuda" else MjwRenderer
    kw = {"mosaic": not s.vision} if cls is TileRenderer else {}  # eyes: tiles, then a mosaic
    renderer = cls(ws.sim, camera=cams, width=o.render_size[0], height=o.render_size[1], **kw)
    return renderer, writer, s.render_every or frames_every(ws.sim.timestep, s.steps_per_graph)
