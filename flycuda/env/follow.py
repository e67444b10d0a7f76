"""The ``follow`` task of :mod:`flycuda.env` (issue 40): keep a moving dark target ahead and near,
FlyGym 1.x's visual object following (``examples/vision``: ``MovingObjArena``, and the fly
following of ``follow_fly_closed_loop.py``) in every world.

The target is a dark sphere on two slide joints (x, y) with no damping, so its place is part of
qpos (the reset writes it, the eyes and videos see it) and the velocity the task gives it carries
it through the control step's physics. Each control step, before the physics, the task writes
every world's target place and velocity on the device (:meth:`Follow.move`, captured with the
step): no host work per step.
"""

from __future__ import annotations

import math
import numbers

import torch

from ..errors import EnvError
from .draws import ResetDraws
from .tasks import Approach, arrangement_frames, slide_joints, spread_bearings, yaw_of

__all__ = ["Follow", "FOLLOW_SALT", "TARGET_RGBA"]

FOLLOW_SALT = 0x0F0110E5
"""The target's path draws use the environment's seed xor this (:class:`flycuda.env.draws.ResetDraws`)."""
TARGET_RGBA = (0.0, 0.0, 0.0, 1.0)
"""The target's colour: black, as FlyGym 1.x's ball."""


def _real(v) -> bool:
    """A finite real number (numpy's too; not a bool)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


class Follow(Approach):
    """Keep a moving dark target ahead and near: FlyGym 1.x's ``MovingObjArena`` (a black ball
    of radius 1 mm starting 5 mm ahead, moving at 10 mm/s on an S-shaped path) in every world.

    At every reset the target (a sphere of ``radius`` body lengths, resting on the floor plane:
    its centre ``radius`` high) is placed ``distance`` body lengths from the fly's thorax, at one
    of ``arrangements`` bearings in [-``spread``, ``spread``] rad from the fly's heading
    (golden-ratio spaced), plus up to ``jitter`` body lengths of noise along x and y. From there
    it moves away along 1.x's path, in the frame whose x axis points from the fly to the
    target's start::

        heading(t) = (1, lateral * cos(omega * t + phase) * side) / |...|
        p(t + dt) = p(t) + speed * heading(t) * dt          (dt: the control step)

    with t the world's time in its episode, ``lateral`` 2 and ``omega`` 3 rad/s (1.x's), and per
    world (drawn at each reset on the task's own stream, :data:`FOLLOW_SALT`): ``side`` = +1 or
    -1 (1.x's ``move_direction="random"``), ``phase`` uniform in [-``phase_spread``,
    ``phase_spread``) and ``speed`` (default 4 body lengths/s, 1.x's 10 mm/s) times
    ``1 + speed_spread * u``. Reward per control step::

        r = cos(b) * exp(-max(0, d - distance) / distance)

    b the target's bearing from the fly's heading, d its distance (body lengths): 1 while it is
    straight ahead and no farther than ``distance``, negative behind the fly.

    Where it differs from 1.x, on purpose: the path's frame turns with each world's start bearing
    (1.x: bearing 0, the ball at (5, 0) mm ahead of a fly facing +x, which is ``spread=0``); each
    world draws its phase (1.x: 0, which is ``phase_spread=0``) and side; the ball moves once per
    control step (1.x: every physics step; the same path to first order in the step). The path's
    constants are the task's at the environment's first step (its CUDA graph holds them). Observations: the
    fly's pose and velocities; add ``vision=`` (the eyes see the target), ``connectome=`` (flyvis's
    network behind them) and, with joint actions, ``observe`` ``reference`` and ``phase`` (the
    gait to steer). It works with ``action="descending"`` (1.x drove it so) and joint actions.

    Success measures (``info``, after every step and reset): ``distance`` [W] (body lengths, in
    the floor plane), ``bearing`` [W] (rad in [-pi, pi), positive to the left) and ``ahead`` [W]
    (1.0 while ``|bearing| <= ahead``, default 45 degrees).
    """

    name = "follow"
    reward_unit = "1"
    observe = ("joints", "joint_vel", "thorax_height", "thorax_quat", "thorax_vel")
    needs_motion = False
    target = "target"

    def __init__(self, *, distance: float = 2.0, radius: float = 0.4, speed: float = 4.0, lateral: float = 2.0,
                 omega: float = 3.0, spread: float = math.pi / 6, phase_spread: float = math.pi,
                 speed_spread: float = 0.0, arrangements: int = 16, jitter: float = 0.2, ahead: float = math.pi / 4,
                 **kw):
        values = dict(distance=distance, radius=radius, speed=speed, lateral=lateral, omega=omega, spread=spread,
                      phase_spread=phase_spread, speed_spread=speed_spread, jitter=jitter, ahead=ahead)
        if not (all(_real(v) for v in values.values()) and distance > radius > 0 and speed >= 0 and lateral >= 0
                and 0 <= spread <= math.pi and 0 <= phase_spread <= math.pi and 0 <= speed_spread <= 1
                and jitter >= 0 and 0 < ahead <= math.pi and type(arrangements) is int and arrangements >= 1):
            raise EnvError(f"follow needs finite numbers with distance > radius > 0 (body lengths), speed >= 0 "
                           f"(body lengths/s), lateral >= 0, omega (rad/s), 0 <= spread <= pi, 0 <= phase_spread <= "
                           f"pi, 0 <= speed_spread <= 1, jitter >= 0, 0 < ahead <= pi and an integer arrangements "
                           f">= 1, got {', '.join(f'{k}={v}' for k, v in values.items())}, arrangements={arrangements!r}")
        super().__init__(distance=distance, radius=radius, height=2 * radius, bearings=arrangements, jitter=jitter,
                         **kw)
        self.speed, self.lateral, self.omega, self.spread = float(speed), float(lateral), float(omega), float(spread)
        self.phase_spread, self.speed_spread, self.ahead_angle = float(phase_spread), float(speed_spread), float(ahead)

    # -- the model and the start of an episode -------------------------------------------------
    def bodies(self, length: float) -> list[dict]:
        r = self.radius * length
        return [{"name": self.target, "pos": [0.0, 0.0, r], "joints": slide_joints(self.target, damping=0.0),
                 "geoms": [{"name": self.target, "type": "sphere", "size": [r, 0.0, 0.0], "rgba": list(TARGET_RGBA),
                            "contype": 0, "conaffinity": 0, "group": 0, "mass": 1.0}]}]

    def init_frames(self, env) -> torch.Tensor:
        return arrangement_frames(env, self.bearings)

    def start_bearing(self, env, frames: torch.Tensor, qpos: torch.Tensor) -> torch.Tensor:
        """The K arrangements' bearings in [-spread, spread] from each state's own heading."""
        return spread_bearings(qpos.shape[0], self.spread) + yaw_of(qpos, env.layout.root_adr)

    # -- the path, on the device ------------------------------------------------------------------
    def setup(self, env) -> None:
        super().setup(env)
        W, dev = env.num_envs, env.device
        q, v = env.sim.view("qpos"), env.sim.view("qvel")
        (ax, ay), (dx, dy) = self._target_adrs(env), self._target_adrs(env, of="qvel")
        self._tq, self._tv = (q[:, ax], q[:, ay]), (v[:, dx], v[:, dy])
        self._draws = ResetDraws(env, 3, FOLLOW_SALT)
        # every world's path: place (x, y), forward axis (x, y), side, phase, speed (length unit/s)
        self.path, self._new = torch.zeros(W, 7, device=dev), torch.zeros(W, 7, device=dev)
        self._c, self._k = torch.empty(W, device=dev), torch.empty(W, device=dev)
        self._vel = torch.empty(W, 2, device=dev)
        self.ahead = torch.zeros(W, device=dev)
        self._hit = torch.empty(W, dtype=torch.bool, device=dev)
        self._cos, self._near = torch.empty(W, device=dev), torch.empty(W, device=dev)

    def on_reset(self, env, done: torch.Tensor) -> None:
        """The path of every world ``done`` marks: from its target's place, away from the fly."""
        u = self._draws.draw(env, done)
        n = self._new
        n[:, 0].copy_(self._tq[0])
        n[:, 1].copy_(self._tq[1])
        torch.sub(n[:, 0], self._fx, out=n[:, 2])  # fly -> target: the path's forward axis
        torch.sub(n[:, 1], self._fy, out=n[:, 3])
        torch.hypot(n[:, 2], n[:, 3], out=self._k)
        n[:, 2:4].div_(self._k.clamp_(min=1e-12).unsqueeze(1))
        torch.ge(u[:, 0], 0.0, out=self._hit)
        n[:, 4].copy_(self._hit).mul_(2.0).sub_(1.0)  # side: +1 (left first) or -1
        torch.mul(u[:, 1], self.phase_spread, out=n[:, 5])
        torch.mul(u[:, 2], self.speed_spread, out=n[:, 6])
        n[:, 6].add_(1.0).mul_(self.speed * self.L)
        torch.where(done.unsqueeze(1), n, self.path, out=self.path)

    def move(self, env) -> None:
        """Every target at its path's place, with the path's velocity for this control step."""
        p, dt = self.path, env.control_dt
        c, k = self._c, self._k
        c.copy_(env.world_steps).mul_(dt)  # the world's time in its episode, then the heading's lateral part
        c.mul_(self.omega).add_(p[:, 5]).cos_().mul_(p[:, 4]).mul_(self.lateral)
        k.copy_(c).square_().add_(1.0).rsqrt_().mul_(p[:, 6])  # speed / |(1, c)|
        vx, vy = self._vel[:, 0], self._vel[:, 1]
        torch.mul(c, p[:, 3], out=vx)  # v = k (f + c n), n = (-f_y, f_x): the path's left
        vx.sub_(p[:, 2]).mul_(k).neg_()
        torch.mul(c, p[:, 2], out=vy)
        vy.add_(p[:, 3]).mul_(k)
        for i in range(2):
            self._tq[i].copy_(p[:, i])
            self._tv[i].copy_(self._vel[:, i])
        p[:, 0:2].add_(self._vel, alpha=dt)

    # -- the reward ---------------------------------------------------------------------------------
    def measure(self, env) -> None:
        super().measure(env)
        torch.abs(self.bearing_now, out=self._cos)  # (scratch)
        torch.le(self._cos, self.ahead_angle, out=self._hit)
        self.ahead.copy_(self._hit)

    def info(self) -> dict:
        return {"distance": self.distance, "bearing": self.bearing_now, "ahead": self.ahead}

    def reward(self, env) -> None:
        torch.cos(self.bearing_now, out=self._cos)
        torch.sub(self.distance, self.distance_start, out=self._near)
        self._near.clamp_(min=0.0).mul_(-1.0 / self.distance_start).exp_()
        torch.mul(self._cos, self._near, out=env.rewards)
