"""Rendering every world: flycuda's tile renderer and MuJoCo Warp's, mosaics, video.

* :mod:`.tiles`: :class:`TileRenderer` (the ``render_tiles`` op over a packed scene);
* :mod:`.scene`: the scene packed for the kernel (geoms, meshes and their BVHs, lights);
* :mod:`.hfield`: heightfields triangulated as MuJoCo Warp draws them;
* :mod:`.mjwarp`: :class:`MjwRenderer`, MuJoCo Warp's renderer (the baseline);
* :mod:`.frames`: :func:`mosaic` and :class:`FrameWriter` (mp4 / PNG).
"""

from ..errors import RenderError, SceneError
from .frames import FrameWriter, mosaic, mosaic_shape
from .mjwarp import MjwRenderer
from .scene import Scene, pack_scene
from .tiles import TileRenderer, camera_arg

__all__ = ["TileRenderer", "MjwRenderer", "FrameWriter", "mosaic", "mosaic_shape", "camera_arg", "Scene",
           "pack_scene", "RenderError", "SceneError"]
