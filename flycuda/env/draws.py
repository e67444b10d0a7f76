"""Numbers drawn per world at every reset, for a task's scene (:mod:`flycuda.env.odor_draws`,
:mod:`flycuda.env.follow`).

The draw is the reset's own counter-based one (:func:`flycuda.ops.reset_worlds`: splitmix64 of
the seed, the world and its episode count), on a stream of its own (the environment's seed xor a
salt per task), so a task's scene neither shifts the initial states' draws nor depends on the
device: :func:`flycuda.reference.episode.reset_uniform` gives the same numbers in Python.
"""

from __future__ import annotations

import torch

from .. import ops

__all__ = ["ResetDraws"]


class ResetDraws:
    """``m`` uniform numbers in [-1, 1) per world, redrawn in the worlds a reset starts
    (capturable: buffers made here, one :func:`flycuda.ops.reset_worlds` per draw).

    Args:
        env: the environment (its worlds, seed and episode counts).
        m: how many numbers per world.
        salt: the stream: the draws use ``env.seed_value ^ salt``.

    Attributes:
        u: float32 [W, m]: world w's numbers of its current episode (``u[w, j]`` is
            ``reset_uniform(reset_key(seed ^ salt, w, episodes[w]), j)``).
    """

    def __init__(self, env, m: int, salt: int):
        W, dev = env.num_envs, env.device
        f32 = dict(dtype=torch.float32, device=dev)
        self.salt = int(salt)
        self.u = torch.zeros(W, m, **f32)
        # one "initial state" of zeros with noise 1 on every number: u = 0 + 1 * uniform
        self._init = [torch.zeros(1, m, **f32), torch.zeros(1, 1, **f32), torch.zeros(1, dtype=torch.float64,
                      device=dev), torch.ones(m, **f32), torch.zeros(1, **f32)]
        self._scratch = [torch.zeros(W, 1, **f32), torch.zeros(W, dtype=torch.int64, device=dev),
                         torch.zeros(W, dtype=torch.int64, device=dev), torch.zeros(W, dtype=torch.float64, device=dev)]

    def draw(self, env, done: torch.Tensor) -> torch.Tensor:
        """New numbers in the worlds ``done`` marks (after the reset counted their episode);
        returns :attr:`u`."""
        qvel, steps, episodes, offsets = self._scratch
        episodes.copy_(env.episodes)
        ops.reset_worlds(done, *self._init, env.seed_value ^ self.salt, self.u, qvel, steps, episodes, offsets)
        return self.u
