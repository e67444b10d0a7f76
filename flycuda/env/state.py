"""A training checkpoint of the environment: :meth:`FlyVecEnv.state_dict` and
:meth:`FlyVecEnv.load_state_dict`, and the wrappers' (their running statistics on top).

What it holds, so that a run resumed from it steps bit for bit as one never stopped:

* ``sim``: MuJoCo Warp's carried Data fields (:meth:`flycuda.sim.Sim.carried_state`);
* ``tensors``: every tensor the environment holds and writes, found by walking its attributes
  through flycuda's own objects (the task, the layout, the walking controllers, the eyes, the
  network, the odor scene, the non-finite guard, ...) by path, e.g. ``task.target_pos``: the
  counters, episode draws, observations, controller phases, network voltages, and the views of
  MuJoCo Warp's derived fields it reads (sensors, forces), copied back last;
* ``scalars``: the Python numbers among them; those that are state (:data:`STATE_SCALARS`: the
  seed, the steps run) are set back, the others are settings the fingerprint holds equal;
* ``rng``: the action spaces' NumPy generators (``action_space.sample()``);
* ``fingerprint``: what the state only fits (flycuda, MuJoCo Warp, device kind, task, worlds,
  the model's sizes, the observation columns); :meth:`FlyVecEnv.load_state_dict` refuses another's.

Constant tables that construction rebuilds the same (the motion, the initial states, the
renderer's scene, the network's weights: :data:`CONSTANT`) are left out. Loading copies in
place, so a captured CUDA graph stays valid. The dict holds host tensors and plain Python:
``torch.save`` it with a policy's, ``torch.load(..., weights_only=True)`` reads it back.
"""

from __future__ import annotations

import dataclasses

import torch

from ..errors import EnvError

__all__ = ["FORMAT", "CONSTANT", "STATE_SCALARS", "device_name", "env_state", "load_env_state", "walk", "check_walked", "load_walked", "host_copies", "fingerprint"]

FORMAT = "flycuda.env_state/1"
# attributes holding tables built at construction and never written after (left out)
CONSTANT = frozenset({"sim", "frames", "_init", "_columns", "_angle_columns", "action_map", "renderer", "scene",
                      "rowptr", "src", "weight", "bias", "tau", "_connectome", "_params", "steady", "nodes", "order",
                      "retina", "spline", "layout", "env", "_graph", "_wp_streams", "_done_wp",
                      "_all", "_skip", "_full",  # (the eyes' masks and scratch, made on first use)
                      "_launched"})  # (whether the captured step has been launched once)
# the Python numbers that are state (the others are settings, held equal by the fingerprint)
STATE_SCALARS = frozenset({"seed_value", "_steps_run", "_begun", "seed"})
_SCALARS = (bool, int, float)


def _ours(obj) -> bool:
    return type(obj).__module__.startswith("flycuda.")


def walk(obj, skip=CONSTANT) -> tuple[dict, dict]:
    """``(tensors, scalars)`` reachable from ``obj``'s attributes through flycuda's objects,
    lists, tuples and dicts, by dotted path (each tensor object once, at its first path)."""
    tensors, scalars, seen = {}, {}, set()

    def visit(value, path: str, depth: int, mutable: bool = True) -> None:
        if isinstance(value, torch.Tensor):
            if id(value) not in seen:
                seen.add(id(value))
                tensors[path] = value
        elif isinstance(value, _SCALARS) and path:
            if mutable:  # a frozen dataclass's numbers are settings, not state
                scalars[path] = value
        elif depth < 8 and isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                visit(v, f"{path}.{i}", depth + 1, mutable and isinstance(value, list))
        elif depth < 8 and isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str):
                    visit(v, f"{path}.{k}", depth + 1, mutable)
        elif depth < 8 and _ours(value) and id(value) not in seen and hasattr(value, "__dict__"):
            seen.add(id(value))
            frozen = dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen
            for k, v in sorted(vars(value).items()):
                if k not in skip:
                    visit(v, f"{path}.{k}" if path else k, depth + 1, mutable and not frozen)

    visit(obj, "", 0)
    return tensors, scalars


def check_walked(obj, tensors: dict, what: str, skip=CONSTANT) -> tuple[dict, dict]:
    """``obj``'s own tensors and numbers (:func:`walk`), once its tensors hold the paths,
    shapes and dtypes of ``tensors`` (one line naming the first difference)."""
    live, live_scalars = walk(obj, skip)
    missing, extra = sorted(set(live) - set(tensors)), sorted(set(tensors) - set(live))
    if missing or extra:
        raise EnvError(f"{what}: the state does not fit: it lacks {missing[:3]} and has {extra[:3]} beyond "
                       "this environment's (another task, observation or action?)")
    for path, value in tensors.items():
        t = live[path]
        if tuple(t.shape) != tuple(value.shape) or t.dtype != value.dtype:
            raise EnvError(f"{what}: the state's {path} is {value.dtype} {tuple(value.shape)}, this "
                           f"environment's {t.dtype} {tuple(t.shape)}")
    return live, live_scalars


def load_walked(obj, tensors: dict, scalars: dict, what: str, skip=CONSTANT) -> None:
    """Copies ``tensors`` into ``obj``'s own (in place: captured graphs stay valid) and sets
    ``scalars``, once :func:`check_walked` passes (nothing changes otherwise)."""
    live, live_scalars = check_walked(obj, tensors, what, skip)
    for path, value in tensors.items():
        live[path].copy_(value)
    for path, value in scalars.items():
        if path in live_scalars and path.rsplit(".", 1)[-1] in STATE_SCALARS:
            _set(obj, path, value)


def _set(obj, path: str, value) -> None:
    *parents, name = path.split(".")
    for p in parents:
        obj = obj[int(p)] if isinstance(obj, (list, tuple)) else obj[p] if isinstance(obj, dict) else getattr(obj, p)
    if isinstance(obj, dict):
        obj[name] = value
    elif not isinstance(obj, (list, tuple)):
        setattr(obj, name, value)


def host_copies(tensors: dict) -> dict:
    """Detached host copies of ``tensors`` (a dict of them)."""
    return {k: v.detach().cpu().clone() for k, v in tensors.items()}


def fingerprint(env) -> dict:
    """What an environment's state fits only."""
    from ..recording.store import versions  # noqa: PLC0415

    v = versions()
    return {"flycuda": v.get("flycuda"), "mujoco_warp": v.get("mujoco-warp"), "warp": v.get("warp-lang"),
            "device": device_name(env.device), "task": type(env.task).__name__, "worlds": env.num_envs,
            "nq": int(env.sim.mjm.nq), "nv": int(env.sim.mjm.nv), "nu": int(env.sim.mjm.nu),
            "action": env.action_kind, "decimation": env.decimation, "max_episode_steps": env.max_episode_steps,
            "obs_names": list(env.obs_names)}


def device_name(device: torch.device) -> str:
    """"cpu", or the GPU's name (MuJoCo Warp's kernels group work by the GPU's SM count)."""
    return "cpu" if device.type != "cuda" else f"cuda: {torch.cuda.get_device_name(device)}"


def env_state(env) -> dict:
    """:meth:`FlyVecEnv.state_dict`: see the module's text."""
    with env._on_torch_stream():
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        tensors, scalars = walk(env)
        return {"format": FORMAT, "fingerprint": fingerprint(env), "sim": env.sim.carried_state(),
                "tensors": host_copies(tensors), "scalars": scalars,
                "rng": {name: getattr(env, name).np_random.bit_generator.state
                        for name in ("action_space", "single_action_space")}}


def load_env_state(env, state: dict) -> None:
    """:meth:`FlyVecEnv.load_state_dict`: see the module's text."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise EnvError(f"state_dict: expected a {FORMAT!r} state (FlyVecEnv.state_dict()), got {got!r}")
    mine = fingerprint(env)
    for key, value in mine.items():
        if state["fingerprint"].get(key) != value:
            shown = "other columns" if key == "obs_names" else repr(state["fingerprint"].get(key))
            raise EnvError(f"state_dict: the state is of {key}={shown}, this environment's is "
                           f"{'its own' if key == 'obs_names' else repr(value)}")
    check_walked(env, state["tensors"], "state_dict")  # before anything changes
    with env._on_torch_stream():
        env.sim.load_carried_state(state["sim"])
        load_walked(env, state["tensors"], state["scalars"], "state_dict")  # the derived fields' views last
    for name, rng in state.get("rng", {}).items():
        getattr(env, name).np_random.bit_generator.state = rng
