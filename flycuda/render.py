"""Renderer front end: every world into image tiles, a mosaic, and video/PNG output.

Until flycuda's own tile renderer lands, :class:`MjwRenderer` drives MuJoCo Warp's
ray-traced renderer (``mjw.refit_bvh`` + ``mjw.render``); it is the fallback and
the baseline to beat. Output tiles are uint8 [W, H, Wd, 3] torch tensors on the
simulation's device; :func:`mosaic` tiles them (world w at row w // cols, column
w % cols) and :class:`FrameWriter` writes mosaics to mp4 or PNG atomically.
"""

from __future__ import annotations

import math
import os

import torch


class RenderError(ValueError):
    """Bad render settings (size, camera, output path)."""


class MjwRenderer:
    """MuJoCo Warp's renderer for one camera of every world of ``sim``."""

    def __init__(self, sim, camera: str = "track", width: int = 64, height: int = 48):
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            raise RenderError(f"render size must be positive integers, got {width}x{height}")
        import mujoco_warp as mjw
        import warp as wp

        self.sim, self.width, self.height = sim, width, height
        self._mjw, self._wp = mjw, wp
        cam = sim.camera_id(camera)
        with wp.ScopedDevice(sim.wp_device):
            self.rc = mjw.create_render_context(sim.mjm, nworld=sim.nworld, cam_res=(width, height),
                                                render_rgb=True, render_depth=False, render_seg=False,
                                                cam_active=[cam])
            self._rgb = wp.zeros((sim.nworld, height, width), dtype=wp.vec3, device=sim.wp_device)
        self._rgb_t = wp.to_torch(self._rgb)  # [W, H, Wd, 3] float in [0, 1], zero-copy
        self.tiles = torch.empty(sim.nworld, height, width, 3, dtype=torch.uint8, device=sim.device)

    def render(self) -> torch.Tensor:
        """Renders every world; returns the uint8 tiles [W, H, Wd, 3] (reused buffer)."""
        with self._wp.ScopedDevice(self.sim.wp_device):
            self._mjw.refit_bvh(self.sim.model, self.sim.data, self.rc)
            self._mjw.render(self.sim.model, self.sim.data, self.rc)
            self._mjw.get_rgb(self.rc, 0, self._rgb)
        self.tiles.copy_((self._rgb_t.clamp(0.0, 1.0) * 255.0).round_())
        return self.tiles


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


class FrameWriter:
    """Collects mosaic frames; writes an mp4 (``video``) and/or the last frame as
    PNG (``png``) on :meth:`close`, through temp files renamed into place."""

    def __init__(self, video: str | None = None, png: str | None = None, fps: float = 30.0):
        for path, ext in ((video, (".mp4", ".gif")), (png, (".png",))):
            if path is not None:
                if not path.lower().endswith(ext):
                    raise RenderError(f"output {path!r} must end with {' or '.join(ext)}")
                parent = os.path.dirname(os.path.abspath(path))
                if not os.path.isdir(parent):
                    raise RenderError(f"output directory does not exist: {parent}")
        if not (fps > 0):
            raise RenderError(f"video fps must be > 0, got {fps}")
        self.video, self.png, self.fps = video, png, fps
        self.frames: list = []

    def add(self, frame: torch.Tensor) -> None:
        self.frames.append(frame.cpu().numpy())

    def close(self) -> list[str]:
        """Writes the outputs; returns the paths written."""
        import imageio.v3 as iio

        written = []
        if not self.frames:
            return written
        if self.video:
            tmp = self.video + ".part" + os.path.splitext(self.video)[1]
            if self.video.lower().endswith(".mp4"):
                iio.imwrite(tmp, self.frames, fps=self.fps, codec="libx264", macro_block_size=1)
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
