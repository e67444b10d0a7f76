"""``flycuda env``'s loop: a policy's actions into every world, step after step, with what it
records. Recording into a ``.zarr`` path it also takes snapshots and stops cleanly on SIGTERM
or SIGINT, and ``flycuda env --resume STORE`` goes on from the latest snapshot into the same
store, which ends bit for bit the store of a run never stopped.

A snapshot (``STORE.resume/``, the replay's files: :mod:`flycuda.replay.snapshot`) holds the
environment's :meth:`~flycuda.env.FlyVecEnv.state_dict`, the recorder's state
(:meth:`flycuda.recording.LoopRecorder.state`), the random policy's generator, the last
observations and the rollout's running sums. One is taken each time a chunk of observations has
been queued out to the store (after it, on the store's writer thread), and when a stop is asked
for; the latest two are kept, and a completed run removes them. A policy from a PATH.py is
taken as a function of the observations: state of its own is not in the snapshot.
"""

from __future__ import annotations

import math
import signal
import sys
import time
import warnings

import torch

from .. import __version__
from ..env.state import device_name
from ..errors import EnvError, ReplayError
from ..recording.reader import Target
from ..recording.store import versions
from ..replay import snapshot as snap
from ..sim import preempt

__all__ = ["FORMAT", "FINGERPRINT", "RandomPolicy", "Rollout", "fingerprint", "resume_point"]

FORMAT = "flycuda.env_rollout/1"
# the command line's settings a rollout's steps depend on (a snapshot fits only a run with the same)
FINGERPRINT = ("task", "worlds", "model", "device", "control_dt", "max_episode_steps", "vision", "connectome",
               "connectome_checkpoint", "seed", "task_option", "action", "terrain", "policy", "duration", "chunk_kib")


class RandomPolicy:
    """Uniform actions in the action space (the actuators' ranges, or the drives' [-1, 1],
    clamped to +-pi), from a generator seeded with the environment's seed."""

    def __init__(self, env):
        space = env.single_action_space
        lo, hi = (torch.as_tensor(b, device=env.device) for b in (space.low, space.high))
        self.lo, self.span = lo.clamp(min=-math.pi), hi.clamp(max=math.pi) - lo.clamp(min=-math.pi)
        self.generator = torch.Generator(device=env.device).manual_seed(env.seed_value)
        self.buf = torch.empty_like(env.actions)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.rand(self.buf.shape, generator=self.generator, device=self.buf.device,
                          out=self.buf).mul_(self.span).add_(self.lo)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def fingerprint(args, env, steps: int) -> dict:
    """What a snapshot of this rollout fits: the versions of flycuda, torch, MuJoCo, MuJoCo Warp,
    Warp (and FlyGym, where installed), the device's kind, the steps and the command line's
    settings (:data:`FINGERPRINT`)."""
    settings = {k: repr(getattr(args, k, None)) for k in FINGERPRINT}
    return {"flycuda": __version__, **versions(), "device": device_name(env.device), "steps": steps, **settings}


def resume_point(store: str, fp: dict) -> tuple[Target, snap.Snapshot]:
    """The store to go on writing and the snapshot to go on from: the latest whole one (the one
    before where it is not, said on stderr), checked against this run's fingerprint ``fp``."""
    try:
        point = snap.load_latest(store)
        for note in point.notes:
            print(f"flycuda env: {note}", file=sys.stderr)
        if point.meta.get("rollout") != FORMAT:
            raise EnvError(f"cannot resume {store}: its snapshots are not flycuda env's")
        snap.check_fingerprint(point, fp, store)
    except ReplayError as e:  # the snapshot files' own errors, in the env's words
        raise EnvError(str(e)) from None
    target = Target(store=store, create=False)
    target.rows_written = dict(point.meta["rows_written"])
    return target, point


class Rollout:
    """``steps`` control steps of ``policy`` in ``env`` from its reset observations ``obs``,
    recorded by the LoopRecorder given to :meth:`record` (if any); with ``folder``
    (``STORE.resume``) and the run's fingerprint, snapshots and a clean stop on a signal
    (:mod:`flycuda.sim.preempt`)."""

    def __init__(self, env, policy, obs: torch.Tensor, steps: int, folder: str | None = None, fp: dict | None = None):
        self.env, self.policy, self.obs, self.steps, self.rec = env, policy, obs, steps, None
        self.folder, self.fp = folder, fp
        self.k = 0
        self.total = torch.zeros((), dtype=torch.float64, device=env.device)
        self.ended = torch.zeros(3, dtype=torch.int64, device=env.device)
        self.flushed = 0
        self.taken, self.bytes, self.seconds = 0, 0, 0.0  # snapshots, the last one's state bytes, host seconds
        self.failures: list = []

    # -- the loop ------------------------------------------------------------------------
    def run(self, bar) -> tuple[float, float]:
        """The steps left; returns (seconds of the first step run, seconds of the others)."""
        start = self.k
        t0 = t_first = time.perf_counter()
        while self.k < self.steps:
            if self.k == start + 1:  # the first step compiles Warp's kernels (and captures the graph): timed apart
                self._sync()
                t0 = time.perf_counter()
            self.obs, rew, term, trunc, info = self.env.step(self.policy(self.obs))
            self.total += rew.sum(dtype=torch.float64)
            self.ended[0] += term.sum()
            self.ended[1] += trunc.sum()
            self.ended[2] += info["_overflow"].sum()
            if self.rec is not None:
                self.rec.step()
            self.k += 1
            bar.update(1)
            self._after_step()
        self._sync()
        wall = time.perf_counter() - t0
        return (t0 - t_first if self.k - start > 1 else wall), wall

    def _after_step(self) -> None:
        """A snapshot once a chunk of observations has gone out, and on a stop asked for
        (then the store is flushed and marked preempted, and Preempted raised)."""
        if self.folder is None:
            return
        asked = preempt.requested()
        flushed = self._flushed()
        if flushed > self.flushed or asked is not None:
            self.flushed = flushed
            self.take()
        if asked is not None:
            self.rec.stop(f"preempted at step {self.k} ({signal.Signals(asked).name})")
            stop = preempt.Preempted(asked, self.k)
            stop.store = self.rec.sink.target.store
            raise stop

    def _flushed(self) -> int:
        return self.rec.recorder.stream("obs").flushed if self.rec is not None else 0

    def _sync(self) -> None:
        if self.env.device.type == "cuda":
            torch.cuda.synchronize(self.env.device)

    # -- snapshots -----------------------------------------------------------------------
    def state(self) -> dict:
        """Everything the next step depends on, on the host."""
        self._sync()
        policy = self.policy.state_dict() if isinstance(self.policy, RandomPolicy) else None
        return {"k": self.k, "env": self.env.state_dict(), "recorder": self.rec.state(), "policy": policy,
                "obs": self.obs.cpu().clone(), "total": self.total.cpu().clone(), "ended": self.ended.cpu().clone()}

    def record(self, rec) -> None:
        """What records the steps (a LoopRecorder; after :meth:`restore`, one made with
        ``resume=``)."""
        self.rec = rec
        self.flushed = self._flushed()

    def restore(self, state: dict) -> None:
        """The rollout as :meth:`state` found it, before anything is recorded (the recorder is
        restored by its own construction: LoopRecorder(resume=...)); a snapshot that does not
        fit this environment is refused here, with nothing written."""
        self.env.load_state_dict(state["env"])
        if isinstance(self.policy, RandomPolicy):
            self.policy.load_state_dict(state["policy"])
        self.obs = state["obs"].to(self.env.device)
        self.total.copy_(state["total"])
        self.ended.copy_(state["ended"])
        self.k = int(state["k"])

    def take(self) -> None:
        """A snapshot of this step, written by the store's writer thread after the chunks
        queued before it (so that it never claims rows the store lacks)."""
        t0 = time.perf_counter()
        state = self.state()
        meta = {"format": snap.FORMAT, "rollout": FORMAT, "step": self.k, "fingerprint": self.fp,
                "rows_written": self.rec.rows_queued()}
        self.bytes = sum(t.numel() * t.element_size() for t in snap.tensors_in(state))
        self.taken += 1
        self.seconds += time.perf_counter() - t0
        self.rec.sink.writer.job(lambda: self._write(meta, state))

    def _write(self, meta: dict, state: dict) -> None:
        """In the writer thread: the snapshot to disk. A failure (a full disk) is warned of once;
        the rollout goes on without that snapshot (a resume takes an older one, if any)."""
        try:
            snap.write_snapshot(self.folder, meta, state)
        except OSError as e:
            if not self.failures:
                warnings.warn(f"flycuda env: cannot write a snapshot into {self.folder} ({e}); the run goes on "
                              "without it", RuntimeWarning, stacklevel=2)
            self.failures.append(str(e))
