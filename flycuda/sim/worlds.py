"""The worlds by name: the models flycuda knows (the built-in hexapod, FlyGym's
NeuroMechFly with meshes or capsules) and their recordings, one table for the
command line and Python alike."""

from __future__ import annotations

from dataclasses import dataclass

from . import flygym as fg
from .mjwarp import Sim

__all__ = ["NAMED_MODELS", "NAMED_MOTIONS", "THORAX", "Worlds", "build_worlds", "is_flygym_model"]

NAMED_MODELS = ("hexapod", "neuromechfly", "neuromechfly-capsules")
NAMED_MOTIONS = ("tripod", "spotlight")
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


def build_worlds(model: str | None, n: int, device: str | None = None, vision: bool = False) -> Worlds:
    """``n`` worlds of ``model``: "hexapod" (or None), "neuromechfly", "neuromechfly-capsules"
    (FlyGym, as its GPU tutorial builds it; ``vision``: with its eye cameras) or an MJCF path."""
    model = model or "hexapod"
    if is_flygym_model(model):
        setup = fg.Setup(model, n, device=device, vision=vision)
        return Worlds(setup.sim, setup.camera, setup.act_ids, setup.fly)
    return Worlds(Sim.build(None if model == "hexapod" else model, n, device=device), "track")
