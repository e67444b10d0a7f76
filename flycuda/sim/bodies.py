"""A task's objects added to a model before it is compiled: JSON-able descriptions of bodies,
their joints and geoms, as a task adds them and as a recording stores them (``bodies`` in its
facts) so that ``flycuda render`` draws them again."""

from __future__ import annotations

import mujoco

__all__ = ["add_bodies"]

_GEOMS = {"cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER, "box": mujoco.mjtGeom.mjGEOM_BOX,
          "sphere": mujoco.mjtGeom.mjGEOM_SPHERE, "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE}
_JOINTS = {"slide": mujoco.mjtJoint.mjJNT_SLIDE, "hinge": mujoco.mjtJoint.mjJNT_HINGE}


def add_bodies(spec, bodies: list[dict]) -> None:
    """Adds ``bodies`` to a ``mujoco.MjSpec``'s world body: each a JSON-able dict ``{"name",
    "pos", "joints": [{"name", "type": "slide"|"hinge", "axis", "damping"}], "geoms": [{"name",
    "type": "cylinder"|"box"|"sphere"|"capsule", "size", "rgba", "contype", "conaffinity",
    "group", "mass"}]}``: a task's objects, as its decorate adds them and as a recording
    stores them (``bodies`` in its facts) so that ``flycuda render`` draws them again."""
    for b in bodies:
        body = spec.worldbody.add_body(name=b["name"], pos=list(b["pos"]))
        for j in b.get("joints", []):
            body.add_joint(name=j["name"], type=_JOINTS[j["type"]], axis=list(j["axis"]),
                           damping=float(j.get("damping", 0.0)))
        for g in b.get("geoms", []):
            body.add_geom(name=g["name"], type=_GEOMS[g["type"]], size=list(g["size"]), rgba=list(g["rgba"]),
                          contype=int(g.get("contype", 1)), conaffinity=int(g.get("conaffinity", 1)),
                          group=int(g.get("group", 0)), mass=float(g.get("mass", 1.0)))
