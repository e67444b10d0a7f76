"""The main job: replay recorded fly motion in N worlds, recording and rendering as it goes.

* :mod:`.settings`: :class:`ReplaySettings`, the checks of what was asked, each world's start frame;
* :mod:`.entry`: :func:`replay`: the worlds resolved (:mod:`flycuda.worlds`), the stages built
  and run by :func:`flycuda.sim.stepper.run_stages`;
* :mod:`.stages`: the targets into the controls, the recording and its store, the frames;
* :mod:`.job`: :func:`run_job`, a replay with its outputs as ``flycuda replay`` runs it (one
  process or a torchrun rank's share);
* :mod:`.results`: :class:`ReplayResult` and its report;
* :mod:`.playback`: a recording rendered afterwards (``flycuda render``);
* :mod:`.plot`: the joint-angle plot; :mod:`.distributed`: torchrun ranks.
"""

from ..errors import ReplayError
from .entry import replay
from .job import Outputs, run_job
from .playback import render_recording
from .plot import plot_tracking
from .results import ReplayResult, tracking_rmse
from .settings import ReplaySettings

__all__ = ["replay", "run_job", "Outputs", "ReplaySettings", "ReplayResult", "ReplayError", "render_recording", "plot_tracking", "tracking_rmse"]
