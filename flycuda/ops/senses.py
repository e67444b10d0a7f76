"""The sensory inputs of FlyGym's hybrid walking controllers, read on the device from
MuJoCo Warp's Data (csrc/kernels/hybrid_senses.cuh): what ``HybridControllerObservation.from_sim``
reads from a CPU simulation, for every world, inside a captured control step.

* :func:`hybrid_senses`: one call fills the inputs of :func:`flycuda.ops.hybrid_step`;
* :data:`CONTACT_FIELDS`: MuJoCo Warp's contact arrays, in the order the op takes them;
* :func:`geom_segments`: the geom table the op reads (which geoms are leg segments, which ground).

:func:`flycuda.reference.senses.hybrid_senses` is its NumPy reference; flycuda.sim builds the
arguments from a MuJoCo Warp model and data.
"""

from __future__ import annotations

import torch

from ._values import check_index
from .checks import check_same_device
from .launch_plan import CONTACT_FIELDS, SENSE_BODIES, SENSE_GROUND

__all__ = ["hybrid_senses", "geom_segments", "CONTACT_FIELDS"]

LINKS = ("tibia", "tarsus1", "tarsus2")
"""The leg segments whose ground forces the stumbling rule reads, in the op's order."""


def geom_segments(ngeom: int, segment_geoms, ground_geoms, device=None) -> torch.Tensor:
    """The op's ``geom_segment`` table, int32 [ngeom]: ``leg * 3 + link`` for the geom of
    each leg's tibia, tarsus1 and tarsus2 (``segment_geoms``: 18 geom ids, legs in
    LEGS' order, links in :data:`LINKS`' order), -2 for each geom of ``ground_geoms``, -1
    for the rest.

    Raises:
        ValueError: not 18 segment geoms, an id outside [0, ngeom), or a geom in both lists.
    """
    segment_geoms, ground_geoms = [int(g) for g in segment_geoms], [int(g) for g in ground_geoms]
    if len(segment_geoms) != 18:
        raise ValueError(f"segment_geoms: expected 18 geom ids (6 legs x tibia, tarsus1, tarsus2), "
                         f"got {len(segment_geoms)}")
    for name, ids in (("segment_geoms", segment_geoms), ("ground_geoms", ground_geoms)):
        bad = [g for g in ids if not 0 <= g < ngeom]
        if bad:
            raise ValueError(f"{name}: geom ids must be in [0, {ngeom}), got {bad[0]}")
    both = sorted(set(segment_geoms) & set(ground_geoms))
    if both:
        raise ValueError(f"geom {both[0]} is both a leg segment and ground")
    table = torch.full((ngeom,), -1, dtype=torch.int32)
    table[ground_geoms] = SENSE_GROUND
    table[segment_geoms] = torch.arange(18, dtype=torch.int32)
    return table.to(device)


def hybrid_senses(xpos: torch.Tensor, xmat: torch.Tensor, body_ids: torch.Tensor, contacts: list[torch.Tensor],
                  geom_segment: torch.Tensor, cone: int, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor,
                  stumbling_forces: torch.Tensor, heading: torch.Tensor) -> None:
    """The hybrid controllers' sensory inputs of every world, in place, from MuJoCo Warp's
    Data after a step (FlyGym's ``HybridControllerObservation.from_sim``)::

        thorax_z[w]           = xpos[w, body_ids[0], 2]
        tarsus5_z[w, l]       = xpos[w, body_ids[1 + l], 2]
        heading[w]            = xmat[w, body_ids[0]][:, 0]    (the thorax's x axis)
        stumbling_forces[w, l, k] = the sum over the world's contacts between leg l's segment k
            (tibia, tarsus1, tarsus2) and a ground geom, whose constraint is in the solver, of
            the ground's force on the segment in the world frame

    which is FlyGym's ``get_bodysegment_contact_forces(ground_only=True)``: each contact's
    force is MuJoCo Warp's ``contact_force`` (the pyramid decoded or the elliptic cone's rows,
    minus the contact's adhesion) times its frame, negated when the segment is the contact's
    first geom. Computed in float64 from the float32 Data; on CUDA the sums are atomic (their
    last bit varies run to run), on the CPU in contact order.

    Args:
        xpos: float32 [W, nbody, 3], contiguous (``wp.to_torch(d.xpos)``).
        xmat: float32 [W, nbody, 3, 3], contiguous (``wp.to_torch(d.xmat)``).
        body_ids: int32/int64 [7], each in [0, nbody): the thorax, then each leg's tarsus5
            in LEGS' order (checked once per tensor on CUDA; a bad id reads NaN).
        contacts: the Data's contact arrays in :data:`CONTACT_FIELDS`' order, contiguous:
            geom int32 [slots, 2], worldid int32 [slots], frame float32 [slots, 3, 3], friction
            float32 [slots, 5], dim int32 [slots], efc_address int32 [slots, k], adhesion
            float32 [slots], efc.force float32 [W, njmax], nacon int32 [1] (read on the device;
            contacts with a world, geom or row outside the arrays are skipped).
        geom_segment: int32 [ngeom] from :func:`geom_segments`.
        cone: the model's ``opt.cone`` (0 pyramidal, FlyGym's; 1 elliptic).
        thorax_z, tarsus5_z, stumbling_forces, heading: float64 [W], [W, 6], [W, 6, 3, 3],
            [W, 3], contiguous (written).

    Raises:
        RuntimeError: a wrong dtype, shape, device, aliasing or body id (every output untouched).
    """
    if xpos.dim() == 3:
        check_index("hybrid_senses", "body_ids", body_ids, xpos.shape[1], "nbody = xpos.size(1)", ref=thorax_z)
    torch.ops.flycuda.hybrid_senses.default(xpos, xmat, body_ids, list(contacts), geom_segment, int(cone), thorax_z,
                                            tarsus5_z, stumbling_forces, heading)


@torch.library.register_fake("flycuda::hybrid_senses")
def _hybrid_senses_fake(xpos, xmat, body_ids, contacts, geom_segment, cone, thorax_z, tarsus5_z, stumbling_forces,
                        heading):
    torch._check(xpos.dim() == 3 and xpos.dtype == torch.float32,
                 lambda: f"flycuda.hybrid_senses: argument 'xpos' must be float32 [W, nbody, 3], got {xpos.dtype} "
                         f"{tuple(xpos.shape)}")
    torch._check(body_ids.dim() == 1 and body_ids.shape[0] == SENSE_BODIES,
                 lambda: f"flycuda.hybrid_senses: argument 'body_ids' must be [{SENSE_BODIES}], got "
                         f"{tuple(body_ids.shape)}")
    torch._check(len(contacts) == len(CONTACT_FIELDS),
                 lambda: f"flycuda.hybrid_senses: argument 'contacts' must hold {len(CONTACT_FIELDS)} tensors, got "
                         f"{len(contacts)}")
    W = xpos.shape[0]
    for name, t, shape in (("thorax_z", thorax_z, (W,)), ("tarsus5_z", tarsus5_z, (W, 6)),
                           ("stumbling_forces", stumbling_forces, (W, 6, 3, 3)), ("heading", heading, (W, 3))):
        torch._check(t.dtype == torch.float64 and tuple(t.shape) == shape,
                     lambda name=name, t=t, shape=shape: f"flycuda.hybrid_senses: argument '{name}' must be float64 "
                                                         f"{list(shape)}, got {t.dtype} {tuple(t.shape)}")
    check_same_device("hybrid_senses", "xpos", xpos, xmat=xmat, body_ids=body_ids, geom_segment=geom_segment,
                      thorax_z=thorax_z, tarsus5_z=tarsus5_z, stumbling_forces=stumbling_forces, heading=heading,
                      **{f"contacts[{i}]": t for i, t in enumerate(contacts)})
