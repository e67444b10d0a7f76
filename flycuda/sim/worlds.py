"""The worlds by name: the models flycuda knows (the built-in hexapod, FlyGym's
NeuroMechFly with meshes or capsules) and their recordings, one table for the
command line and Python alike."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco

from . import flygym as fg
from .hexapod import fly_model_xml
from .mjwarp import Sim
from .motion import Motion, tripod_gait

__all__ = ["NAMED_MODELS", "NAMED_MOTIONS", "THORAX", "Worlds", "build_worlds", "is_flygym_model", "own_motion",
           "replay_defaults"]

NAMED_MODELS = ("hexapod", "neuromechfly", "neuromechfly-capsules")
"""The models by name: the built-in hexapod and FlyGym's NeuroMechFly (meshes, or capsules)."""
NAMED_MOTIONS = ("tripod", "spotlight")
"""The motions by name: the synthetic tripod gait and FlyGym's Spotlight recording."""
THORAX = {"hexapod": "Thorax", "neuromechfly": "c_thorax", "neuromechfly-capsules": "c_thorax"}


def is_flygym_model(model: str | None) -> bool:
    """Whether ``model`` names one of FlyGym's NeuroMechFly models."""
    return (model or "hexapod") in NAMED_MODELS[1:]


@dataclass
class Worlds:
    """``n`` worlds of a model: the flycuda Sim, its default camera, FlyGym's
    actuator order (None: matched by DOF names), the fly (FlyGym) or None."""

    sim: object
    camera: str
    act_ids: object = None
    fly: object = None


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


def build_worlds(model: str | None, n: int, device: str | None = None, vision: bool = False,
                 decorate=None) -> Worlds:
    """``n`` worlds of ``model``: "hexapod" (or None), "neuromechfly", "neuromechfly-capsules"
    (FlyGym, as its GPU tutorial builds it; ``vision``: with its eye cameras) or an MJCF path.
    ``decorate``: a callable given the model's ``mujoco.MjSpec`` before it is compiled."""
    model = model or "hexapod"
    if is_flygym_model(model):
        setup = fg.Setup(model, n, device=device, vision=vision, decorate=decorate)
        return Worlds(setup.sim, setup.camera, setup.act_ids, setup.fly)
    source = None if model == "hexapod" else model
    if decorate is not None:
        spec = mujoco.MjSpec.from_string(fly_model_xml()) if source is None else mujoco.MjSpec.from_file(source)
        decorate(spec)
        source = spec.compile()
    return Worlds(Sim.build(source, n, device=device), "track")


def own_motion(worlds: Worlds) -> Motion:
    """The model's own recording: FlyGym's Spotlight clip for NeuroMechFly (its
    preprocessing, its DOF order), the tripod gait for the hexapod."""
    return fg.spotlight(worlds.fly) if worlds.fly is not None else tripod_gait()


def replay_defaults(model: str | None, own: bool) -> tuple[str, float]:
    """(interp, warmup seconds) a replay of ``model`` uses unless told otherwise, from the
    CLI and from :func:`flycuda.replay.replay` alike: for NeuroMechFly FlyGym's cubic
    resampling of its own clip (linear for a recording of one's own) and FlyGym's 0.05 s
    of settling; linear and no warm-up otherwise."""
    nmf = is_flygym_model(model)
    return ("cubic" if nmf and own else "linear"), (0.05 if nmf else 0.0)
