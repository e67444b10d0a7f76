"""Motion input: recorded joint angles (.npz), the built-in tripod gait, snippets.

A :class:`Motion` holds joint angles ``angles`` float32 [T, D] (one recording) or
[M, T, D] (one per world, e.g. a pre-expanded buffer), their frame rate ``fps``
and the DOF names. It becomes the ``motion`` argument of
:func:`flycuda.motion_to_ctrl`, which samples it at the simulation rate on the
device (``frames_per_step = fps * timestep``): the recording never has to be
expanded to [W, steps, D]. :meth:`Motion.spline` gives the cubic pieces that
:func:`flycuda.spline_to_ctrl` evaluates instead (FlyGym's cubic resampling).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import MotionError, ReplayError
from ..ops.spline import spline_coeffs
from .hexapod import DOF_NAMES, LEG_DOFS, LEGS

DEFAULT_FPS = 330.0


@dataclass
class Motion:
    """Joint angles ``angles`` [T, D] or [M, T, D] at ``fps`` frames/s, named ``dof_names``.

    ``angles64`` (optional, same shape, float64) keeps the frames at full precision
    for :meth:`spline` (FlyGym splines its float64 angles); without it the spline
    is made from ``angles``.
    """

    angles: torch.Tensor
    fps: float
    dof_names: tuple[str, ...]
    angles64: torch.Tensor | None = None

    def __post_init__(self):
        a = torch.as_tensor(self.angles, dtype=torch.float32)
        if a.dim() not in (2, 3) or a.shape[-2] < 1:
            raise MotionError(f"motion angles must be [T, D] or [M, T, D] with T >= 1, got shape {tuple(a.shape)}")
        self.angles = a.contiguous()
        if not (isinstance(self.fps, (int, float)) and math.isfinite(self.fps) and self.fps > 0):
            raise MotionError(f"motion fps must be a positive number, got {self.fps!r}")
        self.fps = float(self.fps)
        self.dof_names = tuple(str(n) for n in self.dof_names)
        if len(self.dof_names) != a.shape[-1]:
            raise MotionError(f"motion has {a.shape[-1]} DOFs but {len(self.dof_names)} dof_names")
        if len(set(self.dof_names)) != len(self.dof_names):
            raise MotionError("motion dof_names repeat a name")
        if self.angles64 is not None:
            a64 = torch.as_tensor(self.angles64, dtype=torch.float64).contiguous()
            if a64.shape != a.shape:
                raise MotionError(f"motion angles64 must have the shape of angles {tuple(a.shape)}, "
                                  f"got {tuple(a64.shape)}")
            self.angles64 = a64
        self._spline = None

    @property
    def num_frames(self) -> int:
        return self.angles.shape[-2]

    @property
    def duration(self) -> float:
        """Seconds covered by the recording (frame 0 to frame T-1)."""
        return (self.num_frames - 1) / self.fps

    def as_buffer(self) -> torch.Tensor:
        """float32 [M, T, D] contiguous, as motion_to_ctrl takes it."""
        return self.angles if self.angles.dim() == 3 else self.angles.unsqueeze(0)

    def spline(self) -> torch.Tensor:
        """float64 [M, T, 4, D] cubic pieces (not-a-knot, as FlyGym's resampling), as
        :func:`flycuda.spline_to_ctrl` takes them; computed once (CPU tensor)."""
        if self._spline is None:
            self._spline = spline_coeffs(self.angles64 if self.angles64 is not None else self.angles)
        return self._spline


def load_motion(path: str) -> Motion:
    """Loads a recording from .npz.

    Keys: ``angles`` [T, D] or [T, legs, dofs_per_leg] (or [M, T, D], a
    pre-expanded per-world buffer), ``fps`` (scalar) and ``dof_names`` ([D], or
    [legs, dofs_per_leg] matching a 3-D ``angles``). ``joint_angles`` is accepted
    for ``angles``.
    """
    if not os.path.isfile(path):
        raise MotionError(f"motion file not found: {path}")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any unreadable file is a MotionError
        raise MotionError(f"cannot read motion file {path}: {e}") from None
    keys = set(data.files)
    akey = "angles" if "angles" in keys else "joint_angles" if "joint_angles" in keys else None
    missing = [k for k, ok in (("angles", akey), ("fps", "fps" in keys), ("dof_names", "dof_names" in keys)) if not ok]
    if missing:
        raise MotionError(f"motion file {path} lacks {', '.join(missing)} (has {', '.join(sorted(keys))})")
    angles = np.asarray(data[akey], dtype=np.float32)
    names = np.asarray(data["dof_names"]).astype(str)
    fps = float(np.asarray(data["fps"]).reshape(-1)[0])
    if angles.ndim == 3 and names.ndim == 2:  # [T, legs, dofs]
        if names.shape != angles.shape[1:]:
            raise MotionError(f"dof_names shape {names.shape} does not match angles {angles.shape}")
        angles = angles.reshape(angles.shape[0], -1)
    names = names.reshape(-1)
    return Motion(torch.from_numpy(angles), fps, tuple(names.tolist()))


def save_motion(path: str, motion: Motion) -> None:
    """Writes ``motion`` as .npz (keys angles, fps, dof_names), atomically."""
    tmp = path + ".tmp.npz"
    np.savez(tmp, angles=motion.angles.numpy(), fps=np.float64(motion.fps),
             dof_names=np.array(motion.dof_names))
    os.replace(tmp, path)


# Tripod gait parameters: per DOF (mean, swing amplitude, lift amplitude) in rad.
_GAIT = {
    "Coxa": (0.0, 0.30, 0.0),
    "Coxa_roll": (0.0, 0.0, 0.25),
    "Coxa_yaw": (0.0, 0.0, 0.0),
    "Femur": (0.0, 0.0, 0.35),
    "Femur_roll": (0.0, 0.0, 0.0),
    "Tibia": (0.0, 0.0, 0.30),
    "Tarsus1": (0.0, 0.0, 0.0),
}
_LEG_BIAS = {"F": 0.25, "M": 0.0, "H": -0.25}  # protraction offset per leg position


def tripod_gait(duration: float = 2.0, fps: float = DEFAULT_FPS, step_freq: float = 8.0) -> Motion:
    """A synthetic tripod gait for the built-in hexapod's 42 DOFs.

    Legs LF, RM, LH form tripod A (phase 0), RF, LM, RH tripod B (phase pi).
    With the leg phase ``phi = 2 pi step_freq t + phase``::
        swing = sin(phi)                    # -1 .. 1: back .. front
        lift  = max(0, cos(phi))            # > 0 while the leg swings forward
        angle[dof] = bias + mean[dof] + amp[dof] * swing + lift_amp[dof] * lift

    so a leg protracts (Coxa) while lifted (Coxa_roll, Femur up; Tibia flexed)
    and retracts with its foot on the floor, pushing the body forward. ``bias``
    spreads the front/hind legs (Coxa only). Frames at ``fps`` for ``duration`` s.
    """
    if not (duration > 0 and math.isfinite(duration)):
        raise MotionError(f"duration must be > 0 seconds, got {duration}")
    if not (fps > 0 and math.isfinite(fps)):
        raise MotionError(f"fps must be > 0, got {fps}")
    T = int(round(duration * fps)) + 1
    t = torch.arange(T, dtype=torch.float64) / fps
    cols = []
    for leg in LEGS:
        phase = 0.0 if leg in ("LF", "RM", "LH") else math.pi
        phi = 2 * math.pi * step_freq * t + phase
        swing, lift = torch.sin(phi), torch.clamp(torch.cos(phi), min=0.0)
        for dof in LEG_DOFS:
            mean, amp, lift_amp = _GAIT[dof]
            bias = _LEG_BIAS[leg[1]] if dof == "Coxa" else 0.0
            cols.append(bias + mean + amp * swing + lift_amp * lift)
    angles = torch.stack(cols, dim=1).to(torch.float32)
    return Motion(angles, fps, DOF_NAMES)


def snippet_offsets(motion: Motion, worlds: int, snippet: float) -> torch.Tensor:
    """Start frames (float64 [worlds]) of ``worlds`` snippets of ``snippet`` seconds,
    evenly spread over the recording (all start at 0 if it is shorter)."""
    if worlds <= 0:
        raise MotionError(f"worlds must be > 0, got {worlds}")
    if not (snippet > 0 and math.isfinite(snippet)):
        raise MotionError(f"snippet must be > 0 seconds, got {snippet}")
    last_start = max(0.0, (motion.num_frames - 1) - snippet * motion.fps)
    if worlds == 1:
        return torch.zeros(1, dtype=torch.float64)
    return torch.linspace(0.0, last_start, worlds, dtype=torch.float64).round()


def offsets_from_seconds(motion: Motion, seconds: list[float], worlds: int) -> torch.Tensor:
    """Start frames from start times in seconds: one per world, or one repeated."""
    if len(seconds) not in (1, worlds):
        raise MotionError(f"--offsets needs 1 or {worlds} (= worlds) start times, got {len(seconds)}")
    vals = [float(s) for s in seconds]
    if not all(math.isfinite(v) for v in vals):
        raise MotionError(f"offsets must be finite seconds, got {seconds}")
    out = torch.tensor(vals, dtype=torch.float64) * motion.fps
    return out.expand(worlds).clone() if len(vals) == 1 else out


def motion_window(motion: Motion, worlds: int, duration=None, snippet=None, offsets=None) -> tuple[float, torch.Tensor]:
    """What ``worlds`` worlds replay of ``motion``: (the simulated seconds, float64 [worlds]
    start frames), each checked (see :func:`check_duration`, :func:`resolve_offsets`,
    :func:`check_motion_worlds`)."""
    seconds = check_duration(motion, duration, snippet)
    offs = resolve_offsets(motion, worlds, snippet, offsets)
    check_motion_worlds(motion, worlds)
    return seconds, offs


def check_duration(motion: Motion | None, duration, snippet) -> float:
    """The simulated seconds: ``duration``, else the snippet length, else the recording's
    (``motion`` is read only then)."""
    if duration is None:
        duration = snippet if snippet is not None else motion.duration
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise ReplayError(f"duration must be > 0 seconds, got {duration!r}")
    return duration


def check_motion_worlds(motion: Motion, worlds: int) -> None:
    """A per-world motion buffer must have one recording per world."""
    if motion.angles.dim() == 3 and motion.angles.shape[0] not in (1, worlds):
        raise MotionError(f"a per-world motion buffer must have {worlds} (= worlds) recordings, "
                          f"got {motion.angles.shape[0]}")


def resolve_offsets(motion: Motion, worlds: int, snippet=None, offsets=None) -> torch.Tensor:
    """float64 [worlds] start frame of each world: from ``offsets`` (seconds: one or one per
    world; or a float64 tensor of frames), from evenly spread ``snippet`` starts, or 0."""
    if offsets is not None and snippet is not None:
        raise ReplayError("give snippet or offsets, not both")
    if offsets is not None:
        if isinstance(offsets, torch.Tensor):
            if offsets.shape != (worlds,):
                raise ReplayError(f"offsets must have shape [{worlds}] (frames), got {tuple(offsets.shape)}")
            return offsets.to(torch.float64)
        return offsets_from_seconds(motion, list(offsets), worlds)
    if snippet is not None:
        return snippet_offsets(motion, worlds, snippet)
    return torch.zeros(worlds, dtype=torch.float64)
