"""NeuroMechFly frozen, the writing side (:mod:`flycuda.flygym.frozen` reads it): FlyGym's worlds,
its Spotlight clip and its retina written where FlyGym is, for a machine where it cannot be
installed.

    python -m flycuda.flygym.freeze OUT_DIR     # every variant of frozen.VARIANTS: about 7 MiB in all
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile

import numpy as np

from ..errors import FlyGymError
from .bridge import TIMESTEP, Setup, dof_names
from .frozen import CLIP, MESHES, RETINA, VARIANTS, variant
from .spotlight import clip_frames, flygym_targets, spotlight

__all__ = ["freeze", "world_files", "write_tar"]


def world_files(spec) -> tuple[str, dict]:
    """The world's MJCF with its meshes named by their file names, and those files' bytes."""
    xml, meshes = spec.to_xml(), {}
    for mesh in spec.meshes:  # absolute paths into FlyGym's assets: the files by their names
        path = mesh.file if os.path.isabs(mesh.file) else os.path.join(spec.modelfiledir, spec.meshdir, mesh.file)
        name = os.path.basename(path)
        if name in meshes and meshes[name] != path:
            raise FlyGymError(f"two meshes share the file name {name!r}: {meshes[name]} and {path}")
        meshes[name] = path
        xml = xml.replace(f'file="{mesh.file}"', f'file="{name}"')
    return xml, {n: open(p, "rb").read() for n, p in meshes.items()}


def _facts(setup) -> dict:
    """The fly's facts for ``facts.json``."""
    adhesion = setup.gpu_sim._intern_adhesionactuatorids_by_fly[setup.fly.name]  # FlyGym's own mapping
    mjm = setup.gpu_sim.mj_model
    return {"fly": setup.fly.name, "camera": setup.camera, "dofs": list(dof_names(setup.fly)),
            "adhesion": [mjm.actuator(int(i)).name for i in adhesion]}


def _write_retina(out: str) -> None:
    """FlyGym's ``Retina()`` in :meth:`flycuda.vision.retina.RetinaMap.save`'s format."""
    from flygym.vision.retina import Retina  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    r, path = Retina(), os.path.join(out, RETINA)
    with open(path + ".part", "wb") as f:
        np.savez_compressed(f, id_map=r.ommatidia_id_map, pale=np.asarray(r.pale_type_mask).astype(np.int8),
                            lookup=r._fisheye_lookup)
    os.replace(path + ".part", path)


def _write_clip(out: str, fly) -> None:
    """``spotlight.npz``: the clip (FlyGym's preprocessing) in ``fly``'s DOF order, and its tutorial's targets."""
    motion = spotlight(fly)
    path = os.path.join(out, CLIP)
    with open(path + ".part", "wb") as f:
        np.savez(f, angles64=motion.angles64.numpy(), targets=flygym_targets(fly, TIMESTEP).astype(np.float32),
                 dofs=np.array(motion.dof_names), fps=motion.fps, timestep=TIMESTEP,
                 clip_frames=clip_frames())
    os.replace(path + ".part", path)


def freeze(out: str, variants=None, progress: bool = True) -> list[str]:
    """Writes each variant (:data:`VARIANTS` by default) into ``out``; needs FlyGym. Returns
    the paths written. Each file is written whole, then renamed: nothing half-written keeps
    a variant's name."""
    os.makedirs(out, exist_ok=True)
    paths, meshes = [], {}
    for name, vision, terrain, locomotion in variants or VARIANTS:
        setup = Setup(name, 1, device="cpu", vision=vision, terrain=terrain, locomotion=locomotion)
        if not paths:
            _write_clip(out, setup.fly)
            _write_retina(out)
        xml, files = world_files(setup.world.mjcf_root)
        meshes.update(files)
        path = os.path.join(out, variant(name, vision, terrain, locomotion))
        write_tar(path, [("world.xml", xml.encode()), ("facts.json", json.dumps(_facts(setup)).encode())])
        paths.append(path)
        if progress:
            print(f"{path}: {os.path.getsize(path) / 2**10:.0f} KiB", flush=True)
    write_tar(os.path.join(out, MESHES), sorted(meshes.items()))  # the variants' meshes, once
    return paths


def write_tar(path: str, members: list) -> None:
    """An xz tar of ``members`` (name, bytes), written whole, then renamed."""
    with tarfile.open(path + ".part", "w:xz") as tar:
        for member, data in members:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    os.replace(path + ".part", path)


if __name__ == "__main__":  # python -m flycuda.flygym.freeze OUT_DIR
    if len(sys.argv) != 2:
        sys.exit("usage: python -m flycuda.flygym.freeze OUT_DIR")
    freeze(sys.argv[1])
