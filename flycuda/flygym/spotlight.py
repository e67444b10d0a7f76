"""FlyGym's Spotlight clip as a flycuda :class:`Motion` (FlyGym's preprocessing, its DOF order),
and the per-world targets FlyGym's GPU tutorial expands it into, for comparisons."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import FlyGymError
from ..sim.motion import Motion
from . import frozen
from .bridge import TIMESTEP, available, position_dofs, require

__all__ = ["spotlight", "flygym_targets", "tutorial_buffer", "tutorial_offsets", "clip_frames", "SPOTLIGHT_FPS"]

SPOTLIGHT_FPS = 330.0
"""The bundled Spotlight clip's frame rate (checked against the file)."""


def _spotlight_snippet():
    require()
    from flygym_demo.spotlight_data import MotionSnippet  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

    return MotionSnippet()


def _reorder(snippet, dofs, angles: np.ndarray) -> np.ndarray:
    """[T, 6, 7] -> [T, D] in FlyGym's order (as ``MotionSnippet.get_joint_angles``)."""
    pairs = []
    for dof in dofs:
        try:
            pairs.append((snippet.legs.index(dof.child.pos),
                          snippet.dofs_per_leg.index((dof.parent.link, dof.child.link, dof.axis.value))))
        except (ValueError, AttributeError):
            raise FlyGymError(f"DOF {getattr(dof, 'name', dof)!r} is not in the Spotlight clip "
                              f"(it has legs {snippet.legs} x {len(snippet.dofs_per_leg)} DOFs)") from None
    idx = np.array(pairs, dtype=np.int64)
    return angles[:, idx[:, 0], idx[:, 1]]


def spotlight(fly, *, sgfilter_window_sec: float = 0.03, sgfilter_polyorder: int = 3) -> Motion:
    """FlyGym's bundled Spotlight clip at its own rate (330 Hz), as a :class:`Motion`
    in the fly's actuated-DOF order.

    The preprocessing is FlyGym's (``MotionSnippet``): right-leg roll and yaw
    flipped to the anatomical convention, then Savitzky-Golay smoothing (same
    window and order as ``get_joint_angles``). FlyGym then resamples to the
    simulation rate with a cubic spline; flycuda does that on the device
    (``replay(interp="cubic")`` / :func:`flycuda.spline_to_ctrl`) from
    ``motion.angles64``, the float64 frames kept for it.
    """
    if isinstance(fly, frozen.FrozenFly):  # no FlyGym here: the clip as FlyGym preprocessed it
        return fly.motion
    from scipy.signal import savgol_filter  # noqa: PLC0415  (lazy: scipy comes with FlyGym)

    snip = _spotlight_snippet()
    fps = float(snip.data_fps)
    if abs(fps - SPOTLIGHT_FPS) > 1e-9:  # pragma: no cover - guards a changed clip
        raise FlyGymError(f"the Spotlight clip is at {fps} Hz, flycuda expected {SPOTLIGHT_FPS}")
    window = int(sgfilter_window_sec * fps)
    window += 1 - (window % 2)
    filtered = savgol_filter(snip.joint_angles, window_length=window, polyorder=sgfilter_polyorder, axis=0)
    dofs = position_dofs(fly)
    angles = _reorder(snip, dofs, filtered)
    return Motion(torch.from_numpy(angles.astype(np.float32)), fps, tuple(d.name for d in dofs),
                  angles64=torch.from_numpy(np.ascontiguousarray(angles, dtype=np.float64)))


def flygym_targets(fly, timestep: float = TIMESTEP) -> np.ndarray:
    """FlyGym's own targets: ``MotionSnippet().get_joint_angles(timestep, order)``, the
    clip resampled to every simulation step (float64 [steps, D]); what its tutorial
    expands into the [W, steps, D] float32 buffer (a frozen fly's: those, float32). For tests and
    benchmarks."""
    if isinstance(fly, frozen.FrozenFly):
        if timestep != fly.timestep:
            raise FlyGymError(f"the frozen fly's targets are resampled at {fly.timestep} s, not {timestep} s")
        return fly.targets
    return _spotlight_snippet().get_joint_angles(timestep, position_dofs(fly))


def tutorial_buffer(fly, n_worlds: int, sim_steps: int, timestep: float = TIMESTEP) -> np.ndarray:
    """FlyGym's pre-expanded targets: float32 [n_worlds, sim_steps, D], world w replaying
    the resampled clip from step ``(w % partitions) * sim_steps`` (its tutorial's and
    benchmark's ``make_target_angles_all_worlds``). What flycuda's cubic mode avoids
    storing; for comparisons."""
    angles = flygym_targets(fly, timestep)
    parts = angles.shape[0] // sim_steps
    if parts < 1:
        raise FlyGymError(f"the clip resampled at {timestep} s has {angles.shape[0]} steps, fewer than "
                          f"sim_steps = {sim_steps}")
    buf = np.zeros((n_worlds, sim_steps, angles.shape[1]), dtype=np.float32)
    for w in range(n_worlds):
        start = (w % parts) * sim_steps
        buf[w] = angles[start:start + sim_steps]
    return buf


def clip_frames() -> int:
    """The Spotlight clip's frames (FlyGym's file; without FlyGym, the frozen clip's)."""
    return int(_spotlight_snippet().joint_angles.shape[0]) if available() else frozen.clip_frames()


def tutorial_offsets(n_worlds: int, sim_steps: int, timestep: float = TIMESTEP) -> torch.Tensor:
    """Start frames (float64 [n_worlds], at the clip's 330 Hz) of the same per-world snippets
    as :func:`tutorial_buffer`, for ``spline_to_ctrl``/``replay(offsets=...)``."""
    n_frames = clip_frames()
    n_total = len(np.arange(0, n_frames / SPOTLIGHT_FPS, timestep))  # FlyGym's output time grid
    parts = n_total // sim_steps
    if parts < 1:
        raise FlyGymError(f"the clip resampled at {timestep} s has {n_total} steps, fewer than "
                          f"sim_steps = {sim_steps}")
    starts = (np.arange(n_worlds) % parts) * sim_steps
    return torch.from_numpy(starts * timestep * SPOTLIGHT_FPS)
