"""MuJoCo Warp's own renderer (``mjw.refit_bvh`` + ``mjw.render``) behind the same
interface as :class:`flycuda.render.TileRenderer`: the baseline, and a fallback."""

from __future__ import annotations

import torch

from ..errors import RenderError
from .frames import mosaic

__all__ = ["MjwRenderer"]


class MjwRenderer:
    """MuJoCo Warp's renderer for one camera of every world of ``sim``."""

    def __init__(self, sim, camera: str = "track", width: int = 64, height: int = 48, shadows: bool = False):
        if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
            raise RenderError(f"render size must be positive integers, got {width}x{height}")
        import mujoco_warp as mjw  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)
        import warp as wp  # noqa: PLC0415  (lazy: Warp loads on first use, never on import flycuda)

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
