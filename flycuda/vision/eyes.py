"""The fly's compound eyes for every world, on the device: FlyGym's ommatidia readouts.

FlyGym (``NeuroMechFly.add_vision()``, ``Simulation.get_ommatidia_readouts``) renders
each eye camera with MuJoCo's OpenGL renderer (512 x 450, geom groups 1 and 2 hidden),
then its Retina corrects the fisheye and pools the pixels into 721 ommatidia per eye:
float32 [2, 721, 2] (column 0 yellow-type readouts, column 1 pale), one fly at a time
on the CPU. :class:`Vision` does the same for every world of a :class:`flycuda.sim.Sim`
with two device launches and no host round trip (capturable in a CUDA graph):
1. ``render_tiles`` with a pixel list: both eye cameras of each world, at only the
   raw pixels the retina reads (exact mode: 77,040 of 230,400 per eye) or k per
   ommatidium spread over its footprint (fast mode: 721 k);
2. ``pool_ommatidia``: FlyGym's pooling of those pixels, same map, channels, order
   and float64 accumulation (exact mode equals ``Retina.fisheye_image_to_hex_pxls``
   of flycuda's full eye image bit for bit; tests/vision/test_vision.py).

The images are flycuda's renderer's, not MuJoCo's OpenGL ones: their fidelity to
FlyGym's own readouts is measured in bench/bench_vision.py.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..errors import VisionError
from ..flygym import frozen
from ..ops import pool_ommatidia
from ..render import RenderError, TileRenderer, mosaic
from .retina import RetinaMap


def readout_names(num_ommatidia: int) -> list[str]:
    """The names of the readouts [2, O, 2] flattened, one name in every store and observation
    (flycuda.env's ``vision`` columns, the replay's and the env's recorded ``vision`` array):
    ``vision:left:0:yellow``, ``vision:left:0:pale``, ..., ``vision:right:{O-1}:pale``."""
    return [f"vision:{eye}:{o}:{kind}" for eye in ("left", "right") for o in range(num_ommatidia)
            for kind in ("yellow", "pale")]


def eye_cameras(mjm) -> list[str]:
    """The names of the model's eye cameras (FlyGym's add_vision: ``*l_eye_cam_camera``
    then ``*r_eye_cam_camera``, left then right as get_ommatidia_readouts orders them);
    VisionError when there are none."""
    names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_CAMERA, c) or "" for c in range(mjm.ncam)]
    left = [n for n in names if n.endswith("l_eye_cam_camera")]
    right = [n for n in names if n.endswith("r_eye_cam_camera")]
    if len(left) != 1 or len(right) != 1:
        raise VisionError(f"the model has no (single) pair of eye cameras (cameras: {names}); build the fly with "
                          f"NeuroMechFly.add_vision() (flycuda.flygym.neuromechfly(vision=True))")
    return [left[0], right[0]]


def flygym_retina():
    """FlyGym's retina as a RetinaMap (without FlyGym: the one frozen in ``$FLYCUDA_NEUROMECHFLY``);
    VisionError naming the way out without either."""
    try:
        return RetinaMap.from_flygym()
    except ImportError as e:
        if frozen.retina() is not None:  # FlyGym's retina as written where FlyGym is (flycuda.flygym.frozen)
            return RetinaMap.load(frozen.retina())
        raise VisionError(f"FlyGym's retina needs FlyGym ({e}); install flycuda[flygym] (Python >= 3.12) or "
                          f"pass retina=flycuda.vision.retina.RetinaMap.load(PATH)") from None


def _check_resolution(mjm, cams: list[str], retina) -> None:
    """An eye camera that declares a resolution (MJCF ``resolution``) must have the
    retina's: the retina's map reads raw images of exactly that size."""
    for name in cams:
        cid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if cid < 0:
            raise VisionError(f"the model has no camera {name!r}")
        res = tuple(int(x) for x in mjm.cam_resolution[cid])
        if res != (1, 1) and res != (retina.width, retina.height):
            raise VisionError(f"eye camera {name!r} renders {res[0]}x{res[1]} but the retina reads "
                              f"{retina.width}x{retina.height} images (width x height); use a retina of "
                              f"that size or drop the camera's resolution")


class Vision:
    """Ommatidia readouts [S, 2, O, 2] of the selected worlds' two eyes.

    Args:
        sim: a :class:`flycuda.sim.Sim` of a fly with eye cameras.
        worlds: the worlds to read (default all).
        mode: "exact" (FlyGym's readout of flycuda's eye image) or "fast" (k rays per ommatidium).
        k: rays per ommatidium in fast mode.
        retina: a :class:`flycuda.vision.retina.RetinaMap` (default: FlyGym's retina).
        cameras: the two eye cameras' names (default: the model's, see :func:`eye_cameras`).

    ``readouts`` (float32 [S, 2, O, 2] on the sim's device) is refilled by :meth:`update`.
    """

    def __init__(self, sim, worlds=None, mode: str = "exact", k: int = 4, retina=None, cameras=None):
        if mode not in ("exact", "fast"):
            raise VisionError(f"mode must be 'exact' or 'fast', got {mode!r}")
        cams = list(cameras) if cameras is not None else eye_cameras(sim.mjm)
        if len(cams) != 2:
            raise VisionError(f"cameras must be the two eye cameras (left, right), got {cams}")
        if mode == "fast" and not (isinstance(k, int) and k >= 1):
            raise VisionError(f"k (rays per ommatidium) must be an integer >= 1, got {k!r}")
        retina = retina or flygym_retina()
        _check_resolution(sim.mjm, cams, retina)
        self.map = (retina.exact() if mode == "exact" else retina.fast(int(k))).to(sim.device)
        H, W = self.map.height, self.map.width
        try:  # FlyGym's eye renderer hides groups 1 and 2 (the fly's own head and markers)
            self.renderer = TileRenderer(sim, cams, W, H, worlds=worlds, groups=(0,), pixels=self.map.raw_pixels)
        except RenderError as e:
            raise VisionError(str(e)) from e
        self.pixels = self.renderer.rgb  # uint8 [S, 2, P, 3]: the listed raw pixels of each eye
        S = self.renderer.worlds.numel()
        self.readouts = torch.zeros(S, 2, self.map.num_ommatidia, 2, dtype=torch.float32, device=sim.device)
        self.mode, self.k, self.cameras, self.retina = mode, k, cams, retina
        self._full = None  # eye_images' renderer, made on first use
        self._all = self._skip = None  # update(only=): the world list and its skipped form, made on first use

    @property
    def rays_per_readout(self) -> int:
        """Rays traced per world and eye."""
        return self.map.rays

    def update(self, only: torch.Tensor | None = None) -> torch.Tensor:
        """Renders the eyes' listed pixels and pools them; returns ``readouts``. The
        renderer validates the scene and pixel ids on its first render outside capture.

        ``only``: bool [S] on the sim's device: render only the worlds it marks (the others'
        pixels, and so their readouts, stay as the last update left them: right when their
        poses have not moved since, as for the worlds a reset leaves alone). Capturable: the
        renderer's world list is rewritten in place (-1 skips an image) and restored."""
        if only is None:
            self.renderer.render()
        else:
            if self._skip is None:
                self._all = self.renderer.worlds.clone()
                self._skip = torch.full_like(self._all, -1)
            torch.where(only, self._all, self._skip, out=self.renderer.worlds)
            try:
                self.renderer.render()
            finally:
                self.renderer.worlds.copy_(self._all)
        pool_ommatidia(self.pixels, *self.map.args(), self.readouts)
        return self.readouts

    def eye_images(self) -> torch.Tensor:
        """Both eyes' full raw images uint8 [S, 2, H, W, 3] (FlyGym's uncorrected eye
        frames), for inspection and tests: a separate, full render."""
        if self._full is None:
            r = self.renderer
            self._full = TileRenderer(r.sim, self.cameras, r.width, r.height, worlds=r.worlds.tolist(), groups=(0,))
        return self._full.render()


def agreement(ours, theirs) -> dict:
    """How well readouts [2, O, 2] agree with reference ones (e.g. FlyGym's own, see
    :class:`flycuda.flygym.FlyGymEyes`): per eye, the Pearson r over ommatidia and the
    mean absolute difference (on [0, 1]) of each ommatidium's readout (its one
    non-zero column). {"r": [left, right], "mad": [left, right]}."""
    a = np.asarray(torch.as_tensor(ours).cpu(), dtype=np.float64).sum(-1)
    b = np.asarray(torch.as_tensor(theirs).cpu(), dtype=np.float64).sum(-1)
    if a.shape != b.shape or a.ndim != 2:
        raise VisionError(f"agreement: readouts must both be [2, O, 2], got {np.shape(ours)} and {np.shape(theirs)}")
    return {"r": [float(np.corrcoef(a[e], b[e])[0, 1]) for e in range(a.shape[0])],
            "mad": [float(np.abs(a[e] - b[e]).mean()) for e in range(a.shape[0])]}


# --- eyes in a video: FlyGym's hexagon images under each world's tile ------------------

def eye_strip(images: torch.Tensor, width: int) -> torch.Tensor:
    """Hexagon images uint8 [S, E, Hr, Wr] (:meth:`RetinaMap.hex_images`) -> uint8
    [S, h, width, 3]: the E eyes side by side (left first), each area-scaled to
    ``width // E`` pixels wide, grey."""
    S, E, Hr, Wr = images.shape
    w = max(1, width // E)
    h = max(1, round(Hr * w / Wr))
    small = torch.nn.functional.interpolate(images.reshape(S * E, 1, Hr, Wr).float(), size=(h, w), mode="area")
    small = small.round_().clamp_(0, 255).to(torch.uint8).reshape(S, E, h, w)
    strip = torch.zeros(S, h, width, 3, dtype=torch.uint8, device=images.device)
    strip[:, :, :E * w] = small.permute(0, 2, 1, 3).reshape(S, h, E * w)[..., None]
    return strip


def mosaic_with_eyes(tiles: torch.Tensor, readouts, retina) -> torch.Tensor:
    """The mosaic (:func:`flycuda.render.mosaic`) of each world's tile with its eyes
    beneath: tiles uint8 [S, H, Wd, 3] (or [S, C, H, Wd, 3]: the cameras side by side)
    and readouts [S, 2, O, 2] (NaN: not recorded, drawn black); each cell is
    [H + h, C * Wd]."""
    if tiles.dim() == 5:
        S, C, H, Wd, _ = tiles.shape
        tiles = tiles.permute(0, 2, 1, 3, 4).reshape(S, H, C * Wd, 3)
    x = torch.as_tensor(readouts).to(tiles.device)
    if x.shape[0] != tiles.shape[0]:
        raise VisionError(f"readouts of {x.shape[0]} worlds for {tiles.shape[0]} tiles")
    strip = eye_strip(retina.hex_images(torch.nan_to_num(x, nan=0.0)), tiles.shape[2])
    return mosaic(torch.cat([tiles, strip], 1))
