"""FlyGym's terrains (``flygym.compose.world``: flat, gapped, blocks, mixed) as MuJoCo Warp
runs them, for every world.

FlyGym's complex terrains are ground boxes (and a base plane) with one explicit contact pair
per fly geom and ground geom (``margin`` 1e-3 mm, FlyGym's ground contact parameters).
NeuroMechFly's collision geoms are meshes, and MuJoCo's MULTICCD flag is on (FlyGym's
``mujoco_globals``), which MuJoCo Warp (3.16 and 4.0) refuses for a box-mesh pair with a
margin: "non-zero margin with MULTICCD enabled". :func:`fit_for_warp` sets those pairs'
margin to 0 and keeps everything else FlyGym's (MULTICCD's several contacts per foot on a
box; the plane pairs' margin). That is the one deviation from FlyGym's world: a contact
becomes active at touch rather than 1e-3 mm before it. (Turning MULTICCD off instead keeps
the margin but leaves one contact per mesh-box pair; both run at the same speed on Warp's
CPU device.)
"""

from __future__ import annotations

import mujoco

from ..errors import FlyGymError

__all__ = ["TERRAINS", "terrain_world", "spawn_height", "fit_for_warp", "check_terrain"]

TERRAINS = ("flat", "gapped", "blocks", "mixed")
"""FlyGym's terrains by name: ``FlatGroundWorld``, ``GappedTerrainWorld``,
``BlocksTerrainWorld`` and ``MixedTerrainWorld`` with FlyGym's defaults."""

_TOP_AT_ORIGIN = {"flat": 0.0, "gapped": 0.0, "blocks": 0.45, "mixed": 0.0}
"""mm: the highest ground top near the origin (blocks: the 0.45 mm blocks; the others' tops are 0)."""
_REFUSED = {int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_MESH)}


def check_terrain(terrain: str, error=FlyGymError) -> str:
    """``terrain`` if it is one of :data:`TERRAINS`, else ``error`` listing them."""
    if terrain not in TERRAINS:
        raise error(f"unknown terrain {terrain!r}; the terrains are: {', '.join(TERRAINS)}")
    return terrain


def terrain_world(terrain: str = "flat"):
    """FlyGym's world of that name (:data:`TERRAINS`), with FlyGym's defaults (gapped: 1 mm
    blocks, 0.3 mm gaps 2 mm deep; blocks: 1.3 mm blocks of 0.1 and 0.45 mm; mixed: both, and
    flat floor, three times along x)."""
    check_terrain(terrain)
    from flygym.compose import FlatGroundWorld  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))
    from flygym.compose.world import BlocksTerrainWorld, GappedTerrainWorld, MixedTerrainWorld  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return {"flat": FlatGroundWorld, "gapped": GappedTerrainWorld, "blocks": BlocksTerrainWorld,
            "mixed": MixedTerrainWorld}[terrain]()


def spawn_height(terrain: str, above: float = 0.8) -> float:
    """mm: where the fly is spawned, ``above`` (FlyGym's tutorial spawn: 0.8 mm) over the
    terrain's highest top near the origin, so that no leg starts inside a block."""
    return _TOP_AT_ORIGIN[check_terrain(terrain)] + above


def fit_for_warp(spec: mujoco.MjSpec) -> int:
    """Sets to 0 the margin of every explicit contact pair MuJoCo Warp would refuse, in place,
    before the world is compiled; returns how many it changed. MuJoCo Warp's rule (its
    ``put_model``): a pair of two boxes or meshes may have no margin with MULTICCD on, nor two
    boxes with NATIVECCD on. A flat world (plane pairs) and capsule-fitted flies change nothing.
    Geoms colliding by contype/conaffinity with a margin of their own are left as they are
    (FlyGym's ground geoms collide by explicit pairs only).

    Raises:
        FlyGymError: a pair names a geom the spec does not have.
    """
    multiccd = not spec.option.disableflags & int(mujoco.mjtDisableBit.mjDSBL_MULTICCD)
    nativeccd = not spec.option.disableflags & int(mujoco.mjtDisableBit.mjDSBL_NATIVECCD)
    box = int(mujoco.mjtGeom.mjGEOM_BOX)
    changed = 0
    for pair in spec.pairs:
        geoms = [spec.geom(name) for name in (pair.geomname1, pair.geomname2)]
        if None in geoms:
            raise FlyGymError(f"contact pair {pair.name!r} names a geom the world does not have: "
                              f"{pair.geomname1!r}, {pair.geomname2!r}")
        types = {int(g.type) for g in geoms}
        if pair.margin != 0 and types <= _REFUSED and (multiccd or (types == {box} and nativeccd)):
            pair.margin = 0.0
            changed += 1
    return changed
