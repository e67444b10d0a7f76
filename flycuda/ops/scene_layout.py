"""The packed scene the ``render_tiles`` op reads: its fields in order (:class:`Scene`),
their columns, and the link encoding of BVH leaves, written once on the Python side of the
boundary; csrc/kernels/render/layout.h and csrc/render/render_tiles.h are the C++ side, and
tests/render/test_render_layout.py holds the two equal. :mod:`flycuda.render.scene` packs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import torch

__all__ = ["Scene", "make_leaf", "leaf_range", "PLANE", "HFIELD", "SPHERE", "CAPSULE", "ELLIPSOID", "CYLINDER",
           "BOX", "MESH", "SUPPORTED", "STACK", "MAX_CAMS", "MAX_LIGHTS"]

# MuJoCo's geom type codes (mjtGeom); layout.h's GeomType holds the same numbers (tests/render/test_render_layout.py)
PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = (
    int(getattr(mujoco.mjtGeom, f"mjGEOM_{n}")) for n in ("PLANE", "HFIELD", "SPHERE", "CAPSULE", "ELLIPSOID",
                                                        "CYLINDER", "BOX", "MESH"))
SUPPORTED = {PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH}  # heightfields: as meshes
LEAF_SIZE = 4

# The layout of csrc/kernels/render/layout.h (tests/render/test_render_layout.py holds them equal).
INFO_COLS, INFO_TYPE, INFO_ROOT = 2, 0, 1
PARAM_COLS, PARAM_SIZE, PARAM_RGB, PARAM_RGB2, PARAM_CHECKER, PARAM_RBOUND = 12, 0, 3, 6, 9, 10
LIGHT_COLS, LIGHT_DIR, LIGHT_AMBIENT, LIGHT_DIFFUSE, LIGHT_SHADOW = 10, 0, 3, 6, 9
HEADLIGHT_COLS = 6
BOX_COLS, LEAF_BITS, TRI_COLS = 12, 3, 12
BACKGROUND_COLS = 6
STACK, MAX_CAMS, MAX_LIGHTS = 40, 8, 32
K_INF = 3.0e38  # kInf: an empty box is the point (kInf, kInf, kInf)
PARAM, LIGHT = PARAM_COLS, LIGHT_COLS  # short names


def make_leaf(first: int, count: int) -> int:
    """layout.h make_leaf: the link of a leaf of items [first, first + count)."""
    return ~((int(first) << LEAF_BITS) | int(count))


def leaf_range(link: int) -> tuple[int, int]:
    """(first, count) of a leaf link (link < 0)."""
    v = ~int(link)
    return v >> LEAF_BITS, v & ((1 << LEAF_BITS) - 1)


@dataclass
class Scene:
    """Packed static scene (torch tensors on one device); see csrc/kernels/render/layout.h.
    ``FIELDS`` is the order the op takes them in (render_tiles' ``scene`` list)."""

    geom_ids: torch.Tensor    # int32 [Gr] MuJoCo geom id of each render-list geom
    geom_info: torch.Tensor   # int32 [Gr, 2]: type, mesh BVH root (-1 if not a mesh)
    geom_param: torch.Tensor  # float32 [Gr, 12]: size[3] rgb[3] rgb2[3] checker rbound pad
    bvh_boxes: torch.Tensor   # float32 [N, 12]: both children's boxes (lo, hi) of each mesh BVH node
    bvh_links: torch.Tensor   # int32 [N, 2]: per child, a later node or a leaf ~(first << 3 | count)
    tris: torch.Tensor        # float32 [T, 12]: v0, e1, e2 (each padded to 4)
    top_links: torch.Tensor   # int32 [Nt, 2]: the top level over bounded geoms (leaves: one geom)
    unbounded: torch.Tensor   # int32 [U]: render-list indices of the unbounded geoms (planes)
    lights: torch.Tensor      # float32 [L, 10]: dir[3] ambient[3] diffuse[3] castshadow
    headlight: torch.Tensor   # float32 [6]: ambient[3] diffuse[3]
    background: torch.Tensor  # float32 [6]: colour of rays that hit nothing, looking up[3], down[3]
    zfar: float
    depths: dict              # {"top": depth, "meshes": {root: depth}} (internal nodes per path)

    FIELDS = ("geom_ids", "geom_info", "geom_param", "bvh_boxes", "bvh_links", "tris", "top_links",
              "unbounded", "lights", "headlight", "background")

    def tensors(self) -> list:
        """The scene's tensors in FIELDS order (render_tiles' ``scene`` argument)."""
        return [getattr(self, f) for f in self.FIELDS]

    def to(self, device) -> "Scene":
        return Scene(*(getattr(self, f).to(device) for f in self.FIELDS), self.zfar, self.depths)
