"""NumPy reference of ``flycuda.ops.hybrid_senses`` (the hybrid controllers' sensory inputs
from MuJoCo Warp's Data), same name and arguments, written from what it stands for rather
than from the kernel: FlyGym's ``HybridControllerObservation.from_sim`` (heights, heading)
and ``Simulation.get_bodysegment_contact_forces(ground_only=True)``, each contact's force as
MuJoCo Warp's ``support.contact_force`` computes it (``_decode_pyramid``, the elliptic rows,
minus adhesion, ``force @ frame``), in float64, summed in contact order. For checking.
"""

from __future__ import annotations

import numpy as np
import torch

from ..ops.launch_plan import CONTACT_FIELDS, SENSE_GROUND

__all__ = ["hybrid_senses", "contact_force"]


def contact_force(c: int, contacts: dict, cone: int) -> np.ndarray:
    """Contact ``c``'s force in the world frame (float64 [3]): MuJoCo Warp's
    ``contact_force(to_world_frame=True)``, its first three components (``contacts``: the
    Data's contact arrays by :data:`flycuda.ops.CONTACT_FIELDS` name, as NumPy)."""
    w = int(contacts["worldid"][c])
    efc = contacts["efc_force"][w].astype(np.float64)
    njmax = len(efc)
    adr = int(contacts["efc_address"][c, 0])
    dim = int(contacts["dim"][c])
    local = np.zeros(6)
    if cone == 0:  # pyramidal: pairs of edge forces
        if dim == 1:
            local[0] = efc[adr] if adr < njmax else 0.0
        for i in range(min(dim - 1, 5) if dim > 1 else 0):  # (MuJoCo's condim is at most 6)
            d1 = efc[adr + 2 * i] if adr + 2 * i < njmax else 0.0
            d2 = efc[adr + 2 * i + 1] if adr + 2 * i + 1 < njmax else 0.0
            local[0] += d1 + d2
            local[i + 1] = (d1 - d2) * float(contacts["friction"][c, i])
    else:  # elliptic: one row per component
        for i in range(min(dim, 3, contacts["efc_address"].shape[1])):  # the force's rows (not the torques')
            a = int(contacts["efc_address"][c, i])
            if 0 <= a < njmax:
                local[i] = efc[a]
    local[0] -= float(contacts["adhesion"][c])
    frame = contacts["frame"][c].astype(np.float64)  # rows: normal, tangent 1, tangent 2
    return np.array([local[0] * frame[0, j] + local[1] * frame[1, j] + local[2] * frame[2, j] for j in range(3)])


def hybrid_senses(xpos: torch.Tensor, xmat: torch.Tensor, body_ids: torch.Tensor, contacts: list[torch.Tensor],
                  geom_segment: torch.Tensor, cone: int, thorax_z: torch.Tensor, tarsus5_z: torch.Tensor,
                  stumbling_forces: torch.Tensor, heading: torch.Tensor) -> None:
    """:func:`flycuda.ops.hybrid_senses`, in place (the outputs' devices kept)."""
    c = {name: t.detach().cpu().numpy() for name, t in zip(CONTACT_FIELDS, contacts)}
    pos, mat = xpos.detach().cpu().double().numpy(), xmat.detach().cpu().double().numpy()
    ids = body_ids.cpu().long().numpy()
    seg = geom_segment.cpu().numpy()
    W, ngeom = pos.shape[0], len(seg)
    forces = np.zeros((W, 18, 3))
    for k in range(min(int(c["nacon"][0]), len(c["worldid"]))):
        w, (g1, g2) = int(c["worldid"][k]), (int(g) for g in c["geom"][k])
        if not (0 <= w < W and 0 <= g1 < ngeom and 0 <= g2 < ngeom) or c["efc_address"][k, 0] < 0:
            continue
        s1, s2 = int(seg[g1]), int(seg[g2])
        if 0 <= s1 < 18 and s2 == SENSE_GROUND:    # the segment is geom 1: the force on it is -f
            forces[w, s1] -= contact_force(k, c, cone)
        elif 0 <= s2 < 18 and s1 == SENSE_GROUND:  # geom 2: +f
            forces[w, s2] += contact_force(k, c, cone)
    thorax_z.copy_(torch.from_numpy(pos[:, ids[0], 2].copy()))
    tarsus5_z.copy_(torch.from_numpy(pos[:, ids[1:], 2].copy()))
    heading.copy_(torch.from_numpy(mat[:, ids[0], :, 0].copy()))
    stumbling_forces.copy_(torch.from_numpy(forces.reshape(W, 6, 3, 3)))
