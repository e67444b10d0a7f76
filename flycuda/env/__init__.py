"""Batched fly environments on the device: a controller in every world.

    import flycuda.env

    env = flycuda.env.make("imitate", worlds=64)          # the hexapod's tripod gait; "walk" too
    obs, info = env.reset(seed=0)
    for _ in range(100):
        actions = obs[:, env.obs_slice("reference")]     # the reference policy (any [W, A] float32 tensor)
        obs, rewards, terminations, truncations, info = env.step(actions)

:func:`make` returns a :class:`FlyVecEnv`, a ``gymnasium.vector.VectorEnv`` whose
arrays are torch tensors on the sim's device (as Isaac Lab's and mjlab's), autoreset
in the same step. Per-world step counters, terminations, observations, actions and
resets are flycuda ops (:mod:`flycuda.ops.episode`), and the whole control step is one
CUDA graph on a GPU. Tasks: :mod:`flycuda.env.tasks`. With ``action="descending"`` a
policy sends the fly's two descending drives and FlyGym's walking controller moves the legs
(:mod:`flycuda.env.descending`).
"""

from __future__ import annotations

import functools
import inspect
import math

import gymnasium
import torch

from ..errors import EnvError
from ..flygym.terrain import TERRAINS, check_terrain
from ..sim.mjwarp import Sim
from ..worlds import NAMED_MODELS, is_flygym_model, resolve
from .core import JITTER_STATES, FlyVecEnv, decimation_of
from .follow import Follow
from .layout import GROUPS
from .odor_draws import AIR_DENSITY, OdorDraws
from .odor_tasks import OdorObstacles, OdorTaxis
from .settle import SETTLE_SECONDS
from .tasks import Approach, Imitate, Task, Walk, body_length

__all__ = ["make", "make_vec", "FlyVecEnv", "TASKS", "Task", "Imitate", "Walk", "Approach", "Follow", "OdorTaxis", "OdorObstacles",
           "GROUPS",
           "ACTIONS", "TERRAINS", "JITTER_STATES", "TERRAIN_JITTER", "OdorDraws", "AIR_DENSITY"]

ACTIONS = ("joints", "descending")
"""What an environment's actions are (``make(..., action=)``): the driven joints' target angles,
or two descending drives per world into FlyGym's hybrid turning controller."""
TERRAIN_JITTER = 0.65
"""mm: the default ``spawn_jitter`` on a terrain (half of a 1.3 mm block)."""
TASKS = {t.name: t for t in (Imitate, Walk, Approach, Follow, OdorTaxis, OdorObstacles)}
"""The tasks by name ("imitate", "walk", "approach", "follow", "odor_taxis", "odor_obstacles"): what ``make``
and ``flycuda/<task>-v0`` accept."""


def make(task: str | Task, worlds: int = 16, *, model: str = "hexapod", device=None, control_dt: float | None = None,
         max_episode_steps: int = 500, vision: str | None = None, seed: int = 0, observe=None, sim: Sim | None = None,
         act_ids: torch.Tensor | None = None, motion=None, check_actions: bool = True, graph: bool | None = None,
         settle: float = SETTLE_SECONDS, copy: bool = False, action: str = "joints", terrain: str = "flat",
         spawn_jitter: float | None = None, connectome=None, **task_options) -> FlyVecEnv:
    """A batched environment of ``worlds`` flies doing ``task``.

    Args:
        task: a task's name (:data:`TASKS`: "imitate", "walk", "approach", "follow", "odor_taxis",
            "odor_obstacles") or a :class:`Task`.
        worlds: how many worlds (ignored when ``sim`` is given: its worlds).
        model: "hexapod" (built in), "neuromechfly" or "neuromechfly-capsules" (FlyGym); with
            ``sim``, the model that sim holds (NeuroMechFly: cubic targets, mm).
        device: "cpu", "cuda" or None (CUDA when flycuda can run there).
        control_dt: seconds per control step, a whole multiple of the timestep (default 10
            physics steps: 5 ms on the hexapod, 1 ms on NeuroMechFly).
        max_episode_steps: control steps before an episode is truncated (0: never).
        vision: None, "exact" or "fast:K": both eyes' readouts join the observations
            (NeuroMechFly; FlyGym's retina).
        seed: the initial states' draws (reset(seed=) changes it).
        observe: observation groups (:data:`GROUPS`), default the task's.
        sim, act_ids, motion: an existing :class:`flycuda.sim.Sim` (e.g. ``flycuda.flygym.wrap``
            of FlyGym's GPUSimulation), its driven actuators and the recording to imitate.
        check_actions: refuse non-finite actions (one host sync per step on CUDA).
        graph: capture the control step into a CUDA graph (default: on CUDA).
        settle: seconds each initial state settles on the ground before it is used, the driven
            joints held at their pose (FlyGym's 0.05 s warm-up; MuJoCo on the host, once per
            model and states: :mod:`flycuda.env.settle`); 0: start from the pose as it is.
        copy: ``step()`` and ``reset()`` return copies instead of the environment's own
            buffers (which the next step refills: a rollout of ``list.append(obs)`` would hold
            the last step W times over). Off by default: a copy per step costs an allocation.
        action: "joints" (the driven joints' target angles, [W, A]) or "descending" (two
            descending drives per world, [W, 2], in [-1, 1]: FlyGym's hybrid turning controller
            walks the fly, run every physics step inside the step: :mod:`flycuda.env.descending`;
            NeuroMechFly only; model="neuromechfly" is then FlyGym's locomotion fly,
            ``make_locomotion_fly``, the one its controllers drive, which has no capsule
            variant). Its observation groups: "drive", "cpg", "corrections".
        terrain: FlyGym's world (:data:`TERRAINS`: "flat", "gapped", "blocks", "mixed";
            NeuroMechFly only), the fly spawned 0.8 mm above its top at the origin
            (:mod:`flycuda.flygym.terrain`: the one change MuJoCo Warp needs).
        spawn_jitter: each initial state's root shifted by up to this much along x and y
            (uniform, the model's length unit) before it settles, so that the worlds start on
            different ground (default: 0 on flat ground, 0.65 mm, half a block, on a terrain);
            at least :data:`JITTER_STATES` initial states then.
        connectome: None, True or a dict of :class:`flycuda.env.connectome.ConnectomeSpec`'s fields:
            flyvis's connectome-constrained network behind both eyes (needs ``vision``), stepped at
            its ``rate`` on each control step's readouts; the observation group "connectome" holds
            the chosen cell types' voltages (default: T4a-d and T5a-d at each eye's central column).
        task_options: the task's own (e.g. ``noise=``, ``init=``, ``sigma=``).

    Raises:
        EnvError: an unknown task, model or observation, or a setting out of range (one line
            naming the valid ones).
    """
    t = _task(task, task_options)
    nmf = is_flygym_model(model)
    if action not in ACTIONS:
        raise EnvError(f"unknown action {action!r}; the actions are: {', '.join(ACTIONS)}")
    if action == "descending" and not nmf:
        raise EnvError(f"action='descending' drives FlyGym's walking controller, which needs NeuroMechFly's legs "
                       f"(model='neuromechfly' or 'neuromechfly-capsules'), got model={model!r}")
    check_terrain(terrain, EnvError)
    if terrain != "flat" and (not nmf or sim is not None):
        raise EnvError(f"terrain={terrain!r} is FlyGym's world around NeuroMechFly: model='neuromechfly' (or "
                       f"'neuromechfly-capsules') without sim=, got model={model!r}"
                       f"{' and sim=' if sim is not None else ''}")
    jitter = (0.0 if terrain == "flat" else TERRAIN_JITTER) if spawn_jitter is None else spawn_jitter
    if not (isinstance(jitter, (int, float)) and 0 <= jitter < math.inf):
        raise EnvError(f"spawn_jitter must be a finite length >= 0, got {spawn_jitter!r}")
    if sim is None:
        if model not in NAMED_MODELS:
            raise EnvError(f"unknown model {model!r}; the models are: {', '.join(NAMED_MODELS)}")
        if not isinstance(worlds, int) or isinstance(worlds, bool) or worlds < 1:
            raise EnvError(f"worlds must be a positive integer, got {worlds!r}")
    length = body_length("mm" if nmf else "m")
    # the model's worlds and its own recording (with sim=: those worlds, the motion as given)
    ws = resolve(model, worlds if sim is None else None, device=device, sim=sim, act_ids=act_ids,
                 motion=motion if motion is not None or sim is None else False, vision=vision is not None,
                 decorate=(lambda spec: t.decorate(spec, length)) if _decorates(t) else None,
                 interp="cubic" if nmf else "linear", terrain=terrain,
                 locomotion=action == "descending" and sim is None and model == "neuromechfly")
    sim, motion, act_ids = ws.sim, ws.motion, ws.act_ids
    if motion is None and t.needs_motion:
        raise EnvError(f"task {t.name!r} imitates a recording: pass motion= with sim=")
    names = motion.dof_names if motion is not None else None
    if act_ids is None:
        if names is None:
            raise EnvError("pass act_ids= (the driven actuators) or motion= (matched by its DOF names)")
        act_ids = sim.actuator_ids(names)
    if names is None:
        names = tuple(f"actuator{int(a)}" for a in act_ids.tolist())
    if not isinstance(max_episode_steps, int) or max_episode_steps < 0:
        raise EnvError(f"max_episode_steps must be an integer >= 0, got {max_episode_steps!r}")
    return FlyVecEnv(t, sim, act_ids, names, motion=motion, interp=ws.interp, frame_mode="clamp" if nmf else "loop",
                     decimation=decimation_of(control_dt, sim.timestep), max_episode_steps=max_episode_steps,
                     observe=observe, vision=vision, seed=seed, check_actions=check_actions,
                     model_unit=ws.unit, graph=graph, settle=settle, copy=copy, action=action,
                     spawn_jitter=float(jitter), terrain=terrain, connectome=connectome)


def _decorates(task: Task) -> bool:
    """Does ``task`` add objects to the model (its own ``decorate``, or bodies to add)?"""
    return type(task).decorate is not Task.decorate or type(task).bodies is not Task.bodies


def _task(task, options) -> Task:
    if isinstance(task, Task):
        if options:
            raise EnvError(f"task options {sorted(options)} go to the task's constructor, not with a Task object")
        return task
    if task not in TASKS:
        raise EnvError(f"unknown task {task!r}; the tasks are: {', '.join(TASKS)}")
    cls = TASKS[task]
    known = _options_of(cls)
    unknown = sorted(set(options) - known)
    if unknown:
        raise EnvError(f"task {task!r} has no option {', '.join(map(repr, unknown))}; its options are: "
                       f"{', '.join(sorted(known))}")
    try:
        return cls(**options)
    except EnvError:
        raise
    except (TypeError, ValueError) as e:  # a value of the wrong kind (wind="fast"): one line, not a traceback
        given = ", ".join(f"{k}={v!r}" for k, v in sorted(options.items()))
        raise EnvError(f"task {task!r} cannot take {given}: {e}") from None


def _options_of(cls) -> set[str]:
    """The keyword options a task class takes (its own and its bases')."""
    names = set()
    for c in cls.__mro__:
        init = c.__dict__.get("__init__")
        if init is not None:
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind == p.KEYWORD_ONLY}
    return names


def make_vec(task: str, num_envs: int = 16, **kwargs) -> FlyVecEnv:
    """``gymnasium.make_vec("flycuda/<task>-v0", num_envs=N, ...)``'s entry point: :func:`make`
    with ``worlds=num_envs`` (every other keyword is make's)."""
    return make(task, num_envs, **kwargs)


def _register() -> None:
    """Registers ``flycuda/<task>-v0`` for every task of :data:`TASKS` with
    gymnasium (vector entry points: one FlyVecEnv of ``num_envs`` worlds, on import of flycuda.env)."""
    for name in TASKS:
        env_id = f"flycuda/{name}-v0"
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, vector_entry_point=functools.partial(make_vec, name))


_register()
