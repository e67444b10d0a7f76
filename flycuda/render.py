"""Renderer front end: every world into image tiles, a mosaic, and video/PNG output.

:class:`TileRenderer` is flycuda's renderer (the ``render_tiles`` op: CUDA kernel,
C++ CPU twin): it reads the geom and camera poses straight from zero-copy views of
MuJoCo Warp's Data and writes RGB tiles (or the mosaic itself), depth and
segmentation into buffers allocated once. :class:`MjwRenderer` drives MuJoCo
Warp's own renderer (``mjw.refit_bvh`` + ``mjw.render``): the baseline, and a fallback.
Tiles are uint8 [S, H, Wd, 3] on the simulation's device. :func:`mosaic` tiles
them (world s at row s // cols, column s % cols). :class:`FrameWriter` writes
mosaics to mp4 or PNG atomically.
"""

from __future__ import annotations

import math
import os

import torch

from . import launch_plan, streams


class RenderError(ValueError):
    """Bad render settings (size, camera, output path)."""


class TileRenderer:
    """flycuda's tile renderer for the worlds of ``sim``.

    Args:
        sim: a :class:`flycuda.bridge.Sim`.
        camera: a model camera's name, or ``(pos [3], mat [3, 3], fovy)`` for a
            fixed camera (the same in every world).
        width, height: tile size in pixels.
        worlds: indices of the worlds to render (default all).
        rgb, depth, seg: which outputs to produce.
        mosaic: write RGB straight into one mosaic image (``self.rgb``) instead of tiles.
        samples: n x n rays per pixel; shadows: shadow rays.
        groups: geom groups to show (MuJoCo Warp's default: 0, 1, 2).
        timers: keep in-kernel stage timers (``self.timers``, see :meth:`stage_times`).
    """

    def __init__(self, sim, camera="track", width: int = 64, height: int = 48, worlds=None,
                 rgb: bool = True, depth: bool = False, seg: bool = False, mosaic: bool = False,
                 samples: int = 1, shadows: bool = False, groups=(0, 1, 2), timers: bool = False):
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            raise RenderError(f"render size must be positive integers, got {width}x{height}")
        from .scene import pack_scene

        self.sim, self.width, self.height = sim, width, height
        self.samples, self.shadows = samples, shadows
        dev, W = sim.device, sim.nworld
        self.scene = pack_scene(sim.mjm, groups=groups).to(dev)
        self.geom_xpos = sim.view("geom_xpos")
        self.geom_xmat = sim.view("geom_xmat").reshape(W, -1, 9)
        if isinstance(camera, str):
            cid = sim.camera_id(camera)
            self.cam_pos = sim.view("cam_xpos")[:, cid]            # [W, 3] view: follows the sim
            self.cam_mat = sim.view("cam_xmat")[:, cid].reshape(W, 9)
            self.fovy = float(sim.mjm.cam_fovy[cid])
        else:
            pos, mat, fovy = camera
            self.cam_pos = torch.as_tensor(pos, dtype=torch.float32, device=dev).reshape(1, 3).expand(W, 3)
            self.cam_mat = torch.as_tensor(mat, dtype=torch.float32, device=dev).reshape(1, 9).expand(W, 9)
            self.fovy = float(fovy)
        sel = list(range(W)) if worlds is None else [int(w) for w in worlds]
        if not sel or min(sel) < 0 or max(sel) >= W:
            raise RenderError(f"worlds must be indices in [0, {W}), got {sel[:8]}")
        self.worlds = torch.tensor(sel, dtype=torch.int32, device=dev)
        S = len(sel)
        self.cols = mosaic_shape(S)[1] if mosaic else 0
        if rgb:
            shape = ((math.ceil(S / self.cols) * height, self.cols * width, 3) if mosaic
                     else (S, height, width, 3))
            self.rgb = torch.zeros(shape, dtype=torch.uint8, device=dev)
        else:
            self.rgb = None
        self.depth = torch.zeros(S, height, width, device=dev) if depth else None
        self.seg = torch.full((S, height, width), -1, dtype=torch.int32, device=dev) if seg else None
        # Workspace: each tile's top-level BVH boxes, refit by every render.
        self.top_bounds = torch.empty(S, self.scene.top_index.shape[0], 6, device=dev)
        tiles_n = (math.ceil(S / self.cols) * self.cols) if (mosaic and rgb) else S
        chunks = launch_plan.render_blocks(tiles_n * height * width)  # one row per CUDA block
        self.timers = torch.zeros(chunks, 3, dtype=torch.int64, device=dev) if timers else None
        self._validated = False  # the static scene's indices are checked on the first render

    def render(self) -> torch.Tensor | None:
        """Renders the selected worlds into the preallocated outputs; returns ``self.rgb``."""
        from .ops import render_tiles

        render_tiles(self.geom_xpos, self.geom_xmat, self.cam_pos, self.cam_mat, self.worlds, self.scene,
                     fovy=self.fovy, height=self.height, width=self.width, rgb=self.rgb, depth=self.depth,
                     seg=self.seg, mosaic_cols=self.cols, samples=self.samples, shadows=self.shadows,
                     top_bounds=self.top_bounds, timers=self.timers, check=not self._validated)
        # During capture the op skips its index check (no host copies), so a first
        # render captured into a graph has validated nothing yet.
        if not streams.capturing(self.geom_xpos.device):
            self._validated = True
        return self.rgb

    def stage_times(self) -> dict:
        """The last render's in-kernel stage timers summed over all chunks: ``trace`` and
        ``shade`` (summed over pixels), ``chunks`` (summed chunk totals), and ``unit``
        ("cycles" on CUDA, "ns" on CPU). Needs ``timers=True``."""
        if self.timers is None:
            raise RenderError("stage_times needs TileRenderer(..., timers=True)")
        t = self.timers.sum(0).tolist()
        return {"trace": t[0], "shade": t[1], "chunks": t[2],
                "unit": "cycles" if self.timers.is_cuda else "ns"}

    def render_mosaic(self) -> torch.Tensor:
        """The mosaic of the selected worlds (rendered straight into it in mosaic mode)."""
        out = self.render()
        return out if self.cols else mosaic(out)


class MjwRenderer:
    """MuJoCo Warp's renderer for one camera of every world of ``sim``."""

    def __init__(self, sim, camera: str = "track", width: int = 64, height: int = 48, shadows: bool = False):
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
                                                cam_active=[cam], use_shadows=bool(shadows))
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

    def render_mosaic(self) -> torch.Tensor:
        return mosaic(self.render())


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
