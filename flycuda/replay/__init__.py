"""The main job: replay recorded fly motion in N worlds, recording and rendering as it goes.

* :mod:`.settings`: the checks of what was asked, each world's start frame;
* :mod:`.run`: :func:`replay` (initial state, warm-up, graph capture, the timed loop);
* :mod:`.results`: :class:`ReplayResult` and its report;
* :mod:`.vision_stage`: the eyes sampled during a replay (``vision=``);
* :mod:`.playback`: a recording rendered afterwards (``flycuda render``);
* :mod:`.plot`: the joint-angle plot; :mod:`.distributed`: torchrun ranks.
"""

from ..errors import ReplayError
from .playback import render_recording
from .plot import plot_tracking
from .results import ReplayResult, tracking_rmse
from .run import replay
from .settings import ReplaySettings

__all__ = ["replay", "ReplaySettings", "ReplayResult", "ReplayError", "render_recording", "plot_tracking", "tracking_rmse"]
