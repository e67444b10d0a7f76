"""Recordings both ways: FlyGym's ``RecordedTrajectory`` from a flycuda store's qpos, and a
flycuda store from FlyGym's trajectories (so ``flycuda render`` draws them)."""

from __future__ import annotations

import numpy as np

from ..errors import FlyGymError
from ..recording import store as zstore
from ..recording.observables import qpos_labels
from ..recording.reader import Recording, parse_worlds
from .bridge import require

__all__ = ["to_trajectories", "from_trajectories"]


def to_trajectories(recording, worlds=None, *, playback_speed: float = 1.0):
    """FlyGym ``RecordedTrajectory`` s (one per world) from a flycuda recording's qpos,
    so FlyGym's ``render_trajectories`` / ``render_trajectories_gpu`` render it.

    ``worlds``: indices (default all); ``playback_speed``: FlyGym's (the video shows
    ``playback_speed`` simulated seconds per second at one frame per sample)."""
    require()
    from flygym.recording import RecordedTrajectory  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))


    rec = recording if isinstance(recording, Recording) else Recording.open(recording)
    if "qpos" not in rec.names:
        raise FlyGymError("the recording has no qpos (record it with --observe qpos@30hz)")
    qpos = rec["qpos"]
    ids = parse_worlds(slice(None) if worlds is None else worlds, qpos.shape[0])
    interval = rec.every("qpos") * float(rec.info["timestep"])
    fps = playback_speed / interval
    if abs(fps - round(fps)) > 1e-6 * fps:
        raise FlyGymError(f"FlyGym's output_fps is an integer: qpos sampled every {interval:g} s at playback speed "
                          f"{playback_speed:g} gives {fps:g} frames per second")
    times = rec.times("qpos")
    return [RecordedTrajectory(time=times, qpos=np.asarray(qpos[w]), output_fps=int(round(fps)),
                               playback_speed=float(playback_speed), world_id=int(w)) for w in ids]


def from_trajectories(trajectories, store, mj_model, *, timestep: float, model: str = "neuromechfly",
                      camera: str | None = None, overwrite: bool = False):
    """A flycuda recording (a store with one qpos array, world = trajectory) from FlyGym
    ``RecordedTrajectory`` s of one model, so ``flycuda render`` draws FlyGym's
    recordings. Their frames must be ``timestep`` multiples apart (FlyGym's frame
    clock: ``playback_speed / output_fps`` seconds) and equally many."""

    trajs = list(trajectories)
    if not trajs:
        raise FlyGymError("no trajectories given")
    frames = {t.qpos.shape[0] for t in trajs}
    intervals = {t.playback_speed / t.output_fps for t in trajs}
    if len(frames) != 1 or len(intervals) != 1:
        raise FlyGymError(f"trajectories must share their frame count and rate, got {sorted(frames)} frames and "
                          f"{sorted(intervals)} s per frame")
    every = round(intervals.pop() / timestep)
    if every < 1 or any(t.qpos.shape[1] != mj_model.nq for t in trajs):
        raise FlyGymError(f"trajectories do not fit the model (nq={mj_model.nq}) and timestep {timestep:g}")
    n = frames.pop()
    labels = qpos_labels(mj_model, velocity=False)
    spec = zstore.ArraySpec("qpos", len(trajs), n, labels, every, 1, n, f"qpos@{every}")
    group = zstore.create(store, [spec], dict(timestep=timestep, worlds=len(trajs), steps=(n - 1) * every,
                                              model=model, camera=camera, source="flygym.RecordedTrajectory"),
                          overwrite=overwrite)
    for w, t in enumerate(trajs):
        group["qpos"][w:w + 1] = np.asarray(t.qpos, dtype=np.float32)[None]
    zstore.mark(group, complete=True, status="complete", rows_written={"qpos": n})
    return Recording(group)
