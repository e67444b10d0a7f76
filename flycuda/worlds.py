"""The worlds by name: one resolver of everything a model brings, and flycuda's defaults,
for ``flycuda replay``, :func:`flycuda.replay.replay`, :func:`flycuda.env.make` and the
playback of a recording alike.

    ws = flycuda.worlds.resolve("neuromechfly", 16)   # FlyGym's fly in 16 worlds, its Spotlight clip
    ws.sim, ws.motion, ws.act_ids, ws.camera, ws.interp, ws.warmup, ws.unit, ws.thorax

A model is a name (:data:`NAMED_MODELS`), an MJCF path or string, a ``mujoco.MjModel``, or
None (the built-in hexapod); a motion is a name (:data:`NAMED_MOTIONS`), an ``.npz``
recording, a :class:`flycuda.sim.Motion`, or None (the model's own recording).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from . import flygym as fg
from .errors import ReplayError
from .flygym.terrain import check_terrain
from .sim.hexapod import fly_model_xml
from .sim.mjwarp import Sim, warp_device_for
from .sim.motion import Motion, load_motion, tripod_gait

__all__ = ["NAMED_MODELS", "NAMED_MOTIONS", "MODELS", "ModelFacts", "Worlds", "resolve", "default_worlds",
           "is_flygym_model", "length_unit", "model_name", "WORLDS_ON_CUDA", "WORLDS_ON_CPU", "WARMUP_SECONDS"]

WORLDS_ON_CUDA = 100
"""Worlds when none are asked for, on a GPU (the CLI and the API alike)."""
WORLDS_ON_CPU = 4
"""Worlds when none are asked for, on the CPU."""
WARMUP_SECONDS = 0.05
"""FlyGym's warm-up before a recording starts: NeuroMechFly settles on the ground."""


@dataclass(frozen=True)
class ModelFacts:
    """What a named model brings by its name: its thorax body (the fly's path), the unit of
    its lengths, whether FlyGym builds it, its own recording and its camera (None: FlyGym's
    tracking camera, named when the fly is built)."""

    thorax: str
    unit: str
    flygym: bool
    motion: str
    camera: str | None


MODELS = {"hexapod": ModelFacts("Thorax", "m", False, "tripod", "track"),
          "neuromechfly": ModelFacts("c_thorax", "mm", True, "spotlight", None),
          "neuromechfly-capsules": ModelFacts("c_thorax", "mm", True, "spotlight", None)}
"""The named models and what each brings by its name (:class:`ModelFacts`)."""
NAMED_MODELS = tuple(MODELS)
"""The models by name: the built-in hexapod and FlyGym's NeuroMechFly (meshes, or capsules)."""
NAMED_MOTIONS = ("tripod", "spotlight")
"""The motions by name: the synthetic tripod gait and FlyGym's Spotlight recording."""
_MISMATCH = {"spotlight": "motion='spotlight' is NeuroMechFly's recording: use it with model='neuromechfly'",
             "tripod": "motion='tripod' drives the built-in hexapod: use model='hexapod' (or a recording named with "
                       "NeuroMechFly's DOFs)"}


def is_flygym_model(model) -> bool:
    """Whether ``model`` names one of FlyGym's NeuroMechFly models (None: the hexapod)."""
    return isinstance(model, str) and model in MODELS and MODELS[model].flygym


def length_unit(model) -> str:
    """The unit of the model's lengths (MuJoCo has none of its own): NeuroMechFly is in mm
    (FlyGym's), the built-in hexapod in m, any other model in its own."""
    return MODELS[model].unit if isinstance(model, str) and model in MODELS else \
        "m" if model is None else "the model's"


def model_name(model) -> str | None:
    """The name a recording keeps so that ``flycuda render`` can build the model again: a
    named model's name, an MJCF file's path, None for what cannot be built again (an MJCF
    string, an MjModel)."""
    if model is None:
        return "hexapod"
    if isinstance(model, (str, os.PathLike)) and not os.fspath(model).lstrip().startswith("<"):
        return os.fspath(model)
    return None


def default_worlds(device=None) -> int:
    """The worlds when none are asked for: :data:`WORLDS_ON_CUDA` on a GPU, :data:`WORLDS_ON_CPU`
    on the CPU; ``device`` None: where :meth:`flycuda.sim.Sim.build` puts them (a GPU that both
    Warp and flycuda can run on, else the CPU)."""
    if device is None:
        device = warp_device_for(None)
    return WORLDS_ON_CUDA if str(device).startswith("cuda") else WORLDS_ON_CPU


@dataclass
class Worlds:
    """``sim.nworld`` worlds of a model and what drives them.

    Attributes:
        sim: the :class:`flycuda.sim.Sim`.
        motion: the recording replayed (the model's own unless another was given).
        motion_name: its name for reports and stores ("spotlight", "tripod", a path, "custom").
        act_ids: int [D] actuator per motion DOF, or None (matched by the DOF names).
        camera: the camera to render from.
        interp: "cubic" for NeuroMechFly's own clip (FlyGym's resampling), else "linear".
        warmup: seconds of settling before a replay (FlyGym's 0.05 s for NeuroMechFly, else 0).
        unit: the unit of the model's lengths. thorax: the fly's thorax body, or None.
        model: the model's name to store (see :func:`model_name`; None for worlds given as
            ``sim`` of an unnamed model). fly: FlyGym's fly, or None.
    """

    sim: Sim
    motion: Motion | None
    motion_name: str
    act_ids: torch.Tensor | None
    camera: str
    interp: str
    warmup: float
    unit: str
    thorax: str | None
    model: str | None
    fly: object = None

    def observables(self, observe=("angles",), *, qpos_every=None, thorax: bool = False) -> list:
        """``observe`` (specs) with what a store of this model gets by default: qpos every
        ``qpos_every`` (steps or "30hz"; None: none), so that ``flycuda render`` can draw it,
        and the fly's thorax path when ``thorax``; neither is added twice."""
        obs = [observe] if isinstance(observe, str) else list(observe)
        kinds = {o.split(":")[0].split("@")[0] for o in obs if isinstance(o, str)}
        if qpos_every is not None and "qpos" not in kinds:
            obs.append(f"qpos@{qpos_every}")
        if thorax and self.thorax is not None and "body_pos" not in kinds:
            obs.append(f"body_pos:{self.thorax}")
        return obs


def resolve(model=None, worlds: int | None = None, *, device=None, motion=None, sim: Sim | None = None,
            act_ids: torch.Tensor | None = None, vision: bool = False, decorate=None, interp: str | None = None,
            warmup: float | None = None, camera: str | None = None, nconmax: int | None = None,
            njmax: int | None = None, check=None, terrain: str = "flat", locomotion: bool = False) -> Worlds:
    """``worlds`` worlds of ``model`` driven by ``motion``, with the model's defaults.

    Args:
        model: a name (:data:`NAMED_MODELS`), an MJCF path or string, a ``mujoco.MjModel``,
            or None (the built-in hexapod).
        worlds: how many (None: :func:`default_worlds`); with ``sim``, its worlds.
        device: "cuda", "cpu" or None (CUDA when flycuda can run there).
        motion: a name (:data:`NAMED_MOTIONS`), an ``.npz`` path, a :class:`Motion`, None
            (the model's own: FlyGym's Spotlight clip, else the tripod gait) or False (none:
            the worlds alone, e.g. to re-pose them from a recording).
        sim: existing worlds (e.g. ``flycuda.flygym.wrap`` of FlyGym's GPUSimulation) instead
            of building ``model``; ``model`` then only names their defaults.
        act_ids: the driven actuators (default: FlyGym's order for NeuroMechFly's own clip,
            else matched by the motion's DOF names).
        vision: build NeuroMechFly with its eye cameras. decorate: a callable given the
            model's ``mujoco.MjSpec`` before it is compiled (a task's objects).
        interp, warmup, camera: the model's defaults unless given.
        nconmax, njmax: MuJoCo Warp's contact and constraint capacities (None: its defaults).
        check: the caller's checks of the motion, ``check(motion, worlds)``: called once, before
            anything is built wherever the motion is known without the model (a file, a
            :class:`Motion`, the tripod gait), else right after the build (FlyGym's clip).
        terrain: FlyGym's world the fly walks on (:data:`flycuda.flygym.TERRAINS`; not "flat":
            NeuroMechFly, built here). locomotion: FlyGym's locomotion fly
            (``make_locomotion_fly``) instead of its GPU tutorial's (NeuroMechFly, built here).

    Raises:
        ReplayError: an unknown model, motion or terrain name, a missing file, a motion that does
            not belong to the model, ``worlds`` that disagree with ``sim``, or a terrain or
            locomotion fly where the model is not NeuroMechFly built here.
    """
    facts = _facts(model)
    nmf = facts is not None and facts.flygym
    _check_fly(terrain, locomotion, nmf and sim is None)
    own, motion_name = _motion_choice(facts, motion)
    known = _known_motion(motion, own, nmf)  # a bad file fails before anything is built
    n = _worlds(worlds, sim, device)
    if check is not None and known is not None:
        check(known, n)
    fly, built = None, sim is None
    if built:
        sim, fly, cam, fg_ids = _build(model, n, device, vision, decorate, nconmax, njmax, terrain, locomotion)
    else:
        cam, fg_ids = facts.camera if facts is not None else "track", None
    motion = known
    if own:
        act_ids = act_ids if act_ids is not None else fg_ids
        if motion is None:  # FlyGym's clip, in the fly's DOF order (worlds given as sim: the tripod gait)
            motion = fg.spotlight(fly) if fly is not None else tripod_gait()
            if check is not None:
                check(motion, sim.nworld)
    return Worlds(sim=sim, motion=motion, motion_name=motion_name, act_ids=act_ids, camera=camera or cam,
                  interp=interp or ("cubic" if nmf and own else "linear"),
                  warmup=warmup if warmup is not None else (WARMUP_SECONDS if nmf else 0.0),
                  unit=length_unit(model), thorax=facts.thorax if facts is not None else None,
                  model=model_name(model) if built or isinstance(model, str) and model in MODELS else None, fly=fly)


def _facts(model) -> ModelFacts | None:
    """A named model's facts (None: the hexapod's), None for a model of one's own; an
    unknown name that is no file is an error."""
    if model is None:
        return MODELS["hexapod"]
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    if isinstance(model, str) and not model.lstrip().startswith("<") and not os.path.isfile(model):
        raise ReplayError(f"model file not found: {model} (or name one of: {', '.join(NAMED_MODELS)})")
    return None


def _motion_choice(facts: ModelFacts | None, motion) -> tuple[bool, str]:
    """(is it the model's own recording, the motion's name); a named motion must be the model's
    (``facts`` None: a model of one's own, whose own recording is the tripod gait)."""
    if isinstance(motion, Motion):
        return False, "custom"
    if motion is False:
        return False, ""
    own = facts.motion if facts is not None else "tripod"
    if motion is None:
        return True, own
    if motion in NAMED_MOTIONS:
        if motion != own:
            raise ReplayError(_MISMATCH[motion])
        return True, motion
    if not os.path.isfile(os.fspath(motion)):
        raise ReplayError(f"motion file not found: {os.fspath(motion)} (or name one of: {', '.join(NAMED_MOTIONS)})")
    return False, os.fspath(motion)


def _known_motion(motion, own: bool, nmf: bool) -> Motion | None:
    """The motion when it is known without the model: a :class:`Motion`, a recording's file, the
    hexapod's own tripod gait; None for FlyGym's clip (it needs the fly) and for no motion."""
    if isinstance(motion, Motion):
        return motion
    if own:
        return None if nmf else tripod_gait()
    return None if motion is False else load_motion(motion)


def _worlds(worlds, sim, device) -> int:
    if sim is not None:
        if worlds is not None and sim.nworld != worlds:
            raise ReplayError(f"sim has {sim.nworld} worlds but worlds={worlds}")
        return sim.nworld
    if worlds is None:
        return default_worlds(device)
    if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0:
        raise ReplayError(f"worlds must be a positive integer, got {worlds!r}")
    return worlds


def _check_fly(terrain: str, locomotion: bool, builds_nmf: bool) -> None:
    """A terrain other than flat, or the locomotion fly, needs NeuroMechFly built here."""
    check_terrain(terrain, ReplayError)
    if (terrain != "flat" or locomotion) and not builds_nmf:
        what = f"terrain={terrain!r}" if terrain != "flat" else "locomotion=True"
        raise ReplayError(f"{what} builds FlyGym's world around NeuroMechFly: use model='neuromechfly' without sim= "
                          "(or build the worlds with flycuda.flygym.Setup(..., terrain=, locomotion=))")


def _build(model, n, device, vision, decorate, nconmax, njmax, terrain="flat", locomotion=False):
    """(sim, FlyGym's fly or None, camera, FlyGym's actuator order or None)."""
    if is_flygym_model(model):
        setup = fg.Setup(model, n, device=device, vision=vision, decorate=decorate, terrain=terrain,
                         locomotion=locomotion)
        return setup.sim, setup.fly, setup.camera, setup.act_ids
    source = None if model in (None, "hexapod") else model
    if decorate is not None:
        import mujoco  # noqa: PLC0415  (only a decorated model needs its spec)

        spec = mujoco.MjSpec.from_string(fly_model_xml()) if source is None else mujoco.MjSpec.from_file(source)
        decorate(spec)
        source = spec.compile()
    return Sim.build(source, n, device=device, nconmax=nconmax, njmax=njmax), None, "track", None
