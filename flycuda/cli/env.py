"""``flycuda env TASK``: a policy in every world of a batched environment (flycuda.env),
its observations, actions and rewards streamed into a store, a report of what happened."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os

import torch
from tqdm import tqdm

from ..env import ACTIONS, TASKS, TERRAINS, body_length, make
from ..errors import EnvError, RecordingError
from ..recording import LoopRecorder
from ..recording.observables import Observable, resolve
from ..recording.recorder import CHUNK_BYTES
from ..render.frames import VIDEO_FPS
from ..replay.playback import render_recording
from ..replay.snapshot import remove_snapshots, snapshot_dir
from ..sim import preempt
from ..vision.stage import readouts_observable
from ..worlds import NAMED_MODELS
from .args import add_store_options, positive_float, positive_int, resumed_args, size, task_option
from .rollout import RandomPolicy, Rollout, fingerprint, resume_point

__all__ = ["add_parser", "run", "load_policy"]


def add_parser(sub) -> None:
    """The ``env`` subcommand's options."""
    e = sub.add_parser("env", help="run a policy in every world of a batched fly environment (flycuda.env)",
                       description="Runs a policy in N worlds of a flycuda.env task (gymnasium's vector API, every "
                                   "world's control step on the device) and prints what happened.")
    e.add_argument("task", nargs="?", choices=list(TASKS), help="the task (flycuda.env.tasks)")
    e.add_argument("--worlds", type=positive_int, default=16, help="number of worlds (default 16)")
    e.add_argument("--policy", default="random",
                   help="random (uniform in the action space: the actuators' ranges, or their joints' where an "
                        "actuator has none, as NeuroMechFly's), reference (the recording's pose: imitate) or "
                        "PATH.py defining policy(obs, env) -> actions [W, A] (or make_policy(env) returning one)")
    e.add_argument("--duration", type=positive_float, default=0.25, help="simulated seconds (default 0.25)")
    e.add_argument("--model", choices=list(NAMED_MODELS), default=None,
                   help="the fly (default: neuromechfly for approach and follow, which need its eyes; hexapod otherwise)")
    e.add_argument("--device", choices=["cuda", "cpu"], default=None)
    e.add_argument("--control-dt", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds per control step (a whole number of physics steps; default 10 of them)")
    e.add_argument("--max-episode-steps", type=int, default=500, metavar="N",
                   help="control steps before an episode is truncated (0: never; default 500)")
    e.add_argument("--vision", default=None, metavar="MODE",
                   help="exact, fast or fast:K (the replay's grammar, without a rate: the eyes are read every "
                        "control step): the eyes join the observations (default fast:2 for approach and follow on "
                        "neuromechfly)")
    e.add_argument("--connectome", nargs="?", const="central", choices=["central", "all"], default=None,
                   help="flyvis's connectome network behind the eyes (needs --vision; its default cell types, T4a-d "
                        "and T5a-d, at each eye's central column or all columns; 500 Hz: --control-dt 0.002 on "
                        "neuromechfly); the installed flyvis wheel's connectome or $FLYCUDA_CONNECTOME")
    e.add_argument("--connectome-checkpoint", default=None, metavar="PATH",
                   help="a flyvis checkpoint for --connectome (default: the connectome's initial parameters)")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--task-option", type=task_option, action="append", default=[], metavar="NAME=VALUE",
                   help="one of the task's options, e.g. wind=(200,400) or field=advection_diffusion (repeatable; "
                        "the task's docstring lists them)")
    e.add_argument("--action", choices=list(ACTIONS), default="joints",
                   help="joints (the driven joints' targets, default) or descending (two drives per world into "
                        "FlyGym's hybrid turning controller; neuromechfly)")
    e.add_argument("--terrain", choices=list(TERRAINS), default="flat",
                   help="FlyGym's world the flies walk on (not flat: neuromechfly; each world's spawn jittered)")
    add_store_options(e, "a zarr store: observations, actions, rewards and the episode flags every control step; "
                        "qpos (the task's objects too; and with --vision the eyes' readouts) at 30 Hz")
    e.add_argument("--chunk-kib", type=positive_int, default=CHUNK_BYTES // 1024, metavar="KIB",
                   help="about this many KiB of each stored array a chunk (default 16384); into a .zarr path a "
                        "snapshot follows each chunk of observations (--resume goes on from the latest)")
    e.add_argument("--render", default=None, metavar="OUT.mp4",
                   help="a mosaic video of the worlds (rendered afterwards from --record, re-posing the named "
                        "model with the task's own objects, approach's pillar, follow's target; with --vision each "
                        "world's eyes under its tile)")
    e.add_argument("--render-size", type=size, default=(160, 120), metavar="WxH",
                   help="--render's tile size (default 160x120)")
    e.add_argument("--render-worlds", default="0:16", metavar="SPEC",
                   help="--render's worlds, e.g. 0:16 (default), 3,5,8")
    e.add_argument("--camera", default=None, help="--render's camera (default: the model's tracking camera)")
    e.add_argument("--json", default=None, metavar="OUT.json", help="the report's figures as JSON")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--resume", default=None, metavar="STORE.zarr",
                   help="go on with an interrupted or preempted --record run from its latest snapshot, into its "
                        "store, bit for bit as if it had never stopped: its settings are the command line it was "
                        "started with (the store keeps it); give no task and no other option but --no-progress")
    e.set_defaults(run=run)


def _env_parser() -> argparse.ArgumentParser:
    """A parser of ``env``'s options alone (``flycuda.cli.main`` holds every subcommand's)."""
    p = argparse.ArgumentParser(prog="flycuda")
    add_parser(p.add_subparsers(dest="command", required=True))
    return p


def load_policy(spec: str, env):
    """A callable ``policy(obs) -> actions`` from a CLI ``--policy`` value."""
    if spec == "random":  # the actuators' ranges, or the drives' [-1, 1]
        return RandomPolicy(env)
    if spec == "reference":
        cols = env.obs_slice("reference") if env.observes("reference") else None
        if cols is None:
            raise EnvError(f"--policy reference needs the task's reference observation (imitate), not "
                           f"{env.task.name!r}")
        return lambda obs: obs[:, cols]
    if not spec.endswith(".py") or not os.path.isfile(spec):
        raise EnvError(f"--policy must be random, reference or an existing PATH.py, got {spec!r}")
    mod_spec = importlib.util.spec_from_file_location("flycuda_user_policy", spec)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    if hasattr(mod, "make_policy"):
        return mod.make_policy(env)
    if hasattr(mod, "policy"):
        return lambda obs: mod.policy(obs, env)
    raise EnvError(f"{spec} defines neither policy(obs, env) nor make_policy(env)")


def _recorder(env, args, steps: int, target=None, resume: dict | None = None):
    W = env.num_envs
    every = max(1, round(1.0 / (VIDEO_FPS * env.control_dt)))
    own = [Observable("obs", "env", env.obs, _ids(len(env.obs_names), env), list(env.obs_names), 1,
                      attrs={"units": list(env.obs_units)}),
           Observable("action", "env", env.actions, _ids(env.actions.shape[1], env), _action_names(env), 1,
                      attrs={"units": _action_units(env)}),
           Observable("reward", "env", env.rewards.view(W, 1), _ids(1, env), ["reward"], 1,
                      attrs={"units": [env.task.reward_unit]}),
           Observable("episode", "env", env.status, _ids(3, env), ["terminated", "truncated", "overflow"], 1,
                      attrs={"units": ["flag", "flag", "MuJoCo Warp's overflow bits (flycuda.sim.mjwarp.OVERFLOW_BITS)"]})]
    if env.vision is not None:  # the eyes at the video's rate: flycuda render draws them under each world
        own.append(readouts_observable(env.vision, every, f"vision:{args.vision}"))
    qpos = resolve(env.sim, [f"qpos@{every}"], timestep=env.control_dt)[0]  # the task's objects too
    bodies = env.task.bodies(body_length(env.model_unit))  # stored: flycuda render draws them again
    return LoopRecorder(env.sim, [qpos] + own, target or args.record, steps=steps, model=args.model,
                        overwrite=args.overwrite, timestep=env.control_dt, chunk_bytes=args.chunk_kib * 1024,
                        facts={"task": env.task.name, "bodies": bodies}, resume=resume)


def _ids(n: int, env) -> torch.Tensor:
    return torch.arange(n, dtype=torch.int32, device=env.device)


# A task's defaults where the command line leaves them open: approach and follow are seen with the eyes.
TASK_DEFAULTS = {t: {"model": "neuromechfly", "vision": "fast:2"} for t in ("approach", "follow")}


def _action_names(env) -> list[str]:
    return ["drive:left", "drive:right"] if env.descending is not None else list(env.layout.names)


def _action_units(env) -> list[str]:
    return ["1 (descending drive)"] * 2 if env.descending is not None else ["rad"] * env.actions.shape[1]


def _settings(args):
    """The command line's checks and a task's defaults (``args`` completed in place)."""
    if args.resume is not None:
        args = resumed_args(args, _env_parser(), "env", EnvError)
        resumable_store(args.resume)
        args.record = args.resume
    if args.task is None:
        raise EnvError(f"give the task (one of {', '.join(TASKS)}), or --resume STORE.zarr")
    if args.render and not args.record:
        raise EnvError("--render draws the stored run: add --record OUT.zarr")
    suffix = os.path.splitext(args.record.rstrip("/"))[1] if args.record else ""
    if suffix and suffix != ".zarr":
        raise EnvError(f"--record writes a zarr store (a folder), not a {suffix} file: name it OUT.zarr, got "
                       f"{args.record}")
    clash = sorted(set(dict(args.task_option)) & set(inspect.signature(make).parameters))
    if clash:
        raise EnvError(f"--task-option {clash[0]} is an option of every task: use --{clash[0].replace('_', '-')}")
    defaults = TASK_DEFAULTS.get(args.task, {})
    if args.model is None:
        args.model = defaults.get("model", "hexapod")
        if args.vision is None and args.model == defaults.get("model"):
            args.vision = defaults.get("vision")
    if args.connectome_checkpoint and not args.connectome:
        raise EnvError("--connectome-checkpoint is the network's: add --connectome")
    return args


def resumable_store(path: str) -> None:
    """Refuses (one line) a store that a resume cannot go on with."""
    from ..recording.runs import resumable  # noqa: PLC0415  (zarr: only stores need it)

    try:
        resumable(path)
    except RecordingError as e:
        raise EnvError(str(e)) from None


def run(args) -> int:
    """``flycuda env TASK ...`` (or ``flycuda env --resume STORE``)."""
    args = _settings(args)
    connectome = dict(columns=args.connectome, checkpoint=args.connectome_checkpoint) if args.connectome else None
    env = make(args.task, args.worlds, model=args.model, device=args.device, control_dt=args.control_dt,
               max_episode_steps=args.max_episode_steps, vision=args.vision, seed=args.seed, action=args.action,
               terrain=args.terrain, connectome=connectome, **dict(args.task_option))
    policy = load_policy(args.policy, env)
    steps = max(1, round(args.duration / env.control_dt))
    obs, _ = env.reset(seed=args.seed)
    keeps = bool(args.record) and args.record.rstrip("/").endswith(".zarr")  # snapshots, a clean stop, --resume
    fp = fingerprint(args, env, steps) if keeps else None
    rollout, point = Rollout(env, policy, obs, steps, snapshot_dir(args.record) if keeps else None, fp), None
    if args.resume is not None:  # everything checked and restored before the store is touched
        target, point = resume_point(args.resume, fp)
        rollout.restore(point.state)
        rollout.record(_recorder(env, args, steps, target, point.state["recorder"]))
    elif args.record:
        rollout.record(_recorder(env, args, steps))
    rec = rollout.rec
    bar = tqdm(total=steps, initial=rollout.k, unit="step", desc=f"{args.task} x {env.num_envs} worlds",
               leave=False, disable=args.no_progress)
    try:
        with preempt.preemptible(keeps):
            first, wall = rollout.run(bar)
    except BaseException as e:
        if rec is not None:
            rec.abort(f"{type(e).__name__}: {e}")
        raise
    finally:
        bar.close()
    if rec is not None:
        rec.close()
        if keeps:
            remove_snapshots(args.record)  # the run is complete: nothing left to resume
    ran = steps - (point.step if point is not None else 0)
    figures = dict(task=args.task, model=args.model, policy=args.policy, vision=args.vision or "none",
                   worlds=env.num_envs, device=str(env.device),
                   control_dt=env.control_dt, control_steps=steps, first_step_s=first,
                   env_steps_per_s=env.num_envs * max(ran - 1, 1) / wall,
                   mean_reward=float(rollout.total) / (env.num_envs * steps), terminations=int(rollout.ended[0]),
                   truncations=int(rollout.ended[1]), overflows=int(rollout.ended[2]),
                   nonfinite=int(env.nonfinite_episodes.sum()), terrain=args.terrain, wall_s=wall,
                   captured=env.captured, resumed_from=point.step if point is not None else None,
                   snapshots=dict(taken=rollout.taken, state_bytes=rollout.bytes, seconds=rollout.seconds))
    _report(figures, args)
    if args.render:
        res = render_recording(args.record, args.render, worlds=args.render_worlds, camera=args.camera,
                               size=args.render_size, progress=not args.no_progress, device=args.device)
        print(f"  wrote          {args.render} ({res.frames} frames x {res.worlds} worlds)")
    return 0


def _report(f: dict, args) -> None:
    ground = "" if f["terrain"] == "flat" else f" on {f['terrain']} terrain"
    print(f"flycuda env {f['task']}: {f['worlds']} worlds of {f['model']}{ground} on {f['device']}, "
          f"{f['control_steps']} control steps of {f['control_dt'] * 1e3:g} ms")
    if f["resumed_from"] is not None:
        print(f"  resumed        from its snapshot at step {f['resumed_from']:,}")
    print(f"  policy         {f['policy']}; vision {f['vision']}")
    print(f"  env steps/s    {f['env_steps_per_s']:,.0f} (worlds x control steps per wall second, after the "
          f"first step: {f['first_step_s']:.1f} s with Warp's JIT)")
    if f["device"].startswith("cuda") and not f["captured"]:
        print("  graph          none: the control step ran eagerly (its CUDA-graph capture failed, warned of above); "
              "env steps/s is the eager rate")
    print(f"  mean reward    {f['mean_reward']:.4f} per world and step")
    print(f"  episodes ended {f['terminations']} terminated, {f['truncations']} truncated")
    if f["overflows"]:
        print(f"  overflow       {f['overflows']} of the truncations: MuJoCo Warp dropped constraint rows or "
              "contacts in that episode (the store's episode/overflow column holds its bits: flycuda.sim.mjwarp."
              "OVERFLOW_BITS); raise njmax/nconmax")
    if f["nonfinite"]:
        print(f"  non-finite     {f['nonfinite']} of the terminations: the world's physics went NaN or infinite "
              "(ended and reset; nothing of it reached an observation or reward)")
    if args.record:
        print(f"  wrote          {args.record}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(f, fh, indent=1)
