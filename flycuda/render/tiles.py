"""flycuda's tile renderer (:class:`TileRenderer`, the ``render_tiles`` op: CUDA kernel,
C++ CPU twin): it reads the geom and camera poses straight from zero-copy views of
MuJoCo Warp's Data and writes RGB tiles (or the mosaic itself), depth and
segmentation into buffers allocated once. Tiles are uint8 [S, H, Wd, 3] on the
simulation's device."""

from __future__ import annotations

import math

import torch

from ..errors import RenderError
from ..ops import launch_plan, render_tiles_args
from ..sim import streams
from .frames import mosaic, mosaic_shape
from .scene import pack_scene

__all__ = ["TileRenderer", "camera_arg"]


class TileRenderer:
    """flycuda's tile renderer for the worlds of ``sim``.

    Args:
        sim: a :class:`flycuda.sim.Sim`.
        camera: a model camera's name, or ``(pos [3], mat [3, 3], fovy)`` for a fixed
            camera (the same in every world), or a list of up to 8 of either kind (e.g.
            FlyGym's two eye cameras, or a tracking and a side view): several cameras
            per world, rendered in one launch.
        width, height: image size in pixels (every camera).
        worlds: indices of the worlds to render (default all).
        rgb, depth, seg: which outputs to produce. With one camera (not a list) they are
            [S, H, Wd(, 3)]; with a list, [S, C, H, Wd(, 3)].
        mosaic: write RGB straight into one mosaic image (``self.rgb``) instead of
            images; a world's cameras sit side by side in one row.
        samples: n x n rays per pixel; shadows: shadow rays.
        groups: geom groups to show (MuJoCo Warp's default: 0, 1, 2).
        timers: keep in-kernel stage timers (``self.timers``, see :meth:`stage_times`). On
            the CPU a timed render walks one ray at a time (the kernel's own code, which
            counts nodes per ray) instead of the 4-ray packets: the same images, slower.
        pixels: int32 [P] pixel ids (``py * width + px``) to cast instead of every pixel
            (e.g. the raw pixels a retina reads, :mod:`flycuda.vision`): the outputs
            then hold P entries per image, [S(, C), P(, 3)]; no mosaic.
    """

    def __init__(self, sim, camera="track", width: int = 64, height: int = 48, worlds=None,
                 rgb: bool = True, depth: bool = False, seg: bool = False, mosaic: bool = False,
                 samples: int = 1, shadows: bool = False, groups=(0, 1, 2), timers: bool = False,
                 pixels: torch.Tensor | None = None):
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            raise RenderError(f"render size must be positive integers, got {width}x{height}")
        if pixels is not None and mosaic:
            raise RenderError("a pixel list cannot be drawn into a mosaic")
        self.sim, self.width, self.height = sim, width, height
        self.samples, self.shadows = samples, shadows
        dev, W = sim.device, sim.nworld
        self.scene = pack_scene(sim.mjm, groups=groups).to(dev)
        self.geom_xpos = sim.view("geom_xpos")
        self.geom_xmat = sim.view("geom_xmat").reshape(W, -1, 9)
        several = isinstance(camera, list)
        self.cam_pos, self.cam_mat, self.fovy, self._gather = _cameras(sim, camera if several else [camera])
        C = self.cam_pos.shape[1]
        sel = list(range(W)) if worlds is None else [int(w) for w in worlds]
        if not sel or min(sel) < 0 or max(sel) >= W:
            raise RenderError(f"worlds must be indices in [0, {W}), got {sel[:8]}")
        self.worlds = torch.tensor(sel, dtype=torch.int32, device=dev)
        self.pixels = None if pixels is None else torch.as_tensor(pixels, dtype=torch.int32, device=dev).contiguous()
        image = (height, width) if self.pixels is None else (self.pixels.numel(),)  # each image's outputs
        S = len(sel)
        self.cols = mosaic_shape(S)[1] * C if mosaic else 0
        images = math.ceil(S * C / self.cols) * self.cols if (mosaic and rgb) else S * C
        if rgb:
            self.rgb = (torch.zeros(math.ceil(S * C / self.cols) * height, self.cols * width, 3, dtype=torch.uint8,
                                    device=dev) if mosaic else torch.zeros(S, C, *image, 3, dtype=torch.uint8,
                                                                           device=dev))
        else:
            self.rgb = None
        self.depth = torch.zeros(S, C, *image, device=dev) if depth else None
        self.seg = torch.full((S, C, *image), -1, dtype=torch.int32, device=dev) if seg else None
        if not several:  # one camera: [S, H, Wd(, 3)] views of the same buffers
            self.rgb = self.rgb[:, 0] if (self.rgb is not None and not mosaic) else self.rgb
            self.depth = self.depth[:, 0] if self.depth is not None else None
            self.seg = self.seg[:, 0] if self.seg is not None else None
        # Workspace: each selected world's top-level BVH, refit by every render.
        self.top_boxes = torch.empty(S, self.scene.top_links.shape[0], 12, device=dev)
        P = 0 if self.pixels is None else self.pixels.numel()
        blocks = launch_plan.render_blocks(images, height, width, P)  # one timer row per CUDA block
        self.timers = torch.zeros(blocks, 5, dtype=torch.int64, device=dev) if timers else None
        self._validated = False  # the static scene's indices are checked on the first render
        self._args: dict = {}

    def render(self) -> torch.Tensor | None:
        """Renders the selected worlds into the preallocated outputs; returns ``self.rgb``."""
        if self._gather is not None:  # cameras whose ids are not evenly spaced: gathered each render
            self._gather()
        checked = not self._validated
        torch.ops.flycuda.render_tiles.default(*self._op_args(checked))
        # During capture the op skips its index check (no host copies), so a first
        # render captured into a graph has validated nothing yet.
        if checked and not streams.capturing(self.geom_xpos.device):
            self._validated = True
        return self.rgb

    def prepare_capture(self) -> None:
        """Makes what a captured :meth:`render` uses outside capture: the op's arguments
        for a validated render (call after one render outside capture), so that a
        capture allocates nothing."""
        if not self._validated:
            raise RenderError("render once outside capture (it validates the scene) before capturing a render")
        self._op_args(False)

    def _op_args(self, check: bool) -> tuple:
        """The op's arguments (built once per check flag and kept: a render allocates
        nothing and creates no Python objects, so no garbage collection runs in a loop
        of renders). Rebuilt when an attribute it holds was replaced."""
        key = (check, self.geom_xpos, self.geom_xmat, self.cam_pos, self.cam_mat, self.worlds, self.scene,
               self.rgb, self.depth, self.seg, self.top_boxes, self.timers, self.pixels, self.samples,
               self.shadows, tuple(self.fovy))
        cached = self._args.get(check)
        if cached is None or any(not _same(a, b) for a, b in zip(cached[0], key)):
            args = render_tiles_args(self.geom_xpos, self.geom_xmat, self.cam_pos, self.cam_mat, self.worlds,
                                     self.scene, fovy=self.fovy, height=self.height, width=self.width,
                                     rgb=self.rgb, depth=self.depth, seg=self.seg, mosaic_cols=self.cols,
                                     samples=self.samples, shadows=self.shadows, pixels=self.pixels,
                                     top_boxes=self.top_boxes, timers=self.timers, check=check)
            cached = self._args[check] = (key, args)
        return cached[1]

    def stage_times(self) -> dict:
        """The last render's in-kernel stage timers summed over all blocks: ``trace`` and
        ``shade`` (summed over pixels), ``chunks`` (summed block totals), ``unit``
        ("cycles" on CUDA, "ns" on CPU), and the primary rays' work: ``nodes`` (BVH
        nodes visited) and ``triangles`` (tested), in total and ``per_ray``. Needs
        ``timers=True`` (on the CPU: the scalar walk's times, not the packets')."""
        if self.timers is None:
            raise RenderError("stage_times needs TileRenderer(..., timers=True)")
        t = self.timers.sum(0).tolist()
        per_image = self.width * self.height if self.pixels is None else self.pixels.numel()
        rays = self.worlds.numel() * self.cam_pos.shape[1] * per_image * self.samples ** 2
        return {"trace": t[0], "shade": t[1], "chunks": t[2], "nodes": t[3], "triangles": t[4],
                "per_ray": {"nodes": t[3] / rays, "triangles": t[4] / rays},
                "unit": "cycles" if self.timers.is_cuda else "ns"}

    def render_mosaic(self) -> torch.Tensor:
        """The mosaic of the selected worlds (rendered straight into it in mosaic mode)."""
        out = self.render()
        if self.cols:
            return out
        if out.dim() == 5:  # several cameras: a world's images side by side
            S, C = out.shape[:2]
            return mosaic(out.reshape(S * C, *out.shape[2:]), cols=mosaic_shape(S)[1] * C)
        return mosaic(out)


def _same(a, b) -> bool:
    """The same tensor/object (identity), or an equal plain value (a number, a tuple)."""
    return a is b or (isinstance(a, (bool, int, float, tuple)) and type(a) is type(b) and a == b)


def _cameras(sim, cams: list):
    """(cam_pos [W, C, 3], cam_mat [W, C, 9], fovy [C], gather or None) of a list of
    camera names or fixed ``(pos, mat, fovy)`` cameras. Named cameras are views of the
    sim's cam_xpos/cam_xmat (evenly spaced ids: one strided view; else buffers that
    ``gather()`` refills from the sim before each render)."""
    if not cams or len(cams) > 8:
        raise RenderError(f"a renderer takes 1 to 8 cameras, got {len(cams)}")
    dev, W = sim.device, sim.nworld
    if all(isinstance(c, str) for c in cams):
        ids = [sim.camera_id(c) for c in cams]
        fovy = [float(sim.mjm.cam_fovy[i]) for i in ids]
        xpos, xmat = sim.view("cam_xpos"), sim.view("cam_xmat").reshape(W, -1, 9)
        step = ids[1] - ids[0] if len(ids) > 1 else 1
        if step > 0 and ids == list(range(ids[0], ids[0] + step * len(ids), step)):
            sl = slice(ids[0], ids[-1] + 1, step)
            return xpos[:, sl], xmat[:, sl], fovy, None
        idx = torch.tensor(ids, device=dev)
        pos, mat = xpos.index_select(1, idx), xmat.index_select(1, idx)

        def gather():
            torch.index_select(xpos, 1, idx, out=pos)
            torch.index_select(xmat, 1, idx, out=mat)
        return pos, mat, fovy, gather
    if any(isinstance(c, str) for c in cams):
        raise RenderError("cameras must be all model camera names or all fixed (pos, mat, fovy) cameras")
    pos = torch.stack([torch.as_tensor(c[0], dtype=torch.float32).reshape(3) for c in cams]).to(dev)
    mat = torch.stack([torch.as_tensor(c[1], dtype=torch.float32).reshape(9) for c in cams]).to(dev)
    return pos.expand(W, -1, 3), mat.expand(W, -1, 9), [float(c[2]) for c in cams], None


def camera_arg(camera):
    """A --camera value: "name" as is, "a,b" (several cameras, side by side) as a list."""
    if isinstance(camera, str) and "," in camera:
        names = [c.strip() for c in camera.split(",") if c.strip()]
        if len(names) > 8:
            raise RenderError(f"a renderer takes 1 to 8 cameras, got {len(names)}: {camera!r}")
        return names
    return camera
