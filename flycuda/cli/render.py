"""``flycuda render STORE``: a recording's worlds rendered afterwards."""

from __future__ import annotations

import os

from ..errors import RenderError
from ..replay.playback import render_recording

__all__ = ["run_render"]


def run_render(args) -> int:
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
