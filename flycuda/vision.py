"""The fly's compound eyes for every world, on the device: FlyGym's ommatidia readouts.

FlyGym (``NeuroMechFly.add_vision()``, ``Simulation.get_ommatidia_readouts``) renders
each eye camera with MuJoCo's OpenGL renderer (512 x 450, geom groups 1 and 2 hidden),
then its Retina corrects the fisheye and pools the pixels into 721 ommatidia per eye:
float32 [2, 721, 2] (column 0 yellow-type readouts, column 1 pale), one fly at a time
on the CPU. :class:`Vision` does the same for every world of a :class:`flycuda.bridge.Sim`
with two device launches and no host round trip (capturable in a CUDA graph):

1. ``render_tiles`` with a pixel list: both eye cameras of each world, at only the
   raw pixels the retina reads (exact mode: 77,040 of 230,400 per eye) or k per
   ommatidium spread over its footprint (fast mode: 721 k);
2. ``pool_ommatidia``: FlyGym's pooling of those pixels, same map, channels, order
   and float64 accumulation (exact mode equals ``Retina.fisheye_image_to_hex_pxls``
   of flycuda's full eye image bit for bit; tests/test_vision.py).

The images are flycuda's renderer's, not MuJoCo's OpenGL ones: their fidelity to
FlyGym's own readouts is measured in bench/bench_vision.py.
"""

from __future__ import annotations

import torch

from .render import RenderError, TileRenderer


class VisionError(ValueError):
    """A model without eye cameras, a retina that does not fit them, bad worlds."""


def eye_cameras(mjm) -> list[str]:
    """The names of the model's eye cameras (FlyGym's add_vision: ``*l_eye_cam_camera``
    then ``*r_eye_cam_camera``, left then right as get_ommatidia_readouts orders them);
    VisionError when there are none."""
    import mujoco

    names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_CAMERA, c) or "" for c in range(mjm.ncam)]
    left = [n for n in names if n.endswith("l_eye_cam_camera")]
    right = [n for n in names if n.endswith("r_eye_cam_camera")]
    if len(left) != 1 or len(right) != 1:
        raise VisionError(f"the model has no (single) pair of eye cameras (cameras: {names}); build the fly with "
                          f"NeuroMechFly.add_vision() (flycuda.flygym.neuromechfly(vision=True))")
    return [left[0], right[0]]


class Vision:
    """Ommatidia readouts [S, 2, O, 2] of the selected worlds' two eyes.

    Args:
        sim: a :class:`flycuda.bridge.Sim` of a fly with eye cameras.
        worlds: the worlds to read (default all).
        mode: "exact" (FlyGym's readout of flycuda's eye image) or "fast" (k rays per ommatidium).
        k: rays per ommatidium in fast mode.
        retina: a :class:`flycuda.retina.RetinaMap` (default: FlyGym's retina).
        cameras: the two eye cameras' names (default: the model's, see :func:`eye_cameras`).

    ``readouts`` (float32 [S, 2, O, 2] on the sim's device) is refilled by :meth:`update`.
    """

    def __init__(self, sim, worlds=None, mode: str = "exact", k: int = 4, retina=None, cameras=None):
        from .retina import RetinaMap

        if mode not in ("exact", "fast"):
            raise VisionError(f"mode must be 'exact' or 'fast', got {mode!r}")
        cams = list(cameras) if cameras is not None else eye_cameras(sim.mjm)
        retina = retina or RetinaMap.from_flygym()
        self.map = (retina.exact() if mode == "exact" else retina.fast(int(k))).to(sim.device)
        H, W = self.map.height, self.map.width
        try:  # FlyGym's eye renderer hides groups 1 and 2 (the fly's own head and markers)
            self.renderer = TileRenderer(sim, cams, W, H, worlds=worlds, groups=(0,), pixels=self.map.raw_pixels)
        except RenderError as e:
            raise VisionError(str(e)) from e
        self.pixels = self.renderer.rgb  # uint8 [S, 2, P, 3]: the listed raw pixels of each eye
        S = self.renderer.worlds.numel()
        self.readouts = torch.zeros(S, 2, self.map.num_ommatidia, 2, dtype=torch.float32, device=sim.device)
        self.mode, self.k, self.cameras = mode, k, cams
        self._full = None  # eye_images' renderer, made on first use

    @property
    def rays_per_readout(self) -> int:
        """Rays traced per world and eye."""
        return self.map.rays

    def update(self) -> torch.Tensor:
        """Renders the eyes' listed pixels and pools them; returns ``readouts``. The
        renderer validates the scene and pixel ids on its first render outside capture."""
        from .ops import pool_ommatidia

        self.renderer.render()
        pool_ommatidia(self.pixels, *self.map.args(), self.readouts)
        return self.readouts

    def eye_images(self) -> torch.Tensor:
        """Both eyes' full raw images uint8 [S, 2, H, W, 3] (FlyGym's uncorrected eye
        frames), for inspection and tests: a separate, full render."""
        if self._full is None:
            r = self.renderer
            self._full = TileRenderer(r.sim, self.cameras, r.width, r.height, worlds=r.worlds.tolist(), groups=(0,))
        return self._full.render()
