"""The batched fly environment: every world's control step on the device.

One control step (:meth:`FlyVecEnv.step`) is, for all worlds at once::

    scatter_actions (actions -> ctrl)  ->  n x mjw.step  ->  episode_step (counters, ends)
    -> observe (motion_at, gather_columns[, the eyes])  ->  task.reward  ->  done = ended
    -> final_obs = obs  ->  [if a world ended: mjw.reset_data(reset=done)  ->  reset_worlds(done)  ->  observe]

On CUDA it is captured once into a CUDA graph (after one eager step: Warp compiles its
kernels on first use) and each later step is one graph launch on torch's current stream:
no allocation and, with ``check_actions=False``, no host sync. The reset path runs only in
the steps where a world ended (:attr:`FlyVecEnv.reset_branch`): in the graph it is a
conditional node that the device decides at each launch. On the CPU the same code runs
eagerly on Warp's CPU device. Every returned tensor is a buffer of the environment,
refilled in place by the next call: ``clone()`` what you keep.
"""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .. import ops
from ..errors import CaptureAllocationError, CaptureError, ConditionalCaptureError, EnvError, VisionError
from ..sim import streams
from ..sim.mjwarp import DROPPED_BITS
from ..vision.spec import parse_vision
from .connectome import ConnectomeSpec, ConnectomeStage, column_names
from .descending import DRIVE_BOUND, Descending
from .layout import DESCENDING_GROUPS, ODOR_SENSOR_NAMES, ODOR_START, SOURCES, FlyLayout, columns_of, own_slice, unit_of
from .nonfinite import NonFinite, rows_nonfinite
from .settle import SETTLE_SECONDS, settle
from .smell import Smell
from .state import env_state, load_env_state

__all__ = ["FlyVecEnv", "JITTER_STATES"]

JITTER_STATES = 16
"""With a ``spawn_jitter``, at least this many initial states (spawns) for the worlds to draw from."""


RESET_BRANCHES = ("host", "device", "always")


def reset_branch_for(device: torch.device, wp_device) -> str:
    """:attr:`FlyVecEnv.reset_branch` for worlds on ``device``: ``"host"`` on the CPU; on CUDA
    ``"device"`` where a graph can branch (:func:`flycuda.sim.streams.device_branches`), else
    ``"always"``."""
    if device.type != "cuda":
        return "host"
    return "device" if streams.device_branches(wp_device) else "always"


class FlyVecEnv(VectorEnv):
    """A gymnasium vector environment of ``sim.nworld`` flies (see :func:`flycuda.env.make`).

    Observations, rewards, terminations and truncations are torch tensors on the sim's
    device ([W, O] float32, [W] float32, [W] bool, [W] bool). Autoreset is
    ``AutoresetMode.SAME_STEP``: a world whose episode ended in a step is reset inside it;
    the step returns its new episode's first observation, and ``info["final_obs"]`` [W, O]
    holds the last observation of every world's episode in the rows ``info["_final_obs"]``
    marks. ``obs_names`` names every observation column and ``obs_units`` gives its unit.

    ``info["overflow"]`` [W] int32 holds MuJoCo Warp's overflow bits of each world's episode so
    far (:data:`flycuda.sim.mjwarp.OVERFLOW_BITS`): a step that had to drop constraint rows or
    contacts (:data:`~flycuda.sim.mjwarp.DROPPED_BITS`, marked in ``info["_overflow"]``) ends its
    world as truncated, since its state is no longer MuJoCo's (nor a terminal state of the
    task). ``info["nonfinite_action"]`` [W] bool marks the worlds given a non-finite action
    (let through by ``check_actions=False``), which end too. ``info["nonfinite_state"]`` [W] bool
    marks the worlds whose physics went non-finite: they end, and no NaN of theirs reaches an
    observation or reward (:mod:`flycuda.env.nonfinite`; ``nonfinite_episodes`` [W] counts them).
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task, sim, act_ids: torch.Tensor, names, *, motion=None, interp: str = "linear",
                 frame_mode: str = "loop", decimation: int = 1, max_episode_steps: int = 1000, observe=None,
                 vision: str | None = None, seed: int = 0, check_actions: bool = True, model_unit: str = "m",
                 graph: bool | None = None, settle: float = SETTLE_SECONDS, copy: bool = False,
                 action: str = "joints", spawn_jitter: float = 0.0, terrain: str = "flat", connectome=None):
        self.task, self.sim, self.motion, self.frame_mode = task, sim, motion, frame_mode
        self.num_envs, self.device, self.model_unit = sim.nworld, sim.device, model_unit
        self.decimation, self.max_episode_steps, self.seed_value = decimation, max_episode_steps, int(seed)
        self.check_actions, self.copy = check_actions, bool(copy)
        if not (settle >= 0 and math.isfinite(settle)):
            raise EnvError(f"settle must be a finite number of seconds >= 0, got {settle!r}")
        self.settle_seconds = float(settle)
        self.spawn_jitter, self.terrain = float(spawn_jitter), terrain
        self.layout = FlyLayout.of(sim, act_ids.to(sim.device), names)
        W, A, dev = self.num_envs, len(names), self.device
        self.vision = self._make_vision(vision)
        self.action_kind = action
        self.descending = Descending(sim, int(seed)) if action == "descending" else None
        observe = (observe,) if isinstance(observe, str) else observe  # one group by its name
        spec = ConnectomeSpec.of(connectome) if connectome else None
        groups = tuple(observe) if observe is not None else task.observe + (("vision",) if vision else ()) + \
            (("connectome",) if spec else ())
        self.connectome_names = tuple(column_names(spec, 721)) if spec else ()
        # the odor at the sensors, [k, 4] per world, is read only where it is observed
        self.odor_dims = len(task.odor_peaks[0]) if task.odor_peaks and "odor" in groups else 0
        self._buffers(W, 2 if self.descending is not None else A, dev, motion, interp)
        self.connectome = self._connectome(spec)
        if "vision" in groups and self.vision is None:
            raise EnvError("observation 'vision' needs vision='exact' or 'fast:K' (and a fly with eyes)")
        if ("reference" in groups or "phase" in groups or task.needs_motion) and motion is None:
            raise EnvError(f"task {task.name!r} and observations 'reference'/'phase' need a recording (motion=)")
        if self.descending is None and set(groups) & set(DESCENDING_GROUPS):
            raise EnvError(f"observations {', '.join(map(repr, DESCENDING_GROUPS))} are the walking controller's: "
                           "make(..., action='descending')")
        self.obs_names, table, self._groups = columns_of(self.layout, groups, self._num_ommatidia(), self.odor_dims,
                                                         self.connectome_names)
        self.obs_units = [unit_of(n, model_unit) for n in self.obs_names]
        self._columns = table.to(dev)
        self._angle_columns = columns_of(self.layout, ("joints",))[1].to(dev)
        self.obs = torch.zeros(W, len(self.obs_names), device=dev)
        self.final_obs = torch.zeros_like(self.obs)
        self._forces = "forces" in groups  # (sensordata needs nothing: MuJoCo Warp's reset zeroes it)
        self.nonfinite = NonFinite(W, sim.mjm.nq, sim.mjm.nv, self.obs)
        self.nonfinite_episodes = self.nonfinite.episodes
        self._init_states()
        task.setup(self)
        self._spaces(W, A)
        if graph and dev.type != "cuda":
            raise EnvError(f"graph=True needs a CUDA device; the worlds are on {dev}")
        self._graph, self._use_graph = None, (dev.type == "cuda") if graph is None else bool(graph)
        self._reset_branch = reset_branch_for(dev, self.sim.wp_device)  # (reset_branch says what it is)
        self._wp_streams: dict = {}
        self._steps_run = 0

    # -- set-up ------------------------------------------------------------------------------
    def _make_vision(self, vision):
        if vision is None:
            return None
        try:  # the replay's grammar (flycuda.vision.spec): exact, fast, fast:K
            spec = parse_vision(vision)
        except VisionError as e:
            raise EnvError(f"vision must be None or a spec such as 'exact', 'fast' or 'fast:4' ({e})") from None
        if spec.every is not None or spec.hz is not None:
            raise EnvError(f"vision={vision!r}: an environment reads the eyes at every control step "
                           f"({self.sim.timestep * self.decimation:g} s); a rate (@...) is the replay's: drop it")
        from ..vision import Vision  # noqa: PLC0415  (the renderer loads only when eyes are asked for)

        try:
            return Vision(self.sim, mode=spec.mode, k=spec.k)
        except VisionError as e:
            raise EnvError(f"vision={vision!r}: {e}") from None

    def _connectome(self, spec):
        """flyvis's network behind the eyes (flycuda.env.connectome), writing after the odor columns."""
        if spec is None:
            return None
        start, K = ODOR_START + len(ODOR_SENSOR_NAMES) * self.odor_dims, len(self.connectome_names)
        return ConnectomeStage(self, spec, self.own[:, start:start + K].view(self.num_envs, 2, K // 2))

    def _num_ommatidia(self) -> int:
        return self.vision.map.num_ommatidia if self.vision is not None else 0

    def _buffers(self, W, A, dev, motion, interp) -> None:
        self.actions = torch.zeros(W, A, device=dev)
        self.rewards = torch.zeros(W, device=dev)
        self.terminated, self.truncated, self.done = (torch.zeros(W, dtype=torch.bool, device=dev) for _ in range(3))
        # MuJoCo Warp's overflow bits of the step (Sim.view("overflow")): a world whose step had to
        # drop constraint rows or contacts (DROPPED_BITS) ends, truncated, and says so in info["overflow"].
        self.overflow = torch.zeros(W, dtype=torch.int32, device=dev)
        self.overflowed = torch.zeros(W, dtype=torch.bool, device=dev)
        self._dropped = torch.zeros(W, dtype=torch.int32, device=dev)
        # worlds given a non-finite action (check_actions=False lets it through: scatter_actions
        # applies the range's low end): ended, info["nonfinite_action"]
        self.nonfinite_action = torch.zeros(W, dtype=torch.bool, device=dev)
        self._act_tmp, self._act_bad = torch.zeros(W, A, device=dev), torch.zeros(W, A, dtype=torch.bool, device=dev)
        # [W, 3] float32 for a store: terminated, truncated, overflow bits (flycuda env --record)
        self.status = torch.zeros(W, 3, device=dev)
        self._any = torch.zeros((), dtype=torch.bool, device=dev)
        self._reset_flag = torch.zeros(1, dtype=torch.int32, device=dev)  # any(done) as reset_branch "device" reads it
        self.world_steps = torch.zeros(W, dtype=torch.int64, device=dev)
        self.episodes = torch.zeros(W, dtype=torch.int64, device=dev)
        self.offsets = torch.zeros(W, dtype=torch.float64, device=dev)
        self.reference = torch.zeros(W, len(self.layout.names), device=dev)
        self.angles = torch.zeros(W, len(self.layout.names), device=dev)
        # the environment's own observation columns (layout.OWN_COLUMNS): phase, drives, controller
        # and a task's odor at the sensors [k, 4] after them (flycuda.env.smell)
        self.own = torch.zeros(W, ODOR_START + len(ODOR_SENSOR_NAMES) * self.odor_dims + len(self.connectome_names),
                               device=dev)
        self.phase = self.own[:, own_slice("phase")]
        self.smell = None
        if self.odor_dims:
            odor = self.own[:, ODOR_START:].view(W, self.odor_dims, len(ODOR_SENSOR_NAMES))
            self.smell = Smell(self.sim, out=odor, **self.task.odor(self))
        self._phase64 = torch.zeros(W, dtype=torch.float64, device=dev)
        self.frames = None
        if motion is not None:
            if motion.angles.dim() != 2 and motion.angles.shape[0] != 1:
                raise EnvError("the environment's recording must be one clip [T, D] shared by every world")
            self.frames = (motion.spline() if interp == "cubic" else motion.as_buffer()).to(dev)
            # frames per control step: fps x (timestep x n), which for n = 1 is the replay's fps x timestep
            self.frames_per_step = motion.fps * (self.sim.timestep * self.decimation)
        lo, hi = self.layout.ctrl_range
        self.action_map = ops.action_map(1.0, 0.0, lo, hi, device=dev)
        import warp as wp  # noqa: PLC0415  (loaded with the sim)

        self._done_wp = wp.from_torch(self.done, dtype=wp.bool)
        views = [self.sim.view(f) for f in ("qpos", "qvel", "ctrl")]
        vis = self.vision.readouts.view(W, -1) if self.vision is not None else torch.zeros(W, 1, device=dev)
        sensors = self.sim.view("sensordata")
        sensors = sensors if sensors.shape[1] > 0 else torch.zeros(W, 1, device=dev)
        self._sources = views + [self.reference, self.own, self.sim.view("actuator_force"), vis, sensors]
        assert len(self._sources) == len(SOURCES)

    def _init_states(self) -> None:
        """The task's K initial states, settled on the ground (:func:`flycuda.env.settle.settle`:
        ``settle_seconds`` of physics with the driven joints held at their pose), and their noise."""
        frames = self.task.init_frames(self)
        if self.spawn_jitter > 0 and frames.shape[0] < JITTER_STATES:  # enough spawns to differ between worlds
            frames = frames.repeat(-(-JITTER_STATES // frames.shape[0]))[:JITTER_STATES]
        qpos, qvel = self.task.initial_states(self, frames)
        self._jitter(qpos)
        if self.settle_seconds > 0:
            lay, lo_hi = self.layout, [x.cpu() for x in self.layout.ctrl_range]
            ctrl = self.sim.view("ctrl")[0].cpu().repeat(qpos.shape[0], 1)  # the others' controls as they are
            ctrl[:, lay.act_ids.long().cpu()] = torch.clamp(qpos[:, list(lay.qpos_adrs)], *lo_hi)  # the pose held
            qpos, qvel = settle(self.sim.mjm, qpos, qvel, ctrl, self.settle_seconds)
        qpos, qvel = self.task.settled(self, frames, qpos, qvel)  # objects placed around the fly as it starts
        qn, vn = self.task.noise_scales(self)
        dev = self.device
        self._init = [qpos.to(dev), qvel.to(dev), frames.to(dev), qn.to(dev), vn.to(dev)]
        rules = self.task.rules(self, start_height=float(qpos[0, self.layout.root_adr + 2]))
        self._rules = dict(root_adr=self.layout.root_adr, max_steps=self.max_episode_steps, **rules)

    def _jitter(self, qpos: torch.Tensor) -> None:
        """Each initial state's root moved by up to ``spawn_jitter`` along x and y (uniform; its
        own draw from the environment's seed), before it settles."""
        if self.spawn_jitter > 0:
            g = torch.Generator().manual_seed(self.seed_value)
            shift = (torch.rand(qpos.shape[0], 2, generator=g, dtype=torch.float64) * 2 - 1) * self.spawn_jitter
            adr = self.layout.root_adr
            qpos[:, adr:adr + 2] += shift.float()

    def _spaces(self, W, A) -> None:
        lo, hi = (x.cpu().numpy().astype(np.float32) for x in self.layout.action_bounds)
        if self.descending is not None:  # two drives (left, right)
            lo, hi, A = np.full(2, -DRIVE_BOUND, np.float32), np.full(2, DRIVE_BOUND, np.float32), 2
        O = len(self.obs_names)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (O,), np.float32)
        self.single_action_space = gym.spaces.Box(lo, hi, (A,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, W)
        self.action_space = batch_space(self.single_action_space, W)

    # -- the device step -----------------------------------------------------------------------
    def _observe(self, reset: torch.Tensor | None = None, advance: bool = True) -> None:
        """Reference, phase, eyes, then every observation column (all worlds). ``reset``: bool
        [W], after a reset: the eyes redraw only those worlds (the others have not moved).
        ``advance``: the eyes' network steps through the control step (not after a reset)."""
        if self.frames is not None:
            ops.motion_at(self.frames, self.world_steps, self.reference, offsets=self.offsets,
                          frames_per_step=self.frames_per_step, mode=self.frame_mode)
            T = float(self.motion.num_frames)
            p = self._phase64.copy_(self.world_steps).mul_(self.frames_per_step).add_(self.offsets)
            p.remainder_(T) if self.frame_mode == "loop" else p.clamp_(0.0, T - 1.0)
            self.phase[:, 0].copy_(p.div_(T))
        if self.vision is not None:
            self.sim.kinematics()
            self.vision.update(only=reset)
        if self.connectome is not None:
            self.connectome.observe(advance=advance and reset is None)
        if self.smell is not None:
            self.smell.observe(kinematics=self.vision is None)
        if self.descending is not None:
            self.descending.observe(self.own)
        ops.gather_columns(self._sources, self._angle_columns, self.angles)
        ops.gather_columns(self._sources, self._columns, self.obs)
        self.task.measure(self)

    def _reset_done(self) -> None:
        """A new episode in every world marked in ``done`` (MuJoCo Warp's reset, then ours)."""
        self.sim.reset(self._done_wp)
        qpos, qvel = self.sim.view("qpos"), self.sim.view("qvel")
        ops.reset_worlds(self.done, *self._init, self.seed_value, qpos, qvel, self.world_steps, self.episodes,
                         self.offsets)
        self.task.on_reset(self, self.done)
        if self.descending is not None:
            self.descending.reset(self.done)
        if self.connectome is not None:
            self.connectome.reset(self.done)
        if self._forces:
            self.sim.view("actuator_force").masked_fill_(self.done.unsqueeze(1), 0.0)

    def _end_overflowed(self) -> None:
        """Truncates every world whose physics overflowed MuJoCo Warp's buffers in this episode
        (constraint rows or contacts were dropped: its state is not MuJoCo's, and not a terminal
        state of the task either), and terminates every world that was given a non-finite
        action, on the device."""
        self.overflow.copy_(self.sim.view("overflow"))
        torch.bitwise_and(self.overflow, DROPPED_BITS, out=self._dropped)
        torch.ne(self._dropped, 0, out=self.overflowed)
        self.truncated.logical_or_(self.overflowed)
        rows_nonfinite(self.actions, self._act_tmp, self._act_bad, self.nonfinite_action)
        self.terminated.logical_or_(self.nonfinite_action)
        for i, flag in enumerate((self.terminated, self.truncated, self.overflow)):
            self.status[:, i].copy_(flag)

    def _advance(self) -> None:
        """One control step of every world (capturable: in-place ops on fixed buffers)."""
        self.task.move(self)  # a task's moving objects (Follow's target), before the physics
        if self.descending is not None:  # the walking controller sets ctrl before every physics step
            for _ in range(self.decimation):
                self.descending.act(self.actions)
                self.sim.step()
                self.descending.sense()
        else:
            ops.scatter_actions(self.actions, self.layout.act_ids, self.action_map, self.sim.view("ctrl"))
            for _ in range(self.decimation):
                self.sim.step()
        ops.episode_step(self.world_steps, self.sim.view("qpos"), self.sim.view("qvel"), self.terminated,
                         self.truncated, **self._rules)
        self._end_overflowed()
        self.nonfinite.check(self.sim.view("qpos"), self.sim.view("qvel"), self.obs)
        self._observe()
        self.nonfinite.observed(self.obs, self.terminated)
        self.status[:, 0].copy_(self.terminated)  # (a world ended by its observation too)
        self.task.reward(self)
        self.nonfinite.mask(self.obs, self.rewards, self.task.info(), self.task.nonfinite_reward)
        torch.logical_or(self.terminated, self.truncated, out=self.done)
        self.final_obs.copy_(self.obs)
        if self._reset_branch == "device" and (self.device.type == "cpu" or streams.capturing(self.device)):
            torch.any(self.done, out=self._any)
            self._reset_flag.copy_(self._any)
            streams.run_if(self._reset_flag, self._reset_ended)
        elif self._reset_branch != "host" or bool(torch.any(self.done, out=self._any)):
            self._reset_ended()  # ("device" outside a capture on CUDA: as "always", no host sync; and the
            # eager step before the capture makes what the path allocates on first use, outside it)

    def _reset_ended(self) -> None:
        """The reset path: a new episode in the ended worlds, and their second observation."""
        self._reset_done()
        self._observe(reset=self.done)

    # -- gymnasium's API ----------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Starts a new episode in every world; returns ``(obs, info)`` (buffers: see :meth:`step`).

        ``seed`` fixes the initial states' draws (with it, the same sequence of actions gives
        the same run); without one, each reset draws new initial states. ``options={"start_frames": [W]}`` starts world w at frame
        ``start_frames[w]`` of the recording, without noise (as a replay's offsets)."""
        if seed is not None:
            self.seed_value = int(seed)
            self.action_space.seed(int(seed))
            self._graph = None  # the seed is part of the captured reset
            self.episodes.zero_()  # a seed restarts the draws; without one each reset draws anew
            self.nonfinite.episodes.zero_()
            if self.descending is not None:
                self.descending.reseed(int(seed))
        with self._on_torch_stream():
            self.done.fill_(True)
            self._reset_done()
            if options and "start_frames" in options:
                self._start_at(options["start_frames"])
            self.world_steps.zero_()
            for flags in (self.terminated, self.truncated, self.done, self.overflow, self.overflowed,
                          self.nonfinite_action, self.nonfinite.state, self.status):
                flags.zero_()
            self._observe(advance=False)
            if self.connectome is not None and self.connectome.begin():  # 1.x's fade-in on the first frame
                self._observe(advance=False)
        if self.copy:
            return self.obs.clone(), {k: v.clone() for k, v in self.task.info().items()}
        return self.obs, dict(self.task.info())

    def reset_worlds(self, mask) -> torch.Tensor:
        """Starts a new episode now in the worlds ``mask`` marks (bool [W]; the others are
        untouched) and returns ``obs``. (``step`` resets ended worlds by itself.)"""
        m = torch.as_tensor(mask, device=self.device).reshape(-1)
        if m.dtype != torch.bool or m.shape[0] != self.num_envs:
            raise EnvError(f"mask must be bool [{self.num_envs}], got {m.dtype} {list(m.shape)}")
        with self._on_torch_stream():
            self.done.copy_(m)
            self._reset_done()
            self._observe(advance=False)
        return self.obs

    def _start_at(self, start_frames) -> None:
        f = torch.as_tensor(start_frames, dtype=torch.float64).reshape(-1).cpu()
        if f.shape[0] != self.num_envs or not torch.isfinite(f).all():
            raise EnvError(f"options['start_frames'] must be {self.num_envs} finite frame positions, got "
                           f"{tuple(f.shape)}")
        qpos, qvel = self.task.initial_states(self, f)
        self.sim.view("qpos").copy_(qpos.to(self.device))
        self.sim.view("qvel").copy_(qvel.to(self.device))
        self.offsets.copy_(f.to(self.device))
        self.task.on_reset(self, self.done)  # the same draws, on these states

    def step(self, actions: torch.Tensor):
        """One control step of every world: ``(obs, rewards, terminations, truncations, info)``,
        the environment's own buffers, refilled by the next step (``clone()`` what you keep, or
        ``make(..., copy=True)``).

        ``actions``: float32 [W, A] on the environment's device (the driven joints' target
        angles in rad; clamped to the actuators' ranges; with ``action="descending"`` [W, 2]:
        each world's left and right descending drives, which FlyGym's hybrid turning
        controller turns into joint targets and adhesion every physics step), or a numpy array (as
        ``action_space.sample()`` gives; copied to the device); another floating type (float64, as
        gymnasium users often hold) is cast to float32. Checked before anything runs:
        shape, dtype, device and, with ``check_actions`` (the default), that every entry is
        finite (on CUDA one host sync; with it off a non-finite action is applied as the
        range's low end and ends its world: ``info["nonfinite_action"]``)."""
        actions = self._check(actions)
        self.actions.copy_(actions.detach())  # a policy's autograd history stays out of the env's buffer
        with self._on_torch_stream():  # the graph, or the eager step, after the copy on torch's stream
            if self._graph is not None:
                self._launch()
            else:
                self._advance()
        if self._graph is None and self._use_graph:
            try:
                self._capture()
            except Exception as e:  # the step above has run: return it, and go on eagerly
                self._use_graph = False  # warned once: later steps run eagerly, not capture and fail again
                ours = isinstance(e, (CaptureAllocationError, CaptureError))
                warnings.warn(f"flycuda.env: the CUDA-graph capture of the control step failed ({type(e).__name__}: "
                              f"{e}){'; a flycuda bug, please report it' if ours else ''}; this step ran eagerly "
                              "before the capture and its results stand, and later steps run eagerly (slower)",
                              RuntimeWarning, stacklevel=2)
        self._steps_run += 1
        if self.copy:
            info = {k: v.clone() for k, v in self._info().items()}
            return self.obs.clone(), self.rewards.clone(), self.terminated.clone(), self.truncated.clone(), info
        return self.obs, self.rewards, self.terminated, self.truncated, self._info()

    def state_dict(self) -> dict:
        """Everything the next step depends on (physics, counters, episode draws, controllers,
        the eyes' network, the scene, the action spaces' generators), on the host: a training
        checkpoint resumes bit for bit with :meth:`load_state_dict` (:mod:`flycuda.env.state`)."""
        return env_state(self)

    def load_state_dict(self, state: dict) -> None:
        """The environment as :meth:`state_dict` found it (same task, worlds and model; refused
        in one line otherwise, with nothing changed). In place: a captured step stays valid."""
        load_env_state(self, state)

    def _info(self) -> dict:
        return {"final_obs": self.final_obs, "_final_obs": self.done, "overflow": self.overflow,
                "_overflow": self.overflowed, "nonfinite_action": self.nonfinite_action,
                "nonfinite_state": self.nonfinite.state, **self.task.info()}

    def _on_torch_stream(self):
        """Warp's stream bound to torch's current one for a step's eager parts and the graph
        launch (:func:`flycuda.sim.streams.warp_on_torch_stream`)."""
        return streams.warp_on_torch_stream(self.sim.wp_device, self._wp_streams)

    def _capture(self) -> None:
        """Captures :meth:`_advance` into a CUDA graph (after its first eager run). A reset path
        that cannot be a conditional node falls back, with a warning, to running every step."""
        with streams.shared_stream(self.device):
            try:
                self._graph = streams.capture_graph(self._advance, self.sim.wp_device)
            except ConditionalCaptureError as e:
                self._no_device_branch(e)
                self._graph = streams.capture_graph(self._advance, self.sim.wp_device)
        self._launched = False

    def _launch(self) -> None:
        """The captured step. Its first launch instantiates the graph: a conditional node CUDA
        refuses only then (nothing ran) falls back as in :meth:`_capture`, and the step runs eagerly."""
        try:
            streams.launch_graph(self._graph)
        except RuntimeError as e:
            if self._launched or self._reset_branch != "device" or isinstance(e, CaptureError):
                raise
            self._no_device_branch(e)
            self._graph = None  # captured again after this step
            self._advance()
        self._launched = True

    def _no_device_branch(self, e: Exception) -> None:
        warnings.warn(f"flycuda.env: the reset path could not be a conditional graph node ({e}); it runs in every "
                      "step instead (the same results, slower)", RuntimeWarning, stacklevel=4)
        self._reset_branch = "always"

    @property
    def reset_branch(self) -> str:
        """Where the step decides to run the reset path (MuJoCo Warp's reset, the episode draws,
        the second observation): ``"host"`` (the CPU: a host branch on any(done)), ``"device"``
        (CUDA: a conditional node of the captured graph, Warp's ``capture_if``, CUDA 12.4+ toolkit
        and driver; an eager CUDA step runs the path, masked, with no sync) or ``"always"``
        (CUDA without conditional nodes, or a conditional node CUDA refused: every step, masked
        to the ended worlds). The three give the same bits. Settable (tests, bench_env): the
        captured step is made again."""
        return self._reset_branch

    @reset_branch.setter
    def reset_branch(self, value: str) -> None:
        if value not in RESET_BRANCHES:
            raise EnvError(f"reset_branch must be one of {', '.join(RESET_BRANCHES)}, got {value!r}")
        if value == "host" and self.device.type == "cuda":
            raise EnvError("reset_branch 'host' cannot be captured into a CUDA graph: use 'device' or 'always'")
        self._reset_branch, self._graph = value, None

    def _check(self, actions) -> torch.Tensor:
        W, A = self.actions.shape
        if isinstance(actions, np.ndarray) and np.issubdtype(actions.dtype, np.floating):  # gymnasium's samples
            actions = torch.from_numpy(actions).to(self.device)
        if not isinstance(actions, torch.Tensor):
            raise EnvError(f"actions must be a torch tensor float32 [{W}, {A}] on {self.device}, got "
                           f"{type(actions).__name__}")
        if tuple(actions.shape) != (W, A) or not actions.dtype.is_floating_point or actions.device != self.device:
            raise EnvError(f"actions must be float32 [{W}, {A}] on {self.device} (another floating type is cast), "
                           f"got {actions.dtype} {list(actions.shape)} on {actions.device}")
        if self.check_actions and not bool(torch.isfinite(actions).all()):
            bad = (~torch.isfinite(actions)).any(dim=1).nonzero().flatten().tolist()
            raise EnvError(f"actions hold non-finite values (worlds {bad[:10]}{' ...' if len(bad) > 10 else ''}); "
                           f"nothing was stepped")
        return actions

    def close(self, **kwargs) -> None:
        """Drops the captured graph (the worlds stay usable through ``sim``)."""
        self._graph = None

    def observes(self, group: str) -> bool:
        """Does ``obs`` hold observation group ``group``?"""
        return group in self._groups

    def obs_slice(self, group: str) -> slice:
        """The columns of observation group ``group`` in ``obs`` (e.g. ``obs[:, env.obs_slice("reference")]``)."""
        if group not in self._groups:
            raise EnvError(f"this environment observes no {group!r}; it observes: {', '.join(self._groups)}")
        return self._groups[group]

    @property
    def captured(self) -> bool:
        """Whether the control step runs as one CUDA graph now (False: eagerly, on the CPU, before
        the first step, with ``graph=False``, or after a capture that failed and was warned of)."""
        return self._graph is not None

    @property
    def control_dt(self) -> float:
        """Seconds of simulated time per control step."""
        return self.sim.timestep * self.decimation

    def __repr__(self) -> str:
        return (f"FlyVecEnv(task={self.task.name!r}, worlds={self.num_envs}, device={self.device}, "
                f"obs={len(self.obs_names)}, actions={self.actions.shape[1]}, control_dt={self.control_dt:g} s"
                f"{'' if self.terrain == 'flat' else f', terrain={self.terrain!r}'})")


def decimation_of(control_dt: float | None, timestep: float) -> int:
    """Physics steps per control step for ``control_dt`` seconds (a whole multiple of the
    timestep; None: 10 steps)."""
    if control_dt is None:
        return 10
    n = control_dt / timestep
    if not (math.isfinite(n) and n >= 1 and abs(n - round(n)) < 1e-6):
        raise EnvError(f"control_dt must be a whole multiple of the timestep ({timestep:g} s), got {control_dt!r}")
    return int(round(n))
