"""What the command line replays: the model and motion by name, the worlds by name,
and one rank's share of a torchrun job. ``flycuda replay`` (cli.py) parses options;
this module turns them into worlds, a motion and a call of :func:`flycuda.replay.replay`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .settings import ReplayError, resolve_offsets

__all__ = ["NAMED_MODELS", "NAMED_MOTIONS", "THORAX", "Worlds", "build_worlds", "replay_share"]

NAMED_MODELS = ("hexapod", "neuromechfly", "neuromechfly-capsules")
NAMED_MOTIONS = ("tripod", "spotlight")
THORAX = {"hexapod": "Thorax", "neuromechfly": "c_thorax", "neuromechfly-capsules": "c_thorax"}


def is_flygym_model(model: str | None) -> bool:
    return (model or "hexapod") in NAMED_MODELS[1:]


@dataclass
class Worlds:
    """``n`` worlds of a model: the flycuda Sim, its default camera, FlyGym's
    actuator order (None: matched by DOF names), the fly (FlyGym) or None."""

    sim: object
    camera: str
    act_ids: object = None
    fly: object = None


def build_worlds(model: str | None, n: int, device: str | None = None, vision: bool = False) -> Worlds:
    """``n`` worlds of ``model``: "hexapod" (or None), "neuromechfly", "neuromechfly-capsules"
    (FlyGym, as its GPU tutorial builds it; ``vision``: with its eye cameras) or an MJCF path."""
    from .bridge import Sim

    model = model or "hexapod"
    if is_flygym_model(model):
        from . import flygym as fg

        setup = fg.Setup(model, n, device=device, vision=vision)
        return Worlds(setup.sim, setup.camera, setup.act_ids, setup.fly)
    return Worlds(Sim.build(None if model == "hexapod" else model, n, device=device), "track")


def choose(args, device: str, n: int):
    """The worlds and what drives them: (Worlds, motion, act_ids or None, camera, interp, warmup)."""
    from .motion import load_motion, tripod_gait

    model = args.model or "hexapod"
    nmf = is_flygym_model(model)
    own = args.motion not in (None, "spotlight", "tripod")
    motion = load_motion(args.motion) if own else None  # a bad file fails before any build
    worlds = build_worlds(model, n, device, vision=bool(getattr(args, "vision", None)))
    act_ids, warmup = worlds.act_ids, 0.05 if nmf else 0.0
    if motion is None:
        if nmf:
            from . import flygym as fg

            motion = fg.spotlight(worlds.fly)
        else:
            motion = tripod_gait()
    elif nmf:
        act_ids = None  # a recording of its own: matched by its DOF names
    interp = args.interp or ("cubic" if nmf and not own else "linear")
    warmup = args.warmup if args.warmup is not None else warmup
    return worlds, motion, act_ids, args.camera or worlds.camera, interp, warmup


def replay_share(args, device: str, worlds: int, share: tuple[int, int] | None, primary: bool, target=None,
                 observe=("angles",)):
    """Runs the worlds [start, start + count) of a ``worlds``-world job (all when share is None).
    ``primary``: this process renders live and profiles (rank 0, or the only process);
    ``target``: where the recording goes (a :class:`flycuda.recording.Target`, or None)."""
    from .motion import Motion
    from .render import FrameWriter, MjwRenderer, TileRenderer, camera_arg
    from .replay import replay

    n = worlds if share is None else share[1]
    if n == 0:
        raise ReplayError(f"no worlds to run: {worlds} world(s) over more ranks than that")
    ws, motion, act_ids, camera, interp, warmup = choose(args, device, n)
    sim = ws.sim
    duration = args.duration or (args.snippet if args.snippet else 0.5)
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
        render_every = args.render_every or max(1, round(1.0 / (30.0 * sim.timestep)))
    if target is not None:
        target.attrs.update(model=args.model or "hexapod", motion=motion_name(args), camera=camera)
    res = replay(motion=motion, worlds=n, duration=duration,
                 snippet=args.snippet if share is None else None,
                 offsets=args.offsets if share is None else offsets, mode=args.mode, graph=args.graph,
                 steps_per_graph=args.steps_per_graph, record_every=args.record_every,
                 render_every=render_every, renderer=renderer, frame_writer=writer,
                 profile=args.profile if primary else None, progress=not args.no_progress and primary,
                 sim=sim, interp=interp, act_ids=act_ids, warmup=warmup, observe=observe, record=target,
                 vision=getattr(args, "vision", None))
    res.model = args.model or "hexapod"
    res.motion = motion_name(args)
    if writer is not None:
        res.outputs += writer.close()
    return res


def motion_name(args) -> str:
    return args.motion or ("spotlight" if is_flygym_model(args.model) else "tripod")
