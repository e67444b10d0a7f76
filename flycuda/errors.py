"""flycuda's errors: every one derives from :class:`FlycudaError` (a ``ValueError``:
what the user asked for cannot be done), so a caller catches them all at once; the
``flycuda`` command prints one line and exits 2 on any of them.

Errors from the ops themselves (bad tensors) are torch's ``RuntimeError``s raised
by the C++ checks, or ``ValueError``s from the Python wrappers; both name the
argument, what was expected and what was got.
"""

from __future__ import annotations

import importlib.util

__all__ = ["FlycudaError", "BridgeError", "FlyGymError", "MotionError", "SplineError", "ObservableError",
           "StoreError", "RecordingError", "RenderError", "SceneError", "VisionError", "ReplayError", "ControlError",
           "RankError", "CaptureError", "CaptureAllocationError", "ConditionalCaptureError", "EnvError",
           "MissingDependencyError"]


class FlycudaError(ValueError):
    """The base of every flycuda error."""


# --- sim ------------------------------------------------------------------------------

class BridgeError(FlycudaError):
    """A model, device or name mapping that the MuJoCo Warp worlds cannot use."""


class FlyGymError(BridgeError):
    """FlyGym is missing or too old for this Python, or a FlyGym object flycuda cannot use."""


class MotionError(FlycudaError):
    """A recording that cannot be used (missing file, bad shape, names, fps)."""


class CaptureError(FlycudaError, RuntimeError):
    """A CUDA graph that cannot be captured as asked (the legacy default stream, torch's
    and Warp's streams differ)."""


class CaptureAllocationError(CaptureError):
    """torch's caching allocator allocated memory while a CUDA graph was being captured."""


class ConditionalCaptureError(FlycudaError, RuntimeError):
    """CUDA or Warp could not make a conditional graph node (:func:`flycuda.sim.streams.run_if`)
    of work that captures fine on its own: an old driver, or a node type a conditional body
    cannot hold. (An error of the work itself is raised as it is.)"""


# --- ops ------------------------------------------------------------------------------

class SplineError(FlycudaError):
    """Angles that cannot be splined (wrong rank, no frames, non-finite values)."""


# --- recording ------------------------------------------------------------------------

class ObservableError(FlycudaError):
    """An observable that cannot be recorded (unknown kind or name, bad rate)."""


class StoreError(FlycudaError):
    """A store that cannot be created, opened or written."""


class RecordingError(FlycudaError):
    """A recording that cannot be read as asked (missing array, incomplete store)."""


# --- render and vision ----------------------------------------------------------------

class RenderError(FlycudaError):
    """Bad render settings (size, camera, output path)."""


class SceneError(FlycudaError):
    """A scene the renderer cannot draw (e.g. a BVH deeper than the traversal stack)."""


class VisionError(FlycudaError):
    """A model without eye cameras, a retina that does not fit them, bad worlds."""


# --- replay ---------------------------------------------------------------------------

class ReplayError(FlycudaError):
    """Bad replay settings (worlds, duration, offsets, ...)."""


class RankError(ReplayError):
    """A rank of a torchrun replay failed (``rank``: the rank raising it; every rank raises it,
    rank 0 names the cause first)."""

    def __init__(self, message: str, rank: int):
        super().__init__(message)
        self.rank = rank


# --- control --------------------------------------------------------------------------

class ControlError(FlycudaError):
    """Bad input to a walking controller (drives or sensory inputs of the wrong shape, dtype
    or device; an unknown controller)."""


# --- env ------------------------------------------------------------------------------

class EnvError(FlycudaError):
    """Bad environment settings or input (unknown task, model or observation; actions of the
    wrong shape, dtype or device, or not finite)."""


# --- optional dependencies -------------------------------------------------------------

class MissingDependencyError(FlycudaError, ImportError):
    """An output asked for needs a package that is not installed (an extra of flycuda's)."""


def installed(module: str) -> bool:  # (not in __all__, which lists the errors)
    """Whether ``module`` is an installed module or package. A bare folder of that name on
    ``sys.path`` does not count: Python would import it as an empty namespace package (the
    tests' own ``tests/flygym`` did, as "flygym", where FlyGym was missing)."""
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.origin is not None


def require(module: str, what: str, extra: str) -> None:  # (not in __all__, which lists the errors)
    """Raises :class:`MissingDependencyError` when ``module`` cannot be imported, naming
    what needs it and the extra that installs it (checked before a run, not after)."""
    if not installed(module):
        raise MissingDependencyError(f"{what} needs {module}, which is not installed: pip install "
                                     f"\"flycuda[{extra}]\" (or pip install {module})")
