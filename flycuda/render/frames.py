"""Mosaics of tiles (world s at row s // cols, column s % cols) and
:class:`FrameWriter`, which writes mosaics to mp4 or PNG atomically."""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ..errors import RenderError, require

__all__ = ["mosaic", "mosaic_shape", "FrameWriter"]


def mosaic_shape(worlds: int) -> tuple[int, int]:
    """(rows, cols) of a near-square mosaic of ``worlds`` tiles."""
    cols = max(1, math.ceil(math.sqrt(worlds)))
    return math.ceil(worlds / cols), cols


def mosaic(tiles: torch.Tensor, cols: int | None = None) -> torch.Tensor:
    """uint8 [rows * H, cols * Wd, 3] image of tiles [W, H, Wd, 3]; empty cells black."""
    if tiles.dim() != 4 or tiles.shape[-1] != 3:
        raise RenderError(f"tiles must be [W, H, Wd, 3], got {tuple(tiles.shape)}")
    W, H, Wd, _ = tiles.shape
    rows, cols = mosaic_shape(W) if cols is None else (math.ceil(W / cols), cols)
    out = torch.zeros(rows * cols, H, Wd, 3, dtype=tiles.dtype, device=tiles.device)
    out[:W] = tiles
    return out.view(rows, cols, H, Wd, 3).permute(0, 2, 1, 3, 4).reshape(rows * H, cols * Wd, 3)


VIDEO_FPS = 30.0  # frames per simulated second of every video flycuda writes


def frames_every(timestep: float, steps_per_launch: int = 1) -> int:
    """Physics steps between video frames: :data:`VIDEO_FPS` frames per simulated second, on
    the grid of launches of ``steps_per_launch`` steps (so that no eager step is needed)."""
    K = steps_per_launch
    return max(K, round(1.0 / (VIDEO_FPS * timestep) / K) * K)


class FrameWriter:
    """Collects mosaic frames; writes an mp4 (``video``) and/or the last frame as
    PNG (``png``) on :meth:`close`, through temp files renamed into place."""

    def __init__(self, video: str | None = None, png: str | None = None, fps: float = VIDEO_FPS):
        for path, ext in ((video, (".mp4", ".gif")), (png, (".png",))):
            if path is not None:
                if not path.lower().endswith(ext):
                    raise RenderError(f"output {path!r} must end with {' or '.join(ext)}")
                parent = os.path.dirname(os.path.abspath(path))
                if not os.path.isdir(parent):
                    raise RenderError(f"output directory does not exist: {parent}")
        if not (fps > 0):
            raise RenderError(f"video fps must be > 0, got {fps}")
        if video or png:
            require("imageio", "writing videos and frames", "video")
        self.video, self.png, self.fps = video, png, fps
        self.frames: list = []

    def add(self, frame: torch.Tensor) -> None:
        self.frames.append(frame.cpu().numpy())

    def close(self) -> list[str]:
        """Writes the outputs; returns the paths written."""
        import imageio.v3 as iio  # noqa: PLC0415  (lazy: only videos need imageio)

        written = []
        if not self.frames:
            return written
        if self.video:
            tmp = self.video + ".part" + os.path.splitext(self.video)[1]
            if self.video.lower().endswith(".mp4"):  # H.264's yuv420p needs even sizes: pad odd ones by a row/column
                iio.imwrite(tmp, [_even(f) for f in self.frames], fps=self.fps, codec="libx264", macro_block_size=1)
            else:
                iio.imwrite(tmp, self.frames, duration=1000.0 / self.fps, loop=0)
            os.replace(tmp, self.video)
            written.append(self.video)
        if self.png:
            tmp = self.png + ".part.png"
            iio.imwrite(tmp, self.frames[-1])
            os.replace(tmp, self.png)
            written.append(self.png)
        return written


def _even(frame):
    """``frame`` [H, W, C] padded at the bottom/right to even H and W (black), as H.264 needs."""
    h, w = frame.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return frame
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))
