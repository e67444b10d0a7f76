"""The tasks of :mod:`flycuda.env`: what a world starts from, what it observes by
default, when it falls, and its reward, each written in its docstring.

A task's :meth:`Task.reward` writes ``env.rewards`` in place with torch's in-place
and ``out=`` ops on buffers it allocates in :meth:`Task.setup` (no allocation, no
host sync), so it is captured into the environment's CUDA graph with the rest of a
step. Units are the model's (hexapod: m; NeuroMechFly: mm), angles in rad.
"""

from __future__ import annotations

import math

import mujoco
import torch

from ..errors import EnvError
from ..ops import motion_at
from ..sim.bodies import add_bodies

__all__ = ["Task", "Imitate", "Walk", "Approach", "body_length"]


def body_length(model_unit: str) -> float:
    """The fly's body length in the model's unit: NeuroMechFly 2.5 mm, the hexapod 0.06 m."""
    return 2.5 if model_unit == "mm" else 0.06


def heading_into(quat, hx: torch.Tensor, hy: torch.Tensor) -> None:
    """The body's heading (its x axis in the floor plane, not normalized) into ``hx``, ``hy``
    [W], from its quaternion views ``quat`` = (w, x, y, z) [W] each; in place (capturable)."""
    qw, qx, qy, qz = quat
    hx.copy_(qy).mul_(qy).addcmul_(qz, qz).mul_(-2.0).add_(1.0)
    hy.copy_(qx).mul_(qy).addcmul_(qw, qz).mul_(2.0)


def arrangement_frames(env, K: int) -> torch.Tensor:
    """float64 [K]: the recording frames of K initial states, evenly spread (zeros without one)."""
    if env.motion is None:
        return torch.zeros(K, dtype=torch.float64)
    return torch.floor(torch.arange(K, dtype=torch.float64) * (env.motion.num_frames / K))


def spread_bearings(K: int, spread: float) -> torch.Tensor:
    """float64 [K]: K turns (rad) in [-spread, spread], golden-ratio spaced."""
    return spread * (2 * torch.frac(torch.arange(K, dtype=torch.float64) * 0.6180339887498949 + 0.5) - 1)


def yaw_of(qpos: torch.Tensor, root: int) -> torch.Tensor:
    """float64 [K]: the heading (rad about z) of the root's quaternion ``qpos[:, root+3:root+7]``."""
    q = qpos[:, root + 3:root + 7].double()
    return torch.atan2(2 * (q[:, 0] * q[:, 3] + q[:, 1] * q[:, 2]), 1 - 2 * (q[:, 2] ** 2 + q[:, 3] ** 2))


def slide_joints(body: str, damping: float = 1.0) -> list[dict]:
    """The two slide joints (x, y; named ``<body>_x``, ``<body>_y``) that let a reset place a
    task's object in the floor plane (:func:`flycuda.sim.bodies.add_bodies`' description;
    ``damping`` 0: an object the task moves keeps the velocity it is given)."""
    return [{"name": f"{body}_{c}", "type": "slide", "axis": axis, "damping": float(damping)}
            for c, axis in (("x", [1.0, 0.0, 0.0]), ("y", [0.0, 1.0, 0.0]))]


def slide_adrs(env, body: str, missing: str, of: str = "qpos") -> tuple[int, int]:
    """The qpos (``of="qpos"``) or qvel (``of="qvel"``) addresses of ``body``'s
    :func:`slide_joints` in ``env``'s model.

    Raises:
        EnvError: ``missing`` (what to do), when the model lacks them.
    """
    mjm = env.sim.mjm
    ids = [mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, f"{body}_{c}") for c in "xy"]
    if min(ids) < 0:
        raise EnvError(missing)
    adr = mjm.jnt_qposadr if of == "qpos" else mjm.jnt_dofadr
    return int(adr[ids[0]]), int(adr[ids[1]])


class Task:
    """The parts of an environment a task decides. Subclasses set ``name`` and
    ``observe`` (the default observation groups, :data:`flycuda.env.layout.GROUPS`)."""

    name = ""
    observe: tuple[str, ...] = ()
    needs_motion = False
    reward_unit = "1"  # what one unit of reward is (stored with recorded rewards)
    nonfinite_reward = 0.0  # a world's reward in the step its physics went non-finite (flycuda.env.nonfinite)
    odor_peaks: list | None = None  # [n][k]: a task with odor sources (its odor(env) says where they are)

    def __init__(self, *, init: str = "reference", noise: float = 0.02, min_up: float = 0.0,
                 height_range: tuple[float, float] = (0.3, 3.0)):
        if init not in ("reference", "default"):
            raise EnvError(f"init must be 'reference' (poses of the recording at random phases) or 'default' "
                           f"(the model's qpos0), got {init!r}")
        if not (noise >= 0 and math.isfinite(noise)):
            raise EnvError(f"noise must be a finite number >= 0 (rad), got {noise!r}")
        lo, hi = height_range
        if not (0 <= lo < hi):
            raise EnvError(f"height_range must be (low, high) fractions of the start height, 0 <= low < high, "
                           f"got {height_range!r}")
        self.init, self.noise, self.min_up, self.height_range = init, float(noise), float(min_up), (lo, hi)

    # -- the start of an episode -------------------------------------------------------
    def init_frames(self, env) -> torch.Tensor:
        """float64 [K]: the recording frames the K initial states are taken at."""
        if self.init == "default" or env.motion is None:
            return torch.zeros(1, dtype=torch.float64)
        T = env.motion.num_frames
        K = min(T, 64)
        return torch.floor(torch.arange(K, dtype=torch.float64) * (T / K))

    def initial_states(self, env, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(qpos [K, nq], qvel [K, nv]) float32 of the states that start at ``frames``: the
        model's qpos0 with, for ``init="reference"``, the driven joints at the recording's
        pose there (motion_at: the same values the reference observation shows)."""
        K, mjm, lay = frames.shape[0], env.sim.mjm, env.layout
        qpos = torch.as_tensor(mjm.qpos0, dtype=torch.float32).repeat(K, 1)
        qvel = torch.zeros(K, mjm.nv, dtype=torch.float32)
        if self.init == "reference" and env.motion is not None:
            pose = torch.empty(K, len(lay.names), dtype=torch.float32)
            motion_at(env.frames.cpu(), torch.zeros(K, dtype=torch.int64), pose, offsets=frames.clone(),
                      mode=env.frame_mode)  # the recording is shared by all worlds: [1, T, ...]
            qpos[:, lay.qpos_adrs] = pose
        return qpos, qvel

    def settled(self, env, frames: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The initial states after the fly's spawn jitter and settling (flycuda.env.settle; with
        ``settle=0`` as jittered): a task whose objects are placed relative to the fly places them
        again here. Most tasks keep them."""
        return qpos, qvel

    def on_reset(self, env, done: torch.Tensor) -> None:
        """After the worlds ``done`` marks (bool [W]) got their initial states, on the device
        (captured with the step): a task draws the rest of their scene here. Most tasks have none."""

    def move(self, env) -> None:
        """Before each control step's physics, on the device (captured with the step): a task
        moves its objects here (:class:`flycuda.env.follow.Follow`'s target). Most tasks have none."""

    def noise_scales(self, env) -> tuple[torch.Tensor, torch.Tensor]:
        """(qpos_noise [nq], qvel_noise [nv]): ``noise`` rad on the driven joints' angles,
        10x that in rad/s on their velocities, nothing on the root."""
        qn = torch.zeros(env.sim.mjm.nq, dtype=torch.float32)
        vn = torch.zeros(env.sim.mjm.nv, dtype=torch.float32)
        qn[env.layout.qpos_adrs] = self.noise
        vn[env.layout.dof_adrs] = 10 * self.noise
        return qn, vn

    def bodies(self, length: float) -> list[dict]:
        """The task's objects (:func:`flycuda.sim.bodies.add_bodies`' descriptions; ``length``:
        the fly's body length in the model's unit). Most tasks have none."""
        return []

    def decorate(self, spec, length: float) -> None:
        """Adds the task's objects (:meth:`bodies`) to the model's ``mujoco.MjSpec`` before it
        is compiled."""
        add_bodies(spec, self.bodies(length))

    def rules(self, env, start_height: float) -> dict:
        """episode_step's pose rules: the root between ``height_range`` times its start
        height, its up axis' z at least ``min_up`` (0: not past 90 degrees of tilt)."""
        lo, hi = self.height_range
        return dict(min_height=lo * start_height, max_height=hi * start_height, min_up=self.min_up)

    # -- the reward ------------------------------------------------------------------------
    def setup(self, env) -> None:
        """Allocates the reward's buffers (once)."""

    def measure(self, env) -> None:
        """Refreshes :meth:`info`'s buffers from the state (after every observation, resets
        included; in place, captured with the step). Most tasks measure nothing."""

    def info(self) -> dict:
        """The task's success measures, [W] tensors refilled in place, named in its docstring
        (``step()`` and ``reset()`` put them in ``info``)."""
        return {}

    def reward(self, env) -> None:  # pragma: no cover - every task defines it
        raise NotImplementedError


class Imitate(Task):
    """Follow the recording (FlyGym's Spotlight clip, or the hexapod's tripod gait) from
    random phases.

    Each world starts at one of 64 phases of the recording (its joints at the recorded
    pose, plus ``noise``), and its reference runs on from there at its own step counter.
    Reward per control step::

        r = exp(-mean_d (q_d - ref_d)^2 / sigma^2)          (sigma = 0.3 rad)

    with q the driven joints' angles after the step and ref the recording at the world's
    step: 1 for perfect tracking, ~0.37 at a 0.3 rad RMS error. The action is the target
    angles (rad, clamped to the actuators' ranges); the reference observation is the
    action that follows the recording.
    """

    name = "imitate"
    observe = ("joints", "joint_vel", "thorax_height", "thorax_quat", "thorax_vel", "reference", "phase")
    needs_motion = True

    def __init__(self, *, sigma: float = 0.3, **kw):
        super().__init__(**kw)
        if not (sigma > 0 and math.isfinite(sigma)):
            raise EnvError(f"sigma must be > 0 rad, got {sigma!r}")
        self.sigma = float(sigma)

    def setup(self, env) -> None:
        self._err = torch.empty_like(env.reference)

    def reward(self, env) -> None:
        torch.sub(env.angles, env.reference, out=self._err)
        self._err.square_()
        torch.mean(self._err, 1, out=env.rewards)
        env.rewards.mul_(-1.0 / self.sigma ** 2).exp_()


class Walk(Task):
    """Walk forward, along the body's own heading.

    Reward per control step::

        r = v_forward / L  -  c_energy * mean_a(target_a^2)  -  c_fall * terminated  +  alive

    with v_forward the root's horizontal velocity along its heading (its x axis projected
    on the floor), L the body length (hexapod 0.06 m, NeuroMechFly 2.5 mm: body lengths per
    second), target the joint targets the step applied (the actions clamped to the actuators'
    ranges, as the controls hold them: an action of 1e6 costs what the range's end costs),
    c_energy = 0.05 /rad^2, c_fall = 10, alive = 0.1. The terms are in ``info`` after each
    step (as Isaac Lab and mjlab log theirs): ``reward/forward``, ``reward/energy`` and
    ``reward/fall`` [W], signed as they enter r (r = their sum + alive). A world whose physics
    went non-finite gets r = -c_fall and its terms 0 (:mod:`flycuda.env.nonfinite`).
    """

    name = "walk"
    reward_unit = "body lengths/s"
    observe = ("joints", "joint_vel", "thorax_height", "thorax_quat", "thorax_vel", "action")

    def __init__(self, *, body_length: float | None = None, c_energy: float = 0.05, c_fall: float = 10.0,
                 alive: float = 0.1, init: str = "reference", **kw):
        super().__init__(init=init, **kw)
        self.body_length, self.c_energy, self.c_fall, self.alive = body_length, c_energy, c_fall, alive
        self.nonfinite_reward = -c_fall  # blowing the physics up costs what a fall costs

    def setup(self, env) -> None:
        W, dev = env.num_envs, env.device
        self.L = self.body_length or body_length(env.model_unit)
        self._t = [torch.empty(W, device=dev) for _ in range(3)]
        self._terms = {f"reward/{k}": torch.zeros(W, device=dev) for k in ("forward", "energy", "fall")}
        self._sq = torch.empty(W, len(env.layout.act_ids), device=dev)  # the driven joints (not the drives)
        q, v, lay = env.sim.view("qpos"), env.sim.view("qvel"), env.layout
        self._q = [q[:, lay.root_adr + 3 + i] for i in range(4)]  # the thorax's quaternion (w, x, y, z)
        self._vx, self._vy = v[:, lay.root_dof], v[:, lay.root_dof + 1]

    def reward(self, env) -> None:
        fx, fy, norm = self._t
        forward, energy, fall = self._terms.values()
        heading_into(self._q, fx, fy)
        norm.copy_(fx).mul_(fx).addcmul_(fy, fy).add_(1e-12).sqrt_()
        forward.copy_(self._vx).mul_(fx).addcmul_(self._vy, fy).div_(norm).mul_(1.0 / self.L)
        torch.index_select(env.sim.view("ctrl"), 1, env.layout.act_ids, out=self._sq)  # the applied targets
        self._sq.square_()
        torch.mean(self._sq, 1, out=energy).mul_(-self.c_energy)
        fall.copy_(env.terminated).mul_(-self.c_fall)
        env.rewards.copy_(forward).add_(energy).add_(fall).add_(self.alive)

    def info(self) -> dict:
        return dict(self._terms)


class Approach(Task):
    """Walk to a dark pillar placed at a random bearing around each world's fly.

    At every reset the pillar stands ``distance`` body lengths from the fly's start, at one of
    ``bearings`` evenly spread bearings (plus ``jitter`` body lengths of noise), and the fly's
    legs start at a random phase of the recording (the gait a controller can steer). The
    pillar (a cylinder ``radius`` x ``height`` body lengths, on two slide joints so that its
    place is part of qpos, which the reset writes) does not collide. Reward per control step::

        r = (v_xy . u) / L        u: the unit vector from the thorax to the pillar, in the floor plane

    the closing speed in body lengths per second. Observations: the gait's (``reference``,
    ``phase``) and, with ``vision=``, both eyes' readouts, which see the pillar.

    Success measures (``info``, after every step and reset): ``distance`` [W], the thorax's
    distance to the pillar's axis in body lengths (in the floor plane), and ``bearing`` [W],
    the pillar's direction from the fly's heading in rad ([-pi, pi), positive to the left); for a
    world reset in the step, its new episode's (as its observation).
    """

    name = "approach"
    reward_unit = "body lengths/s"
    observe = ("joints", "joint_vel", "thorax_height", "thorax_quat", "thorax_vel", "reference", "phase")
    needs_motion = True

    def __init__(self, *, distance: float = 4.0, radius: float = 0.4, height: float = 6.0, bearings: int = 32,
                 jitter: float = 0.2, **kw):
        super().__init__(**kw)
        if not (distance > radius > 0 and height > 0 and isinstance(bearings, int) and bearings >= 1 and jitter >= 0):
            raise EnvError(f"{self.name} needs distance > radius > 0, height > 0, bearings >= 1 and jitter >= 0 (body "
                           f"lengths), got distance={distance}, radius={radius}, height={height}, bearings={bearings}, "
                           f"jitter={jitter}")
        self.distance_start, self.radius, self.height = float(distance), radius, height
        self.bearings, self.jitter = bearings, jitter

    def bodies(self, length: float) -> list[dict]:
        L = length
        return [{"name": "pillar", "pos": [0.0, 0.0, 0.5 * self.height * L],
                 "joints": slide_joints("pillar"),
                 "geoms": [{"name": "pillar", "type": "cylinder", "size": [self.radius * L, 0.5 * self.height * L, 0.0],
                            "rgba": [0.1, 0.1, 0.12, 1.0], "contype": 0, "conaffinity": 0, "group": 0, "mass": 1.0}]}]

    target = "pillar"  # the body the task places (and measures the fly against)

    def _target_adrs(self, env, of: str = "qpos") -> tuple[int, int]:
        return slide_adrs(env, self.target, f"the {self.name} task's {self.target} is missing from the model: build "
                          f"the worlds with flycuda.env.make (it adds it), or decorate the MjSpec with "
                          f"{type(self).__name__}.decorate", of=of)

    def init_frames(self, env) -> torch.Tensor:
        T = env.motion.num_frames
        return torch.floor(torch.arange(self.bearings, dtype=torch.float64) * (T / self.bearings))

    def bearing(self, frames: torch.Tensor) -> torch.Tensor:
        """The pillar's bearing (rad, from the fly's heading) of the initial state at ``frames``:
        spread over the circle and decorrelated from the gait's phase (golden-ratio steps)."""
        return 2 * math.pi * torch.frac(frames.to(torch.float64) * 0.6180339887498949 + 0.5) - math.pi

    def initial_states(self, env, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        qpos, qvel = super().initial_states(env, frames)
        return self._place(env, frames, qpos), qvel

    def settled(self, env, frames, qpos, qvel):
        return self._place(env, frames, qpos), qvel  # around where the fly settled

    def start_bearing(self, env, frames: torch.Tensor, qpos: torch.Tensor) -> torch.Tensor:
        """float64 [K]: the direction (rad, in the world) the target is placed in from each initial
        state's thorax: here :meth:`bearing` (the fly starts facing +x)."""
        return self.bearing(frames)

    def _place(self, env, frames: torch.Tensor, qpos: torch.Tensor) -> torch.Tensor:
        """The targets ``distance`` body lengths from each state's thorax, at :meth:`start_bearing`."""
        L, (ax, ay), root = body_length(env.model_unit), self._target_adrs(env), env.layout.root_adr
        b = self.start_bearing(env, frames, qpos)
        qpos[:, ax] = (qpos[:, root] + self.distance_start * L * torch.cos(b)).float()
        qpos[:, ay] = (qpos[:, root + 1] + self.distance_start * L * torch.sin(b)).float()
        return qpos

    def noise_scales(self, env) -> tuple[torch.Tensor, torch.Tensor]:
        qn, vn = super().noise_scales(env)
        for a in self._target_adrs(env):
            qn[a] = self.jitter * body_length(env.model_unit)
        return qn, vn

    def setup(self, env) -> None:
        q, v, lay = env.sim.view("qpos"), env.sim.view("qvel"), env.layout
        ax, ay = self._target_adrs(env)
        self.L = body_length(env.model_unit)
        self._d = [torch.empty(env.num_envs, device=env.device) for _ in range(5)]
        self.distance, self.bearing_now = (torch.zeros(env.num_envs, device=env.device) for _ in range(2))
        self._fx, self._fy, self._px, self._py = q[:, lay.root_adr], q[:, lay.root_adr + 1], q[:, ax], q[:, ay]
        self._q = [q[:, lay.root_adr + 3 + i] for i in range(4)]  # the thorax's quaternion (w, x, y, z)
        self._vx, self._vy = v[:, lay.root_dof], v[:, lay.root_dof + 1]

    def measure(self, env) -> None:
        dx, dy, n, hx, hy = self._d
        torch.sub(self._px, self._fx, out=dx)
        torch.sub(self._py, self._fy, out=dy)
        n.copy_(dx).mul_(dx).addcmul_(dy, dy).add_(1e-12).sqrt_()
        torch.mul(n, 1.0 / self.L, out=self.distance)
        heading_into(self._q, hx, hy)
        torch.atan2(dy, dx, out=self.bearing_now)
        torch.atan2(hy, hx, out=hx)
        self.bearing_now.sub_(hx).add_(math.pi).remainder_(2 * math.pi).sub_(math.pi)

    def info(self) -> dict:
        return {"distance": self.distance, "bearing": self.bearing_now}

    def reward(self, env) -> None:
        dx, dy, n = self._d[:3]  # measured after this step's observation
        env.rewards.copy_(self._vx).mul_(dx).addcmul_(self._vy, dy).div_(n).mul_(1.0 / self.L)
