"""Non-finite physics, kept out of what a policy sees (FlyGym issue #271: NaN observations).

A world whose state (qpos or qvel) is no longer finite after a control step's physics, or whose
observation is not (the walking controller's state, forces, the eyes), ends there: it is
terminated, and the step's autoreset starts its next episode. What that step returns for it is
finite: its ``final_obs`` row is the last observation it had (the one the previous step
returned), its reward the task's ``nonfinite_reward`` (a fall's penalty on walk: blowing the
physics up must not pay better than falling), the task's float [W] measures 0, and
``info["nonfinite_state"]`` marks it. ``nonfinite_episodes`` [W] counts such episodes per
world (a report's "reset after non-finite physics": ``int(env.nonfinite_episodes.sum())``).
Everything is in place on fixed buffers, captured with the step (no host sync).
"""

from __future__ import annotations

import torch

__all__ = ["NonFinite", "rows_nonfinite"]


def rows_nonfinite(x: torch.Tensor, tmp: torch.Tensor, bad: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out`` [W] = whether row w of ``x`` [W, n] holds a NaN or an inf, through the buffers
    ``tmp`` (x's shape and dtype) and ``bad`` (bool, x's shape): in place, capturable."""
    torch.sub(x, x, out=tmp)  # NaN where x is NaN or +-inf
    torch.ne(tmp, tmp, out=bad)
    return torch.any(bad, 1, out=out)


class NonFinite:
    """The non-finite check of every world and its buffers (see the module)."""

    def __init__(self, W: int, nq: int, nv: int, obs: torch.Tensor):
        dev = obs.device
        self.state = torch.zeros(W, dtype=torch.bool, device=dev)
        self.episodes = torch.zeros(W, dtype=torch.int64, device=dev)
        sizes = (nq, nv, obs.shape[1])
        self._tmp = [torch.zeros(W, n, device=dev) for n in sizes]
        self._bad = [torch.zeros(W, n, dtype=torch.bool, device=dev) for n in sizes]
        self._any = torch.zeros(W, dtype=torch.bool, device=dev)
        self._last_obs = torch.zeros_like(obs)

    def check(self, qpos: torch.Tensor, qvel: torch.Tensor, obs: torch.Tensor) -> None:
        """After the physics, before the step observes: which worlds' states are not finite,
        and the observations they had (``obs`` as the last step left it)."""
        self._last_obs.copy_(obs)
        self.state.zero_()
        self._mark(qpos, 0)
        self._mark(qvel, 1)

    def observed(self, obs: torch.Tensor, terminated: torch.Tensor) -> None:
        """After the step observed: the worlds whose observation is not finite are marked too;
        every marked world is terminated and counted."""
        self._mark(obs, 2)
        terminated.logical_or_(self.state)
        self.episodes.add_(self.state)

    def _mark(self, x: torch.Tensor, k: int) -> None:
        self.state.logical_or_(rows_nonfinite(x, self._tmp[k], self._bad[k], self._any))

    def mask(self, obs: torch.Tensor, rewards: torch.Tensor, measures: dict, reward: float = 0.0) -> None:
        """The marked worlds' observations back to their last ones, their reward ``reward``,
        the task's float [W] measures 0."""
        torch.where(self.state.unsqueeze(1), self._last_obs, obs, out=obs)
        rewards.masked_fill_(self.state, reward)
        for t in measures.values():
            if t.dim() == 1 and t.is_floating_point():
                t.masked_fill_(self.state, 0.0)
