"""The renderer op: every selected world's cameras ray-cast into image tiles
(:func:`render_tiles`; the scene it reads: :mod:`flycuda.render.scene`)."""

from __future__ import annotations

import torch

from ..errors import FlycudaError
from .checks import check_same_device
from .scene_layout import Scene

__all__ = ["render_tiles", "render_tiles_args"]


def render_tiles(geom_xpos: torch.Tensor, geom_xmat: torch.Tensor, cam_pos: torch.Tensor,
                 cam_mat: torch.Tensor, worlds: torch.Tensor, scene, *, fovy, height: int,
                 width: int, rgb: torch.Tensor | None = None, depth: torch.Tensor | None = None,
                 seg: torch.Tensor | None = None, mosaic_cols: int = 0, samples: int = 1,
                 shadows: bool = False, zfar: float | None = None, pixels: torch.Tensor | None = None,
                 top_boxes: torch.Tensor | None = None, timers: torch.Tensor | None = None,
                 check: bool = True) -> None:
    """Ray-casts each selected world's cameras into preallocated outputs.

    Args:
        geom_xpos: float32 [W, G, 3] geom positions (e.g. ``wp.to_torch(d.geom_xpos)``).
        geom_xmat: float32 [W, G, 9] (or [W, G, 3, 3]) geom orientations.
        cam_pos: float32 [W, C, 3] the C cameras' positions per world ([W, 3]: one camera);
            cam_mat: float32 [W, C, 9] (or [W, C, 3, 3]; [W, 9] or [W, 3, 3]: one camera)
            orientations (MuJoCo convention: looks along -z, y up). C <= 8.
        worlds: int32 [S] worlds to render; image (s, c) shows camera c of world ``worlds[s]``.
            ``worlds[s] = -1`` skips image s: its outputs (and its row of ``top_boxes``) keep
            what they held (a partial re-render, as flycuda.env redraws only the worlds it reset).
        scene: a :class:`flycuda.ops.scene_layout.Scene` (geoms, meshes with BVHs, lights).
        fovy: vertical field of view in degrees, one per camera (a number: every camera).
        height, width: image size in pixels.
        rgb: uint8 [S, C, H, Wd, 3] images ([S, H, Wd, 3] when C = 1), or with a pixel
            list [S, C, P, 3], or with ``mosaic_cols`` > 0 the mosaic
            [ceil(S * C / cols) * H, cols * Wd, 3] (image s * C + c at row (s * C + c) // cols).
        depth: float32 [S, C, H, Wd] planar depth (0 for background); seg: int32 likewise,
            the geom id (-1 for background); [S, C, P] with a pixel list.
        samples: n: n x n rays per pixel, averaged (depth/seg from the first).
        shadows: cast shadow rays towards the lights that cast shadows.
        zfar: far plane (planar depth; 0 = none); default the scene's (MuJoCo's).
        pixels: int32 [P] pixel ids (py * width + px) to cast instead of every pixel
            (e.g. the raw pixels a retina reads); outputs then hold P entries per image.
        top_boxes: float32 [S, Nt, 12] workspace (Nt = ``scene.top_links.shape[0]``):
            each selected world's top-level BVH, refit from the poses at the start of the
            call. Allocated here when None (pass one to capture the call in a graph).
        timers: int64 [blocks, 5] in-kernel stage timers per block of 128 pixels
            (flycuda.ops.launch_plan.render_blocks): trace, shade (summed over its pixels),
            the block's total (clock64 cycles on CUDA, nanoseconds on CPU), and the
            primary rays' BVH nodes visited and triangles tested.
        check: validate the index values (worlds, geom ids, pixel ids, BVH links and
            depths); on CUDA this copies them to the host (skipped while capturing a
            graph). Pass False only for inputs already validated (TileRenderer checks
            its static scene once).

    Outputs left as None are not computed. With top_boxes given nothing is
    allocated: the call can be captured in a CUDA graph.
    """
    torch.ops.flycuda.render_tiles.default(*render_tiles_args(
        geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, fovy=fovy, height=height, width=width, rgb=rgb,
        depth=depth, seg=seg, mosaic_cols=mosaic_cols, samples=samples, shadows=shadows, zfar=zfar, pixels=pixels,
        top_boxes=top_boxes, timers=timers, check=check))


def render_tiles_args(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width, rgb=None,
                      depth=None, seg=None, mosaic_cols=0, samples=1, shadows=False, zfar=None, pixels=None,
                      top_boxes=None, timers=None, check=True) -> tuple:
    """The op's argument tuple for :func:`render_tiles`' arguments (one camera's [W, 3],
    [S, H, Wd(, 3)] forms given their camera dim, absent outputs as empty tensors).
    TileRenderer builds it once and calls the op with it on every render."""
    dev = geom_xpos.device
    cam_pos = cam_pos.unsqueeze(1) if cam_pos.dim() == 2 else cam_pos  # [W, 3]: one camera
    cam_mat = _flat9("cam_mat", cam_mat, cam_mat.dim() - 2)
    cam_mat = cam_mat.unsqueeze(1) if cam_mat.dim() == 2 else cam_mat
    C = cam_pos.shape[1] if cam_pos.dim() == 3 else 1
    fov = [float(f) for f in fovy] if isinstance(fovy, (list, tuple)) else [float(fovy)] * C
    if rgb is not None and mosaic_cols == 0 and rgb.dim() == (3 if pixels is not None else 4) and C == 1:
        rgb = rgb.unsqueeze(1)
    if depth is not None and depth.dim() == (2 if pixels is not None else 3) and C == 1:
        depth = depth.unsqueeze(1)
    if seg is not None and seg.dim() == (2 if pixels is not None else 3) and C == 1:
        seg = seg.unsqueeze(1)
    if top_boxes is None:
        top_boxes = torch.empty(worlds.shape[0], scene.top_links.shape[0], 12, device=dev)
    empty_u8 = torch.empty(0, dtype=torch.uint8, device=dev)
    empty_f = torch.empty(0, dtype=torch.float32, device=dev)
    empty_i = torch.empty(0, dtype=torch.int32, device=dev)
    return (geom_xpos, _flat9("geom_xmat", geom_xmat, 2), cam_pos, cam_mat, worlds, scene.tensors(), fov,
            float(scene.zfar if zfar is None else zfar), int(samples), bool(shadows), int(height), int(width),
            int(mosaic_cols), empty_i if pixels is None else pixels, bool(check),
            empty_u8 if rgb is None else rgb, empty_f if depth is None else depth,
            empty_i if seg is None else seg, top_boxes,
            torch.empty(0, dtype=torch.int64, device=dev) if timers is None else timers)


def _flat9(name: str, t: torch.Tensor, n: int) -> torch.Tensor:
    """[..., 3, 3] -> [..., 9] as a view (n leading dims): never a silent copy."""
    if t.dim() != n + 2 or t.shape[-2:] != (3, 3):
        return t
    try:
        return t.view(*t.shape[:n], 9)
    except RuntimeError as e:
        raise FlycudaError(f"flycuda.render_tiles: argument '{name}' of shape {tuple(t.shape)} and strides "
                         f"{t.stride()} cannot be viewed as [..., 9] (each 3x3 matrix must be "
                         f"contiguous); pass it as [..., 9] or make it contiguous") from e


@torch.library.register_fake("flycuda::render_tiles")
def _render_tiles_fake(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, fovy, zfar, samples, shadows,
                       height, width, mosaic_cols, pixels, check, rgb, depth, seg, top_boxes, timers):
    torch._check(geom_xpos.dim() == 3 and geom_xpos.dtype == torch.float32,
                 lambda: f"flycuda.render_tiles: argument 'geom_xpos' must be float32 [W, G, 3], got {geom_xpos.dtype} {tuple(geom_xpos.shape)}")
    torch._check(cam_pos.dim() == 3 and len(fovy) == cam_pos.shape[1],
                 lambda: f"flycuda.render_tiles: argument 'fovy' must hold one angle per camera, got {len(fovy)} for cam_pos {tuple(cam_pos.shape)}")
    n = len(Scene.FIELDS)
    torch._check(len(scene) == n, lambda: f"flycuda.render_tiles: argument 'scene' must hold {n} tensors, got {len(scene)}")
    torch._check(height > 0 and width > 0, lambda: "flycuda.render_tiles: the image must not be empty")
    check_same_device("render_tiles", "geom_xpos", geom_xpos, geom_xmat=geom_xmat, cam_pos=cam_pos,
                       cam_mat=cam_mat, worlds=worlds, pixels=pixels, rgb=rgb, depth=depth, seg=seg,
                       top_boxes=top_boxes, timers=timers)
    return None
