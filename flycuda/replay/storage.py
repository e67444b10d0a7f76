"""Where a replay's recording goes: the target checked before anything is built, the
store opened (or created) with one array per observable, and closed complete or incomplete."""

from __future__ import annotations

import os

from ..recording import store as zstore
from ..recording.reader import Target
from ..sim.worlds import is_flygym_model
from .results import SETTLE_SECONDS, rmse_from_sums

__all__ = ["target_of", "open_store", "close_store", "length_unit"]


def length_unit(model) -> str:
    """The unit of the model's lengths (MuJoCo has none of its own): NeuroMechFly is in mm
    (FlyGym's), the built-in hexapod in m."""
    if model is None or model == "hexapod":
        return "m"
    return "mm" if is_flygym_model(model) else "the model's"


def target_of(record, overwrite: bool) -> Target | None:
    """Where the recording goes (None: nowhere); a path is checked now, before any build."""
    if record is None or isinstance(record, Target):
        target = record
    else:
        target = Target(store=record, overwrite=overwrite)
    if target is not None and target.group is None and target.create \
            and isinstance(target.store, (str, os.PathLike)) and target.store != "memory":
        zstore.check_path(os.fspath(target.store), target.overwrite)
    return target


def open_store(target: Target | None, run, mode: str, interp: str):
    """The store's group (created here unless the target brings one) and its writer."""
    if target is None:
        return None, None
    rec, sim = run.recorder, run.sim
    group = target.group
    if group is None and target.create:
        W = target.worlds_total or sim.nworld
        wc = target.world_chunk or W
        arrays = rec.array_specs(W, wc)
        ang = rec.stream("angles")
        arrays.insert(1, zstore.ArraySpec("targets", W, ang.rows, ang.obs.column_names, ang.obs.every, wc, ang.C))
        facts = dict(timestep=sim.timestep, worlds=W, steps=run.steps, mode=mode, interp=interp,
                     fps=run.motion.fps, settle_seconds=SETTLE_SECONDS, **target.attrs)
        facts.setdefault("length_unit", length_unit(facts.get("model")))
        group = zstore.create(target.zarr_store(), arrays, facts, overwrite=target.overwrite)
    if target.sync is not None:
        target.sync()  # torchrun: the store exists for every rank past this point
    if group is None:
        group = zstore.open_store(target.zarr_store(), "r+")
    writer = zstore.Writer(group, device=run.dev)
    rec.attach(writer, target.world_offset)
    return group, writer


def close_store(group, writer, target, ok: bool, why: str = "", rmse=None, count: int = 0,
                overflow: dict | None = None) -> None:
    """Drains the writer and marks the store: complete (with the tracking RMSE per DOF and
    ``mjw_overflow``, the worlds whose physics overflowed MuJoCo Warp's buffers: world ->
    what, see :meth:`flycuda.sim.Sim.overflowed`), or incomplete with the reason."""
    if writer is not None:
        off = target.world_offset or 0
        facts = {"rmse_per_dof": rmse_from_sums(rmse.cpu(), count).tolist(),
                 "mjw_overflow": {str(off + w): why_w for w, why_w in (overflow or {}).items()}} if ok else {}
        zstore.close(group, writer, ok=ok, why=why, mark_complete=target.finalize, **facts)
