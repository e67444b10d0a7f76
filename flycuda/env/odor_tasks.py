"""The odor tasks of :mod:`flycuda.env` (issue 41): FlyGym 1.x's odor taxis for every world.

Its sources are bodies on two slide joints (x, y) at a fixed height, so that their places are
part of qpos: the reset writes them with each world's initial state (one of K arrangements, plus
noise), the renderer and videos draw them as markers, and the env's :class:`flycuda.env.smell.Smell`
reads them with the fly's four sensors into the ``odor`` observations.
"""

from __future__ import annotations

import math

import torch

from ..errors import EnvError
from ..sim.bodies import add_bodies
from .odor_draws import AIR_DENSITY, OdorDraws, check_draws
from .smell import add_sensors
from .tasks import Task, arrangement_frames, body_length, slide_adrs, slide_joints, spread_bearings, yaw_of

__all__ = ["OdorTaxis", "OdorObstacles", "ATTRACTIVE_RGBA", "AVERSIVE_RGBA"]

ATTRACTIVE_RGBA = (1.0, 0.55, 0.1, 1.0)
"""The markers of sources whose first odor dimension is the larger (attractive): orange."""
AVERSIVE_RGBA = (0.2, 0.45, 1.0, 1.0)
"""The other sources' markers (aversive): blue."""
# FlyGym 1.x's simple_odor_taxis (examples/olfaction/simple_odor_taxis.py): the fly at the origin facing
# +x, sources (mm) and peaks (dimension 0 attractive, 1 aversive), the sources 1.5 mm high.
FLYGYM1_SOURCES = ((24.0, 0.0), (8.0, -4.0), (16.0, 4.0))
FLYGYM1_PEAKS = ((1.0, 0.0), (0.0, 1.0), (0.0, 1.0))
FLYGYM1_HEIGHT = 1.5


class OdorTaxis(Task):
    """Walk to the attractive odor source, past the aversive ones: FlyGym 1.x's simple odor taxis
    (``examples/olfaction/simple_odor_taxis.py``) in every world.

    The sources are 1.x's (an attractive one 24 mm ahead, aversive ones at (8, -4) and (16, 4)
    mm, 1.5 mm high; peaks [[1, 0], [0, 1], [0, 1]]: odor dimension 0 attracts, 1 repels), their
    distances times ``scale`` (default 1/3: 8 mm ahead, what a fly walks in under a second), the
    whole arrangement turned about the fly's start by a bearing in [-``spread``, ``spread``] rad
    (one of ``arrangements``, golden-ratio spaced) and each source moved along x and along y by up
    to ``jitter`` body lengths of noise at every reset. The odor is 1.x's default field, ``|r| ** -2``
    (:func:`flycuda.ops.odor_intensity`), or with ``field="advection_diffusion"`` the 2026 course's
    plume in each world's wind (``diffusivity`` in body lengths^2/s: the default is the course's
    20000 mm^2/s on NeuroMechFly; ``decay`` 1/s).

    Each reset also draws, per world (:class:`flycuda.env.odor_draws.OdorDraws`): how many aversive
    sources are out (``aversive=(lo, hi)``; None: all), each source's peaks times
    ``1 + peak_spread * u``, and a wind of ``wind=(lo, hi)`` body lengths/s blowing from the
    attractive source toward the fly, turned by up to ``wind_spread`` rad. With a wind and
    ``wind_force`` (the default) the model gets air and MuJoCo's fluid forces push the fly by its
    world's wind. Reward per control step::

        r = (v_xy . u_a) / L  -  mean_i (v_xy . u_i) / L

    the closing speed to the attractive source (u_a: the unit vector from the thorax to it in
    the floor plane) less the mean closing speed to the aversive ones that are out, in body lengths per
    second. Observations: the fly's pose and velocities and ``odor`` ([2, 4]: each dimension at
    the palps and antennae). It works with ``action="descending"`` (1.x drove it so) and with
    joint actions.

    Success measures (``info``, after every step and reset): ``distance`` [W], the thorax's
    distance to the attractive source in the floor plane (body lengths), and ``reached`` [W]
    (1.0 within ``reach`` mm · L / 2.5 mm of it: 1.x stopped at 2 mm).
    """

    name = "odor_taxis"
    reward_unit = "body lengths/s"
    observe = ("joints", "joint_vel", "thorax_height", "thorax_quat", "thorax_vel", "odor")

    def __init__(self, *, scale: float = 1 / 3, spread: float = math.pi / 4, arrangements: int = 16,
                 jitter: float = 0.2, reach: float = 2.0, field: str = "power", diffusivity: float = 3200.0,
                 decay: float = 500.0, aversive: tuple[int, int] | None = None, peak_spread: float = 0.0,
                 wind: tuple[float, float] = (0.0, 0.0), wind_spread: float = math.pi, wind_force: bool = True,
                 **kw):
        super().__init__(**kw)
        if not (0 < scale < math.inf and 0 <= spread <= math.pi and isinstance(arrangements, int)
                and arrangements >= 1 and 0 <= jitter < math.inf and 0 < reach < math.inf):
            raise EnvError(f"odor_taxis needs scale > 0, 0 <= spread <= pi, arrangements >= 1, jitter >= 0 and "
                           f"reach > 0, got scale={scale}, spread={spread}, arrangements={arrangements}, "
                           f"jitter={jitter}, reach={reach}")
        if field not in ("power", "advection_diffusion") or not (0 < diffusivity < math.inf and 0 < decay < math.inf):
            raise EnvError(f"{self.name} needs field 'power' or 'advection_diffusion', diffusivity > 0 and decay > 0, "
                           f"got field={field!r}, diffusivity={diffusivity}, decay={decay}")
        self.scale, self.spread, self.arrangements, self.jitter, self.reach = scale, spread, arrangements, jitter, reach
        self.field, self.diffusivity, self.decay = field, float(diffusivity), float(decay)
        self.odor_peaks = [list(p) for p in FLYGYM1_PEAKS]
        self._scene = dict(aversive=None if aversive is None else tuple(aversive), peak_spread=float(peak_spread),
                           wind=tuple(float(w) for w in wind), wind_spread=float(wind_spread))
        self.wind_force = bool(wind_force)
        self.draws: OdorDraws | None = None
        self._draws_env = None

    def _check_scene(self) -> None:
        check_draws(self.name, n_aversive=len(self.odor_peaks) - 1, **self._scene)

    # -- the model ---------------------------------------------------------------------------
    def bodies(self, length: float) -> list[dict]:
        u, out = length / 2.5, []  # NeuroMechFly's mm, scaled to the model's body length
        for i, peak in enumerate(self.odor_peaks):
            rgba = ATTRACTIVE_RGBA if peak[0] > max(peak[1:], default=0.0) else AVERSIVE_RGBA
            out.append({"name": f"odor_source_{i}", "pos": [0.0, 0.0, FLYGYM1_HEIGHT * u],
                        "joints": slide_joints(f"odor_source_{i}"),
                        "geoms": [{"name": f"odor_source_{i}", "type": "sphere", "size": [0.3 * u, 0.0, 0.0],
                                   "rgba": list(rgba), "contype": 0, "conaffinity": 0, "group": 0, "mass": 1.0}]})
        return out

    def decorate(self, spec, length: float) -> None:
        add_bodies(spec, self.bodies(length))
        add_sensors(spec, length)
        if self._pushes():  # air, so that MuJoCo Warp computes fluid forces (the env's units: mm and g, or m and kg)
            spec.option.density = AIR_DENSITY["mm" if length == body_length("mm") else "m"]

    def _pushes(self) -> bool:
        return self.wind_force and self._scene["wind"][1] > 0

    def odor(self, env) -> dict:
        """What :class:`flycuda.env.smell.Smell` reads: the sources' (x, y) qpos addresses, their
        heights, each world's peaks and wind (:attr:`draws`), the field."""
        L = body_length(env.model_unit)
        draws = self.scene(env)
        wind = draws.wind[:, :2] if self.field == "advection_diffusion" else None
        return dict(source_adrs=self._adrs(env), heights=[FLYGYM1_HEIGHT * L / 2.5] * len(self.odor_peaks),
                    peaks=draws.peaks, field=self.field, exponent=2.0, wind=wind,
                    diffusivity=self.diffusivity * L * L, decay=self.decay)

    def scene(self, env) -> OdorDraws:
        """The worlds' drawn scenes (:class:`flycuda.env.odor_draws.OdorDraws`), made once per env."""
        if self.draws is None or self._draws_env is not env:
            self._check_scene()
            self.draws = OdorDraws(env, self.odor_peaks, self._adrs(env), length=body_length(env.model_unit),
                                   **self._scene)
            self._draws_env = env
        return self.draws

    def on_reset(self, env, done) -> None:
        self.scene(env).draw(env, done)

    def _adrs(self, env) -> list[tuple[int, int]]:
        return [slide_adrs(env, f"odor_source_{i}", "the odor_taxis task's sources are missing from the model: build "
                           "the worlds with flycuda.env.make (it adds them), or decorate the MjSpec with "
                           "OdorTaxis.decorate") for i in range(len(self.odor_peaks))]

    # -- the start of an episode ---------------------------------------------------------------
    def init_frames(self, env) -> torch.Tensor:
        return arrangement_frames(env, self.arrangements)

    def bearings(self, K: int) -> torch.Tensor:
        """The K arrangements' turns (rad) in [-spread, spread], golden-ratio spaced."""
        return spread_bearings(K, self.spread)

    def initial_states(self, env, frames):
        qpos, qvel = super().initial_states(env, frames)
        return self._place(env, qpos), qvel

    def settled(self, env, frames, qpos, qvel):
        return self._place(env, qpos), qvel  # around where the fly settled

    def _place(self, env, qpos: torch.Tensor) -> torch.Tensor:
        """1.x's sources around each state's thorax, scaled, turned by its arrangement's bearing
        plus the fly's own heading."""
        u, root = body_length(env.model_unit) / 2.5 * self.scale, env.layout.root_adr
        turn = self.bearings(qpos.shape[0]) + yaw_of(qpos, root)
        c, s = torch.cos(turn), torch.sin(turn)
        for (ax, ay), (x, y) in zip(self._placed_adrs(env), self.placed_xy()):
            qpos[:, ax] = (qpos[:, root].double() + u * (c * x - s * y)).float()
            qpos[:, ay] = (qpos[:, root + 1].double() + u * (s * x + c * y)).float()
        return qpos

    def placed_xy(self) -> tuple:
        """(x, y) mm, at scale 1 with the fly facing +x, of every object the reset places: the sources."""
        return FLYGYM1_SOURCES

    def _placed_adrs(self, env) -> list[tuple[int, int]]:
        return self._adrs(env)

    def noise_scales(self, env):
        qn, vn = super().noise_scales(env)
        for xy in self._placed_adrs(env):
            qn[list(xy)] = self.jitter * body_length(env.model_unit)
        return qn, vn

    # -- the reward ----------------------------------------------------------------------------
    def setup(self, env) -> None:
        q, v, lay, W, dev = env.sim.view("qpos"), env.sim.view("qvel"), env.layout, env.num_envs, env.device
        self.L = body_length(env.model_unit)
        adrs = torch.tensor(self._adrs(env), dtype=torch.int64, device=dev)  # [n, 2]
        self._src = adrs.view(-1)
        self._xy = torch.empty(W, adrs.numel(), device=dev)
        self._d, self._dv = (torch.empty(W, adrs.shape[0], 2, device=dev) for _ in range(2))
        self._n, self._close = (torch.empty(W, adrs.shape[0], device=dev) for _ in range(2))
        self._away, self._hit = torch.empty(W, device=dev), torch.empty(W, dtype=torch.bool, device=dev)
        self._fly = q[:, lay.root_adr:lay.root_adr + 2]
        self._v = v[:, lay.root_dof:lay.root_dof + 2]
        self.distance, self.reached = (torch.zeros(W, device=dev) for _ in range(2))
        self._reach = self.reach * self.L / 2.5
        draws = self.scene(env)
        if self._pushes():
            draws.push(env.sim)
        self._out = draws.out[:, 1:]  # the aversive sources that are out, 1.0 / 0.0
        self._count, self._aw = torch.empty(W, device=dev), torch.empty(W, self._out.shape[1], device=dev)

    def measure(self, env) -> None:
        torch.index_select(env.sim.view("qpos"), 1, self._src, out=self._xy)
        torch.sub(self._xy.view_as(self._d), self._fly.unsqueeze(1), out=self._d)  # fly -> sources
        torch.linalg.vector_norm(self._d, dim=2, out=self._n)
        self._n.clamp_(min=1e-12)
        torch.mul(self._n[:, 0], 1.0 / self.L, out=self.distance)
        torch.lt(self._n[:, 0], self._reach, out=self._hit)
        self.reached.copy_(self._hit)

    def info(self) -> dict:
        return {"distance": self.distance, "reached": self.reached}

    def reward(self, env) -> None:
        # closing speeds (v . d / |d|) / L to every source, from this step's measure
        torch.mul(self._d, self._v.unsqueeze(1), out=self._dv)
        torch.sum(self._dv, 2, out=self._close)
        self._close.div_(self._n).mul_(1.0 / self.L)
        torch.mul(self._close[:, 1:], self._out, out=self._aw)
        torch.sum(self._aw, 1, out=self._away)  # their mean, over those out
        torch.sum(self._out, 1, out=self._count)
        self._away.div_(self._count.clamp_(min=1.0))
        env.rewards.copy_(self._close[:, 0]).sub_(self._away)


class OdorObstacles(OdorTaxis):
    """Walk to an odor source past dark pillars: NeuroMechFly v2's odor taxis with visual obstacles
    (Fig. 5), in every world.

    One attractive source 24 mm ahead and two dark pillars (radius ``pillar_radius`` body lengths,
    3 high) on the way, at (10, 1.5) and (17, -1.5) mm: distances times ``scale``, the arrangement
    turned per world as in :class:`OdorTaxis` and each object jittered at reset. The straight line to
    the source passes through a pillar, so a fly must see it (``vision=``) and smell past it. The
    pillars do not collide: a fly whose thorax comes within a pillar's radius plus 0.2 body lengths
    has hit it. Reward per control step::

        r = (v_xy . u_a) / L  -  c_hit * hit

    the closing speed to the source (body lengths per second) less ``c_hit`` (default 1) while the
    fly is in a pillar. Observations: :class:`OdorTaxis`' (the ``odor`` group is [1, 4]) and, with
    ``vision=``, both eyes. ``info``: ``distance``, ``reached`` (as OdorTaxis) and ``hit`` [W].
    """

    name = "odor_obstacles"
    PILLARS = ((10.0, 1.5), (17.0, -1.5))

    def __init__(self, *, pillar_radius: float = 0.4, c_hit: float = 1.0, **kw):
        super().__init__(**kw)
        if not (0 < pillar_radius < math.inf and 0 <= c_hit < math.inf):
            raise EnvError(f"odor_obstacles needs pillar_radius > 0 (body lengths) and c_hit >= 0, got "
                           f"pillar_radius={pillar_radius}, c_hit={c_hit}")
        self.pillar_radius, self.c_hit = float(pillar_radius), float(c_hit)
        self.odor_peaks = [[1.0]]

    def placed_xy(self) -> tuple:
        return (FLYGYM1_SOURCES[0],) + self.PILLARS

    def bodies(self, length: float) -> list[dict]:
        r, h = self.pillar_radius * length, 3.0 * length
        pillars = [{"name": f"obstacle_{i}", "pos": [0.0, 0.0, 0.5 * h],
                    "joints": slide_joints(f"obstacle_{i}"),
                    "geoms": [{"name": f"obstacle_{i}", "type": "cylinder", "size": [r, 0.5 * h, 0.0],
                               "rgba": [0.1, 0.1, 0.12, 1.0], "contype": 0, "conaffinity": 0, "group": 0,
                               "mass": 1.0}]} for i in range(len(self.PILLARS))]
        return super().bodies(length) + pillars

    def _placed_adrs(self, env) -> list[tuple[int, int]]:
        return self._adrs(env) + [slide_adrs(env, f"obstacle_{i}", "the odor_obstacles task's pillars are missing "
                                             "from the model: build the worlds with flycuda.env.make (it adds them)")
                                  for i in range(len(self.PILLARS))]

    def setup(self, env) -> None:
        super().setup(env)
        W, dev = env.num_envs, env.device
        pillars = torch.tensor(self._placed_adrs(env)[1:], dtype=torch.int64, device=dev)
        self._pil = pillars.view(-1)
        self._pxy = torch.empty(W, pillars.numel(), device=dev)
        self._pd = torch.empty(W, pillars.shape[0], 2, device=dev)
        self._pn = torch.empty(W, pillars.shape[0], device=dev)
        self._pmin = torch.empty(W, device=dev)
        self.hit = torch.zeros(W, device=dev)
        self._hit_radius = (self.pillar_radius + 0.2) * self.L

    def measure(self, env) -> None:
        super().measure(env)
        torch.index_select(env.sim.view("qpos"), 1, self._pil, out=self._pxy)
        torch.sub(self._pxy.view_as(self._pd), self._fly.unsqueeze(1), out=self._pd)
        torch.linalg.vector_norm(self._pd, dim=2, out=self._pn)
        torch.amin(self._pn, 1, out=self._pmin)
        torch.lt(self._pmin, self._hit_radius, out=self._hit)
        self.hit.copy_(self._hit)

    def info(self) -> dict:
        return {"distance": self.distance, "reached": self.reached, "hit": self.hit}

    def reward(self, env) -> None:
        torch.mul(self._d, self._v.unsqueeze(1), out=self._dv)  # the source's closing speed, as OdorTaxis
        torch.sum(self._dv, 2, out=self._close)
        self._close.div_(self._n).mul_(1.0 / self.L)
        env.rewards.copy_(self._close[:, 0]).add_(self.hit, alpha=-self.c_hit)
