"""Where a fly's state lives in MuJoCo's arrays, and the observation columns an
environment can gather from it (one table: names, sources, columns)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mujoco
import torch

from ..errors import EnvError
from ..flygym.olfaction import SENSOR_NAMES as ODOR_SENSOR_NAMES
from ..ops.launch_plan import named_slice
from ..ops.walking import LEGS
from ..vision.eyes import readout_names

# The observation groups, in the order they appear when asked for, with what each holds.
GROUPS = {
    "joints": "the driven joints' angles (rad)",
    "joint_vel": "the driven joints' velocities (rad/s)",
    "thorax_height": "the root body's height (the model's length unit)",
    "thorax_quat": "the root body's orientation, a unit quaternion (w, x, y, z)",
    "thorax_vel": "the root body's linear (world frame) and angular velocity",
    "reference": "the recording's pose at the world's own step (rad): the next action that imitates it",
    "phase": "the world's position in the recording, in [0, 1)",
    "action": "the controls the last action set (rad; 0 after a reset)",
    "forces": "the driven actuators' forces in the last physics step (0 after a reset)",
    "contacts": "the model's contact sensors (FlyGym's ground-contact sensors), as the last physics step left them "
                "(0 after a reset)",
    "vision": "both eyes' ommatidia readouts [2, O, 2], flattened (needs a model with eyes)",
    "drive": "the descending drives of the last action (left, right; action='descending')",
    "cpg": "the walking controller's six oscillators: phases in [0, 2 pi), then magnitudes (action='descending')",
    "corrections": "the controller's retraction, then stumbling corrections of each leg (action='descending')",
    "connectome": "flyvis's network behind both eyes: the voltages of the chosen cell types at each eye's central "
                  "column (or all 721), make(..., vision=..., connectome=...)",
    "odor": "the odor at the four sensors (maxillary palps L, R, antennae L, R) for each of the task's k odor "
            "dimensions, [k, 4] flattened (a task with odor sources: odor_taxis)",
}
"""The observation groups (``observe=``), in the order they appear when asked for: name -> what it holds."""

# The sources gather_columns reads, in this order (the index is the source id). "own": the
# environment's own float32 columns [W, 27], OWN_COLUMNS.
SOURCES = ("qpos", "qvel", "ctrl", "reference", "own", "actuator_force", "vision", "sensordata")
OWN_COLUMNS = (("phase", 1), ("drive", 2), ("cpg_phase", 6), ("cpg_magnitude", 6), ("retraction", 6),
               ("stumbling", 6))
DESCENDING_GROUPS = ("drive", "cpg", "corrections")  # the groups action='descending' fills
ODOR_START = sum(n for _, n in OWN_COLUMNS)  # the odor columns [k, 4] follow OWN_COLUMNS in the own columns


def own_slice(name: str) -> slice:
    """Where ``name`` (one of :data:`OWN_COLUMNS`) lies in the environment's own columns."""
    return named_slice(OWN_COLUMNS, name)


def _own(name: str, labels) -> list[tuple[str, int, int]]:
    s = own_slice(name)
    return [(f"{name}:{label}", SOURCES.index("own"), c) for label, c in zip(labels, range(s.start, s.stop))]


@dataclass
class FlyLayout:
    """A fly's addresses: its free (root) joint in qpos/qvel and, per driven actuator,
    the joint's qpos and qvel address. ``names`` are the driven DOFs' names."""

    act_ids: torch.Tensor          # int32 [A]: the driven actuators
    names: tuple[str, ...]         # [A]
    qpos_adrs: list[int]           # [A]
    dof_adrs: list[int]            # [A]
    root_adr: int                  # qpos address of the free joint
    root_dof: int                  # its qvel address
    ctrl_range: torch.Tensor       # float32 [2, A]: low, high (+-inf where an actuator has none): the clamp
    action_bounds: torch.Tensor    # float32 [2, A]: the action space's (see FlyLayout.of)
    contacts: list = field(default_factory=list)  # (column name, sensordata address) of the contact sensors

    @classmethod
    def of(cls, sim, act_ids: torch.Tensor, names) -> "FlyLayout":
        mjm = sim.mjm
        free = [j for j in range(mjm.njnt) if int(mjm.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        if not free:
            raise EnvError("the model has no free joint: an environment needs a body that moves freely (the fly)")
        qadr, dadr = [], []
        for a in [int(i) for i in act_ids.cpu()]:
            if int(mjm.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT):
                raise EnvError(f"actuator {a} drives no joint: the environment's actions drive joints")
            j = int(mjm.actuator_trnid[a, 0])
            qadr.append(int(mjm.jnt_qposadr[j]))
            dadr.append(int(mjm.jnt_dofadr[j]))
        ids = act_ids.long().cpu()
        rng = torch.as_tensor(mjm.actuator_ctrlrange, dtype=torch.float32)[ids].t().contiguous()
        limited = torch.as_tensor(mjm.actuator_ctrllimited, dtype=torch.bool)[ids]
        rng[0] = torch.where(limited, rng[0], torch.full_like(rng[0], -float("inf")))
        rng[1] = torch.where(limited, rng[1], torch.full_like(rng[1], float("inf")))
        # The action space is bounded everywhere (gymnasium's RescaleAction, sample()): an actuator's
        # ctrl range, else its joint's range (NeuroMechFly's position actuators have none), else +-pi.
        jnt = torch.as_tensor([int(mjm.actuator_trnid[a, 0]) for a in ids.tolist()], dtype=torch.long)
        jrng = torch.as_tensor(mjm.jnt_range, dtype=torch.float32)[jnt].t()
        jlim = torch.as_tensor(mjm.jnt_limited, dtype=torch.bool)[jnt] & (jrng[0] < jrng[1])
        bounds = torch.stack([torch.where(jlim, jrng[0], torch.full_like(jrng[0], -math.pi)),
                              torch.where(jlim, jrng[1], torch.full_like(jrng[1], math.pi))])
        bounds = torch.where(torch.isfinite(rng), rng, bounds).contiguous()
        contacts = []
        for i in range(mjm.nsensor):
            name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SENSOR, i) or ""
            if "contact" in name.lower():
                adr, dim = int(mjm.sensor_adr[i]), int(mjm.sensor_dim[i])
                contacts += [(f"contact:{name}" + (f":{j}" if dim > 1 else ""), adr + j) for j in range(dim)]
        return cls(act_ids, tuple(names), qadr, dadr, int(mjm.jnt_qposadr[free[0]]), int(mjm.jnt_dofadr[free[0]]),
                   rng, bounds, contacts)

    def group(self, name: str, num_ommatidia: int = 0, odor_dims: int = 0, connectome: tuple = ()
              ) -> list[tuple[str, int, int]]:
        """The columns of observation group ``name``: (column name, source id, column);
        ``odor_dims``: the task's odor dimensions k (0: it has no odor sources); ``connectome``: the
        connectome group's column names (after the odor's in the own columns; none: no network)."""
        src = {s: i for i, s in enumerate(SOURCES)}
        if name == "joints":
            return [(f"joint:{n}", src["qpos"], a) for n, a in zip(self.names, self.qpos_adrs)]
        if name == "joint_vel":
            return [(f"joint_vel:{n}", src["qvel"], a) for n, a in zip(self.names, self.dof_adrs)]
        if name == "thorax_height":
            return [("thorax:z", src["qpos"], self.root_adr + 2)]
        if name == "thorax_quat":
            return [(f"thorax:q{c}", src["qpos"], self.root_adr + 3 + i) for i, c in enumerate("wxyz")]
        if name == "thorax_vel":
            return [(f"thorax:{c}", src["qvel"], self.root_dof + i)
                    for i, c in enumerate(("vx", "vy", "vz", "wx", "wy", "wz"))]
        if name == "reference":
            return [(f"reference:{n}", src["reference"], d) for d, n in enumerate(self.names)]
        if name == "phase":
            return [("phase", src["own"], own_slice("phase").start)]
        if name == "drive":
            return _own("drive", ("left", "right"))
        if name == "cpg":
            return _own("cpg_phase", LEGS) + _own("cpg_magnitude", LEGS)
        if name == "corrections":
            return _own("retraction", LEGS) + _own("stumbling", LEGS)
        if name == "action":
            return [(f"action:{n}", src["ctrl"], int(a)) for n, a in zip(self.names, self.act_ids.tolist())]
        if name == "forces":
            return [(f"force:{n}", src["actuator_force"], int(a)) for n, a in zip(self.names, self.act_ids.tolist())]
        if name == "contacts":
            if not self.contacts:
                raise EnvError("observation 'contacts' needs contact sensors (sensors named *contact*, as FlyGym's "
                               "ground-contact sensors); this model has none")
            return [(n, src["sensordata"], a) for n, a in self.contacts]
        if name == "odor":
            if odor_dims < 1:
                raise EnvError("observation 'odor' needs a task with odor sources (odor_taxis); this one has none")
            return [(f"odor:{d}:{sensor}", src["own"], ODOR_START + d * len(ODOR_SENSOR_NAMES) + i)
                    for d in range(odor_dims) for i, sensor in enumerate(ODOR_SENSOR_NAMES)]
        if name == "vision":
            return [(n, src["vision"], i) for i, n in enumerate(readout_names(num_ommatidia))]  # the store's names
        if name == "connectome":
            if not connectome:
                raise EnvError("observation 'connectome' needs flyvis's network behind the eyes: make(..., "
                               "vision='exact', connectome=True)")
            start = ODOR_START + odor_dims * len(ODOR_SENSOR_NAMES)
            return [(n, src["own"], start + i) for i, n in enumerate(connectome)]
        raise EnvError(f"unknown observation {name!r}; the observations are: {', '.join(GROUPS)}")


def columns_of(layout: FlyLayout, groups, num_ommatidia: int = 0, odor_dims: int = 0, connectome: tuple = ()
               ) -> tuple[list[str], torch.Tensor, dict]:
    """The names, the int32 [O, 2] (source, column) table and each group's slice of the
    columns, of observation ``groups`` in their order."""
    groups = list(groups)
    if len(set(groups)) != len(groups):
        raise EnvError(f"an observation group is named twice: {groups}")
    rows, slices = [], {}
    for g in groups:
        cols = layout.group(g, num_ommatidia, odor_dims, connectome)
        slices[g] = slice(len(rows), len(rows) + len(cols))
        rows += cols
    table = torch.tensor([[s, c] for _, s, c in rows], dtype=torch.int32).reshape(-1, 2)
    return [n for n, _, _ in rows], table, slices


def unit_of(column: str, model_unit: str) -> str:
    """The unit of observation column ``column`` (a name of :meth:`FlyLayout.group`), with
    lengths in ``model_unit`` ("m" for the hexapod, "mm" for NeuroMechFly)."""
    kind, _, rest = column.partition(":")
    if kind in ("joint", "reference", "action"):
        return "rad"
    if kind == "joint_vel":
        return "rad/s"
    if kind == "thorax":
        return {"z": model_unit, "vx": f"{model_unit}/s", "vy": f"{model_unit}/s", "vz": f"{model_unit}/s",
                "wx": "rad/s", "wy": "rad/s", "wz": "rad/s"}.get(rest, "1")  # q*: a unit quaternion
    if kind == "phase":
        return "1 (fraction of the recording)"
    if kind == "force":
        return "actuator force (MuJoCo's units for the model)"
    if kind == "vision":
        return "1 (ommatidium intensity, 0 to 1)"
    if kind == "drive":
        return "1 (descending drive)"
    if kind == "odor":
        return "odor intensity (the sources' peak units)"
    if kind == "connectome":
        return "voltage (flyvis's units; its activity)"
    if kind == "cpg_phase":
        return "rad"
    if kind in ("cpg_magnitude", "retraction", "stumbling"):
        return "1 (FlyGym's controller units)"
    return "MuJoCo's sensor units"  # contacts
