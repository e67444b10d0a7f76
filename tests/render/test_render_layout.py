"""The renderer's data layout is written once in C++ (csrc/kernels/render/layout.h)
and mirrored in flycuda/ops/scene_layout.py: every column and limit must agree, and the
packed scene must have exactly those columns."""

import os
import re

import pytest

from flycuda.ops import scene_layout as scene
from flycuda.render import pack_scene

LAYOUT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "csrc", "kernels", "render",
                      "layout.h")

MIRROR = {  # layout.h name: scene_layout.py name (the geom types: MuJoCo's mjtGeom)
    "kInfoCols": "INFO_COLS", "kInfoType": "INFO_TYPE", "kInfoRoot": "INFO_ROOT",
    "kParamCols": "PARAM_COLS", "kParamSize": "PARAM_SIZE", "kParamRgb": "PARAM_RGB", "kParamRgb2": "PARAM_RGB2",
    "kParamChecker": "PARAM_CHECKER", "kParamRbound": "PARAM_RBOUND",
    "kLightCols": "LIGHT_COLS", "kLightDir": "LIGHT_DIR", "kLightAmbient": "LIGHT_AMBIENT",
    "kLightDiffuse": "LIGHT_DIFFUSE", "kLightShadow": "LIGHT_SHADOW", "kHeadlightCols": "HEADLIGHT_COLS",
    "kBoxCols": "BOX_COLS", "kBackgroundCols": "BACKGROUND_COLS", "kLeafBits": "LEAF_BITS", "kTriCols": "TRI_COLS", "kStack": "STACK",
    "kMaxCams": "MAX_CAMS", "kMaxLights": "MAX_LIGHTS", "kInf": "K_INF",
    "kPlane": "PLANE", "kSphere": "SPHERE", "kCapsule": "CAPSULE", "kEllipsoid": "ELLIPSOID",
    "kCylinder": "CYLINDER", "kBox": "BOX", "kMesh": "MESH",
}


def header_constants() -> dict:
    """name -> value of every `constexpr int/float ... = value` and enum entry in layout.h."""
    text = open(LAYOUT).read()
    out = {}
    for decl in re.findall(r"constexpr\s+(?:int|int32_t|float)\s+([^;]+);", text):
        for part in decl.split(","):
            m = re.match(r"\s*(k\w+)\s*=\s*([-\d.e]+)f?\s*$", part.strip() + " ")
            if m:
                out[m.group(1)] = float(m.group(2))
    enum = re.search(r"enum GeomType : int32_t \{([^}]+)\}", text).group(1)
    for name, value in re.findall(r"(k\w+)\s*=\s*(\d+)", enum):
        out[name] = float(value)
    return out


def test_every_layout_constant_is_mirrored():
    consts = header_constants()
    assert set(MIRROR) <= set(consts), set(MIRROR) - set(consts)
    for cname, pyname in MIRROR.items():
        assert getattr(scene, pyname) == pytest.approx(consts[cname], rel=1e-7), (cname, pyname)


def test_leaf_encoding_matches_the_header():
    for first, count in [(0, 1), (5, 4), (2 ** 27, 7), (123, 0)]:
        link = scene.make_leaf(first, count)
        assert link < 0 and scene.leaf_range(link) == (first, count)


@pytest.mark.needs_warp
def test_packed_scene_has_the_layouts_columns():
    from flycuda.sim import Sim
    from flycuda.sim.hexapod import fly_mesh_model

    sc = pack_scene(Sim.build(fly_mesh_model(around=6), 1, device="cpu").mjm)
    cols = {"geom_info": scene.INFO_COLS, "geom_param": scene.PARAM_COLS, "bvh_boxes": scene.BOX_COLS,
            "bvh_links": 2, "tris": scene.TRI_COLS, "top_links": 2, "lights": scene.LIGHT_COLS}
    for name, n in cols.items():
        assert getattr(sc, name).shape[1] == n, name
    assert sc.headlight.shape == (scene.HEADLIGHT_COLS,) and sc.background.shape == (scene.BACKGROUND_COLS,)
    assert list(scene.Scene.FIELDS) == ["geom_ids", "geom_info", "geom_param", "bvh_boxes", "bvh_links", "tris",
                                        "top_links", "unbounded", "lights", "headlight", "background"]
    src = open(os.path.join(os.path.dirname(LAYOUT), "..", "..", "render", "render_args.cpp")).read()
    names = re.search(r"kSceneFieldNames\[kSceneFields\] = \{([^}]+)\}", src).group(1)
    assert re.findall(r'"(\w+)"', names) == list(scene.Scene.FIELDS)  # the op's order, written in C++ once
