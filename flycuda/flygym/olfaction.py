"""The fly's odor sensors on FlyGym 2.x's NeuroMechFly (issue 41): FlyGym 1.x's four, where 1.x put
them (flygym-gymnasium 1.3.2 ``config.yaml`` ``olfaction.sensor_positions``; ``fly.py``
``_add_odor_sensors``), in its order: the left and right maxillary palps (on the rostrum), then the
left and right antennae (on the funiculi).

FlyGym 2.x has no olfaction. With its legs-only skeleton the head's bodies are fused into the
thorax when the model compiles, so the sensors are sites, which keep their place in the fused
body: :func:`add_odor_sensors` adds them to the fly's ``MjSpec`` before it is attached to a world,
and :func:`odor_sensor_sites` finds them in the compiled model, for MuJoCo Warp's ``site_xpos``
(``Sim.view("site_xpos")[:, ids]``: every world's four sensors, on the device). FlyGym 2.x turns
the pedicel (its rigging), so the antennae sit 0.07 mm wider than in 1.x.
"""

from __future__ import annotations

import mujoco
import torch

from ..errors import FlyGymError

__all__ = ["ODOR_SENSORS", "SENSOR_NAMES", "add_odor_sensors", "odor_sensor_sites"]

ODOR_SENSORS = (("l_maxillary_palp", "c_rostrum", (-0.15, 0.15, -0.15)),
                ("r_maxillary_palp", "c_rostrum", (-0.15, -0.15, -0.15)),
                ("l_antenna", "l_funiculus", (0.02, 0.0, -0.10)),
                ("r_antenna", "r_funiculus", (0.02, 0.0, -0.10)))
"""(sensor, the body it is fixed to, its position there in mm): FlyGym 1.x's, in its order."""
SENSOR_NAMES = tuple(name for name, _, _ in ODOR_SENSORS)
"""The four sensors' names in FlyGym 1.x's order: the odor observations' last axis."""


def add_odor_sensors(fly) -> None:
    """Adds the four odor sensor sites (:data:`ODOR_SENSORS`, named ``<sensor>_sensor``) to a
    FlyGym NeuroMechFly's ``mjcf_root`` before it is attached to a world.

    Raises:
        FlyGymError: the fly lacks a body they are fixed to, or has them already.
    """
    spec = getattr(fly, "mjcf_root", None)
    if not isinstance(spec, mujoco.MjSpec):
        raise FlyGymError(f"add_odor_sensors needs a FlyGym fly (its mjcf_root: a mujoco.MjSpec), got "
                          f"{type(fly).__name__}")
    for name, parent, _ in ODOR_SENSORS:
        if spec.body(parent) is None:
            raise FlyGymError(f"the fly has no body {parent!r} for its {name} odor sensor")
        if spec.site(f"{name}_sensor") is not None:
            raise FlyGymError(f"the fly has its odor sensors already ({name}_sensor)")
    for name, parent, pos in ODOR_SENSORS:
        spec.body(parent).add_site(name=f"{name}_sensor", pos=list(pos))


def odor_sensor_sites(mjm: mujoco.MjModel, fly_name: str = "nmf") -> torch.Tensor:
    """int64 [4]: the compiled model's site ids of ``fly_name``'s odor sensors, in
    :data:`ODOR_SENSORS`' order.

    Raises:
        FlyGymError: a sensor is missing (the fly was built without :func:`add_odor_sensors`).
    """
    ids = [mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SITE, f"{fly_name}/{name}_sensor") for name, _, _ in ODOR_SENSORS]
    missing = [name for (name, _, _), i in zip(ODOR_SENSORS, ids) if i < 0]
    if missing:
        raise FlyGymError(f"no odor sensor site {', '.join(f'{fly_name}/{m}_sensor' for m in missing)} in the model: "
                          "build the fly with flycuda.flygym.olfaction.add_odor_sensors")
    return torch.tensor(ids, dtype=torch.int64)
