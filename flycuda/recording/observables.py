"""What a replay records: per-world quantities of MuJoCo Warp's Data, by name.

An observable is written ``KIND[:NAMES][@EVERY]``:
==================  ==========================================================
``angles``          the driven joint angles, one column per motion DOF (default)
``qpos``            every position coordinate (enough to re-render a world)
``qvel``            every velocity coordinate
``ctrl``            the controls actually written (one column per actuator)
``actuator_force``  each actuator's force
``body_pos:NAMES``  world positions of bodies (x, y, z each), e.g. the thorax
``body_quat:NAMES`` world orientations of bodies (w, x, y, z, MuJoCo's order)
``sensor:NAMES``    sensordata columns of the named sensors (e.g. FlyGym's
                    ground-contact sensors), one column per sensor value
==================  ==========================================================

With the eyes (``--vision``), ``connectome[:TYPES]`` and ``connectome_columns[:TYPES]``
record flyvis's network behind both eyes of every world (:mod:`flycuda.vision.stage`): the
voltages of the named cell types (default T4a-d and T5a-d) at each eye's central column or at
all 721, one network step per eye sample, at the eyes' rate.

NAMES are comma-separated names or shell patterns (``sensor:*contact*``); a
name also matches a prefixed one (FlyGym names bodies ``<fly>/<body>``), and a
pattern that matches nothing exactly is tried regardless of case.

Derived quantities (body poses, sensordata, actuator forces) are what MuJoCo
Warp computed during the step, from the state at its start, as MuJoCo's own
``mj_step`` leaves them in ``mjData``; qpos, qvel and ctrl are the state after it.
``@EVERY`` is a number of steps (``@10``) or a rate (``@30hz``); without it the
replay's ``record_every`` applies. :func:`resolve` turns specs into
:class:`Observable` s: a zero-copy ``[W, N]`` view of a Data array and the
columns to gather from it with :func:`flycuda.record_chunk`.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field

import mujoco
import torch

from ..errors import ObservableError

__all__ = ["Observable", "ObservableError", "KINDS", "CONNECTOME_KINDS", "parse", "resolve", "parse_rate", "qpos_labels"]

# kind -> (Data field, values per named item, component names)
KINDS = {
    "angles": ("qpos", 1, ()),
    "qpos": ("qpos", 1, ()),
    "qvel": ("qvel", 1, ()),
    "ctrl": ("ctrl", 1, ()),
    "actuator_force": ("actuator_force", 1, ()),
    "body_pos": ("xpos", 3, ("x", "y", "z")),
    "body_quat": ("xquat", 4, ("w", "x", "y", "z")),
    "sensor": ("sensordata", 0, ()),
}
NAMED = ("body_pos", "body_quat", "sensor")
RESERVED_ATTRS = frozenset({"columns", "every", "timestep", "observable", "rows_written"})
"""The attributes the store gives every array (:func:`flycuda.recording.store.create`)."""
CONNECTOME_KINDS = {"connectome": "central", "connectome_columns": "all"}
"""The network's observables (recorded by the eyes' stage) and the columns each records."""


@dataclass(frozen=True)
class Spec:
    """A parsed ``KIND[:NAMES][@EVERY]``; ``every`` None: the replay's default,
    ``hz`` set when the rate was given in Hz."""

    kind: str
    names: tuple[str, ...] = ()
    every: int | None = None
    hz: float | None = None

    def __str__(self) -> str:
        s = self.kind + (":" + ",".join(self.names) if self.names else "")
        return s + (f"@{self.hz:g}hz" if self.hz else f"@{self.every}" if self.every else "")


@dataclass
class Observable:
    """One recorded quantity: ``source[:, columns]`` every ``every`` steps.

    name: the store's array name; source: float32 [W, N] zero-copy view of the
    Data field ``field``; columns: int32 [D] on the source's device;
    column_names: D labels."""

    name: str
    field: str
    source: torch.Tensor
    columns: torch.Tensor
    column_names: list[str]
    every: int
    spec: str = ""  # what was asked for, with its rate in steps (e.g. "body_pos:c_thorax@333")
    update: object = None  # None: a Data view, recorded inside every step; else a callable that
    # computes ``source`` (e.g. flycuda.vision's readouts), run only at the samples' steps
    attrs: dict = field(default_factory=dict)  # extra attrs of its stored array (e.g. the sample shape)

    def __post_init__(self):
        taken = sorted(set(self.attrs) & RESERVED_ATTRS)
        if taken:  # (``units`` may be an observable's own: one per column)
            raise ObservableError(f"observable {self.name!r}: its attrs may not set {', '.join(taken)} (the store's "
                                  f"own attributes of every array)")

    @property
    def width(self) -> int:
        return len(self.column_names)

    def rows(self, steps: int) -> int:
        """Samples over a run of ``steps`` steps: steps 0, every, 2 every, ... <= steps."""
        return steps // self.every + 1


def parse(text: str) -> Spec:
    """``KIND[:NAMES][@EVERY]`` -> :class:`Spec`; an unknown kind or a bad rate is one line."""
    if not isinstance(text, str) or not text.strip():
        raise ObservableError(f"an observable must be a non-empty string, got {text!r}")
    body, _, rate = text.strip().partition("@")
    kind, _, names = body.partition(":")
    if kind == "vision":
        raise ObservableError("the eyes' readouts are recorded with --vision [SPEC] (replay(vision=...)), "
                              "not --observe")
    name_list = tuple(n.strip() for n in names.split(",") if n.strip())
    if kind in CONNECTOME_KINDS:
        if rate:
            raise ObservableError(f"{kind} steps with the eyes, at --vision's rate (vision=...@RATE): no @ in {text!r}")
        return Spec(kind, name_list)
    if kind not in KINDS:
        raise ObservableError(f"unknown observable {kind!r} in {text!r}; valid: {', '.join((*KINDS, *CONNECTOME_KINDS))}")
    if kind in NAMED and not name_list:
        raise ObservableError(f"observable {kind!r} needs names, e.g. {kind}:NAME (or {kind}:* for all)")
    if kind not in NAMED and name_list:
        raise ObservableError(f"observable {kind!r} takes no names, got {text!r}")
    every, hz = parse_rate(rate)
    if every is None and hz is None and rate:
        raise ObservableError(f"bad rate in {text!r}: use @STEPS (an integer >= 1) or @RATEhz, e.g. @30hz")
    return Spec(kind, name_list, every, hz)


def parse_rate(rate: str) -> tuple[int | None, float | None]:
    """The part after ``@``: (every, None) for ``STEPS`` (an integer >= 1), (None, hz)
    for ``RATEhz`` / ``RATEfps`` (> 0, finite); (None, None) when empty or invalid."""
    r = (rate or "").strip().lower()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(?:hz|fps)", r)
    if r.isdigit() and int(r) >= 1:
        return int(r), None
    if m and math.isfinite(float(m.group(1))) and float(m.group(1)) > 0:
        return None, float(m.group(1))
    return None, None


def _names(mjm, objtype, count) -> list[str]:
    return [mujoco.mj_id2name(mjm, objtype, i) or f"#{i}" for i in range(count)]


def _match(patterns, names: list[str], what: str, spec: Spec) -> list[int]:
    """Indices of ``names`` matching each pattern, in pattern order (a pattern
    also matches the part after a ``prefix/``)."""
    out = []
    for pat in patterns:
        hits = [i for i, n in enumerate(names)
                if fnmatch.fnmatchcase(n, pat) or fnmatch.fnmatchcase(n.split("/", 1)[-1], pat)]
        if not hits:  # then regardless of case ("*thorax" finds Thorax and c_thorax)
            low = pat.lower()
            hits = [i for i, n in enumerate(names)
                    if fnmatch.fnmatchcase(n.lower(), low) or fnmatch.fnmatchcase(n.split("/", 1)[-1].lower(), low)]
        if not hits:
            shown = ", ".join(names[:15]) + (f", ... ({len(names)} in all)" if len(names) > 15 else "")
            raise ObservableError(f"{what} {pat!r} (in {spec}) matches nothing; the model has: {shown or 'none'}")
        out += [i for i in hits if i not in out]
    return out


def qpos_labels(mjm, velocity: bool) -> list[str]:
    labels: list[str] = []
    jt = mujoco.mjtJoint
    for j, name in enumerate(_names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt)):
        t = int(mjm.jnt_type[j])
        if t == int(jt.mjJNT_FREE):
            comps = ("vx", "vy", "vz", "wx", "wy", "wz") if velocity else ("x", "y", "z", "qw", "qx", "qy", "qz")
        elif t == int(jt.mjJNT_BALL):
            comps = ("wx", "wy", "wz") if velocity else ("qw", "qx", "qy", "qz")
        else:
            comps = ("",)
        labels += [f"{name}:{c}" if c else name for c in comps]
    return labels


def _columns(sim, spec: Spec, dof_names, adrs) -> tuple[list[int], list[str]]:
    """(source columns, their labels) of one spec."""
    mjm, obj = sim.mjm, mujoco.mjtObj
    if spec.kind == "angles":
        return [int(a) for a in adrs.cpu()], list(dof_names)
    if spec.kind in ("qpos", "qvel"):
        labels = qpos_labels(mjm, spec.kind == "qvel")
        return list(range(len(labels))), labels
    if spec.kind in ("ctrl", "actuator_force"):
        labels = _names(mjm, obj.mjOBJ_ACTUATOR, mjm.nu)
        return list(range(mjm.nu)), labels
    if spec.kind in ("body_pos", "body_quat"):
        _, per, comps = KINDS[spec.kind]
        names = _names(mjm, obj.mjOBJ_BODY, mjm.nbody)
        ids = _match(spec.names, names, "body", spec)
        return [b * per + c for b in ids for c in range(per)], [f"{names[b]}:{c}" for b in ids for c in comps]
    names = _names(mjm, obj.mjOBJ_SENSOR, mjm.nsensor)  # sensor
    ids = _match(spec.names, names, "sensor", spec)
    cols, labels = [], []
    for i in ids:
        adr, dim = int(mjm.sensor_adr[i]), int(mjm.sensor_dim[i])
        cols += range(adr, adr + dim)
        labels += [names[i]] if dim == 1 else [f"{names[i]}:{c}" for c in range(dim)]
    return cols, labels


def _every(spec: Spec, default: int, timestep: float) -> int:
    if spec.hz is not None:
        return max(1, round(1.0 / (spec.hz * timestep)))
    return spec.every if spec.every is not None else default


def resolve(sim, specs, *, dof_names=(), adrs: torch.Tensor | None = None, default_every: int = 1,
            timestep: float | None = None) -> list[Observable]:
    """:class:`Observable` s of ``specs`` (strings or :class:`Spec`) on ``sim``'s worlds.

    ``dof_names``/``adrs``: the motion's DOFs and their qpos addresses (for ``angles``).
    ``timestep``: seconds per recorded step, for rates in Hz (default the sim's).
    Raises ObservableError naming what is unknown and what the model has."""
    out: list[Observable] = []
    for s in specs:
        spec = parse(s) if isinstance(s, str) else s
        if any(o.name == spec.kind for o in out):
            raise ObservableError(f"observable {spec.kind!r} is given twice; record it once (several names: "
                                  f"{spec.kind}:A,B)")
        if spec.kind == "angles" and adrs is None:
            raise ObservableError("'angles' needs the driven joints (a replay's motion DOFs)")
        field = KINDS[spec.kind][0]
        cols, labels = _columns(sim, spec, dof_names, adrs)
        if not cols:
            raise ObservableError(f"observable {spec} has no columns in this model")
        source = sim.view(field)
        source = source.view(source.shape[0], -1)  # [W, nbody, 3] -> [W, nbody * 3], never a copy
        every = _every(spec, default_every, sim.timestep if timestep is None else timestep)
        out.append(Observable(spec.kind, field, source,
                              torch.tensor(cols, dtype=torch.int32, device=source.device), labels, every,
                              str(Spec(spec.kind, spec.names, every))))
    return out
