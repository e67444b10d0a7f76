"""``flycuda render STORE``: a recording's worlds rendered afterwards."""

from __future__ import annotations

import argparse
import os

from ..errors import RenderError
from ..replay.playback import render_recording
from .args import positive_float, size

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """The ``render`` subcommand's options."""
    v = sub.add_parser("render", help="render a recording afterwards from its stored qpos",
                       description="Re-poses the selected worlds of a flycuda recording (zarr store with qpos) "
                                   "and renders them with flycuda's tile renderer into a mosaic video.")
    v.add_argument("store", help="the recording (a .zarr store written by flycuda replay --record)")
    v.add_argument("--worlds", default="0:16", help="worlds to show: 0:16, 3, 1,4,9 (default 0:16)")
    v.add_argument("--camera", default=None, help="camera(s), e.g. track,side (default: the replay's)")
    v.add_argument("--out", default="recording.mp4", metavar="VIDEO.mp4", help="the video to write")
    v.add_argument("--frames", default=None, metavar="OUT.png", help="also write the last frame as PNG")
    v.add_argument("--size", type=size, default=(160, 120), metavar="WxH", help="tile size")
    v.add_argument("--eyes", action=argparse.BooleanOptionalAction, default=None,
                   help="draw each world's recorded eyes (--vision) under its tile (default: when recorded)")
    v.add_argument("--speed", type=positive_float, default=1.0, help="playback speed (1: real time)")
    v.add_argument("--device", choices=["cuda", "cpu"], default=None)
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(run=run)


def run(args) -> int:
    """``flycuda render STORE``: the recording's worlds rendered afterwards."""
    for path in (args.out, args.frames):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise RenderError(f"output directory does not exist: {os.path.dirname(os.path.abspath(path))}")
    res = render_recording(args.store, args.out, worlds=args.worlds, camera=args.camera, size=args.size,
                           speed=args.speed, png=args.frames, device=args.device, progress=not args.no_progress,
                           eyes=args.eyes)
    print(f"flycuda render: {res.frames} frames x {res.worlds} worlds from {args.store}: "
          f"{res.images_per_s:,.0f} images/s")
    for p in res.outputs:
        print(f"  wrote          {p}")
    return 0
