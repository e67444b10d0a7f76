"""Each world's odor scene, drawn at every reset (issue 41), and the wind that pushes the fly.

The odor tasks (:mod:`flycuda.env.odor_tasks`) place their sources through the initial states,
so a reset draws their places with the fly's (:func:`flycuda.ops.reset_worlds`). The rest of a
world's scene is drawn here, by the same counter-based draw on its own stream (the seed xor
:data:`DRAW_SALT`, the world and its episode count), after the reset and on the device:

* how many of the aversive sources are out (the others move :data:`FAR` body lengths away: out of
  the odor, the views and the videos);
* each source's peaks, times ``1 + peak_spread * u``;
* the wind: a speed in the task's range, blowing from the attractive source toward the fly turned
  by up to ``wind_spread``. The odor's advection-diffusion field reads it, and where the model has
  air (:data:`AIR_DENSITY` in ``opt.density`` before MuJoCo Warp's ``put_model``) MuJoCo's
  inertia-box fluid model drags every body by it: the wind of each world is MuJoCo Warp's
  per-world ``opt.wind``, which shares memory with :attr:`OdorDraws.wind` (NeLy-EPFL cobar-2026
  sets the wind and the density so, ``src/miniproject/simulation.py``).
"""

from __future__ import annotations

import math

import torch

from ..errors import EnvError
from ..sim.mjwarp import import_warp
from .draws import ResetDraws

__all__ = ["OdorDraws", "AIR_DENSITY", "DRAW_SALT", "FAR", "check_draws"]

AIR_DENSITY = {"mm": 1.2e-6, "m": 1.2}
"""Air's density, 1.2 kg/m^3, in the environment's two unit systems: NeuroMechFly's (mm, g:
g/mm^3) and the hexapod's (m, kg: kg/m^3)."""
DRAW_SALT = 0x0D025EED
"""The scene's draws use the environment's seed xor this (the initial states use the seed)."""
FAR = 1000.0
"""Body lengths from the fly's start: where a world's sources that are not out go."""


class OdorDraws:
    """Every world's odor scene, redrawn in the worlds a reset starts (capturable: buffers made
    here, :func:`flycuda.ops.reset_worlds` and torch ops on the device).

    Args:
        env: the environment (its worlds, layout, seed and episode counts).
        peaks: [n, k] each source's peaks; source 0 is the attractive one, the others aversive.
        source_adrs: [n] (x, y) qpos addresses of the sources' slide joints.
        aversive: (lo, hi): a world has between lo and hi of the n - 1 aversive sources out (the
            first ones); None: all.
        peak_spread: each source's peaks times ``1 + peak_spread * u``, ``u`` uniform in [-1, 1).
        wind: (lo, hi) wind speed in body lengths/s, uniform; (0, 0): still air.
        wind_spread: rad; the wind blows from the attractive source toward the fly, turned by a
            uniform angle in [-wind_spread, wind_spread).

    Attributes (float32, on the worlds' device, rewritten at resets):
        peaks: [W, n, k]: 0 for a source not out.
        out: [W, n]: 1.0 for a source that is out.
        wind: [W, 3]: the wind (the model's length unit per s; z = 0).
    """

    def __init__(self, env, peaks, source_adrs, *, aversive: tuple[int, int] | None = None,
                 peak_spread: float = 0.0, wind: tuple[float, float] = (0.0, 0.0), wind_spread: float = math.pi,
                 length: float = 1.0):
        W, dev = env.num_envs, env.device
        self.base = torch.as_tensor(peaks, dtype=torch.float32, device=dev)  # [n, k]
        n = self.base.shape[0]
        self.aversive = (n - 1, n - 1) if aversive is None else aversive
        self.peak_spread, self.wind_range, self.wind_spread, self.length = peak_spread, wind, wind_spread, length
        self._adrs = torch.tensor(source_adrs, dtype=torch.int64, device=dev)  # [n, 2]
        self._root = env.layout.root_adr
        m = n + 3  # the draws: n peak factors, the aversive count, the wind's speed and turn
        f32 = dict(dtype=torch.float32, device=dev)
        self._draws = ResetDraws(env, m, DRAW_SALT)
        self.u = self._draws.u
        self.peaks = self.base.repeat(W, 1, 1)
        self.out = torch.ones(W, n, **f32)
        self.wind = torch.zeros(W, 3, **f32)
        self._rank = torch.arange(-1, n - 1, **f32)  # source i is the (i - 1)-th aversive one; -1: attractive
        self._src0, self._xcols = self._adrs[0].clone(), self._adrs[:, 0].contiguous()
        # the draw's buffers (a reset runs in every captured step: it allocates nothing)
        self._count, self._turn, self._speed = (torch.empty(W, **f32) for _ in range(3))
        self._is_out, self._away = (torch.empty(W, n, dtype=torch.bool, device=dev) for _ in range(2))
        self._factor, self._x = torch.empty(W, n, **f32), torch.empty(W, n, **f32)
        self._d, self._new, self._far = torch.empty(W, 2, **f32), torch.zeros(W, 3, **f32), torch.empty(W, 1, **f32)

    @property
    def windy(self) -> bool:
        """Does any world have wind?"""
        return self.wind_range[1] > 0

    def push(self, sim) -> None:
        """Makes :attr:`wind` MuJoCo Warp's per-world ``opt.wind`` (shared memory): the fluid
        forces drag every body by each world's wind from then on.

        Raises:
            EnvError: the model has no air (its ``opt.density`` and ``opt.viscosity`` were 0 when
                MuJoCo Warp made it, so it computes no fluid forces).
        """
        if not bool(getattr(sim.model, "has_fluid", False)):
            raise EnvError("wind as a force needs air in the model: opt.density > 0 before MuJoCo Warp's put_model "
                           "(flycuda.env.make sets it; with sim=, set mjm.opt.density, e.g. "
                           "flycuda.env.odor_draws.AIR_DENSITY, before building the worlds), or pass wind_force=False")
        wp, _ = import_warp()
        self._replaced = sim.model.opt.wind  # kept alive: a graph captured before may still read it
        sim.model.opt.wind = wp.from_torch(self.wind, dtype=wp.vec3)

    def draw(self, env, done: torch.Tensor) -> None:
        """New scenes in the worlds ``done`` marks, from their (already placed) initial states."""
        self._draws.draw(env, done)
        n, u = self.base.shape[0], self.u
        lo, hi = self.aversive
        torch.add(u[:, n], 1.0, out=self._count)  # lo + floor((u + 1) (hi - lo + 1) / 2), at most hi
        self._count.mul_(0.5 * (hi - lo + 1)).floor_().add_(lo).clamp_(max=hi)
        torch.lt(self._rank, self._count.unsqueeze(1), out=self._is_out)  # the attractive one (rank -1) always
        self.out.copy_(self._is_out)
        torch.mul(u[:, :n], self.peak_spread, out=self._factor)
        self._factor.add_(1.0).mul_(self.out)
        torch.mul(self.base, self._factor.unsqueeze(2), out=self.peaks)
        self._wind(env, done)
        self._hide(env, done)

    def _wind(self, env, done: torch.Tensor) -> None:
        """The wind of the worlds ``done`` marks: from the attractive source toward the fly."""
        n, u, (lo, hi) = self.base.shape[0], self.u, self.wind_range
        qpos = env.sim.view("qpos")
        torch.index_select(qpos, 1, self._src0, out=self._d)
        torch.sub(qpos[:, self._root:self._root + 2], self._d, out=self._d)  # source -> fly
        torch.atan2(self._d[:, 1], self._d[:, 0], out=self._turn)
        self._turn.add_(u[:, n + 2], alpha=self.wind_spread)
        torch.add(u[:, n + 1], 1.0, out=self._speed)  # lo + (u + 1) (hi - lo) / 2, body lengths/s
        self._speed.mul_(0.5 * (hi - lo)).add_(lo).mul_(self.length)
        torch.cos(self._turn, out=self._new[:, 0])
        torch.sin(self._turn, out=self._new[:, 1])
        self._new[:, :2].mul_(self._speed.unsqueeze(1))
        torch.where(done.unsqueeze(1), self._new, self.wind, out=self.wind)

    def _hide(self, env, done: torch.Tensor) -> None:
        """Moves the sources that are not out, in the worlds ``done`` marks, FAR away."""
        qpos = env.sim.view("qpos")
        torch.index_select(qpos, 1, self._xcols, out=self._x)
        torch.logical_not(self._is_out, out=self._away)
        self._away.logical_and_(done.unsqueeze(1))
        torch.add(qpos[:, self._root:self._root + 1], FAR * self.length, out=self._far)
        torch.where(self._away, self._far, self._x, out=self._x)
        qpos.index_copy_(1, self._xcols, self._x)


def check_draws(name: str, aversive, peak_spread, wind, wind_spread, n_aversive: int) -> None:
    """The scene's options of task ``name`` (``n_aversive`` aversive sources), in one line."""
    ok_av = aversive is None or (len(aversive) == 2 and all(isinstance(a, int) for a in aversive)
                                 and 0 <= aversive[0] <= aversive[1] <= n_aversive)
    ok_w = len(wind) == 2 and 0 <= wind[0] <= wind[1] < math.inf
    if not (ok_av and 0 <= peak_spread <= 1 and ok_w and 0 <= wind_spread <= math.pi):
        raise EnvError(f"{name} needs aversive=None or (lo, hi) integers with 0 <= lo <= hi <= {n_aversive}, "
                       f"0 <= peak_spread <= 1, wind=(lo, hi) body lengths/s with 0 <= lo <= hi and "
                       f"0 <= wind_spread <= pi, got aversive={aversive}, peak_spread={peak_spread}, wind={wind}, "
                       f"wind_spread={wind_spread}")
