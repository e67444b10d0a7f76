"""The worlds: MuJoCo Warp models and data with zero-copy torch views, and what drives them.

* :mod:`.mjwarp`: :class:`Sim`, an mjw Model/Data pair with zero-copy torch views
  (``sim.view("ctrl")``), built from MJCF or wrapping an existing pair;
* :mod:`.hexapod`: the built-in fly-like hexapod (no FlyGym needed);
* :mod:`.motion`: :class:`Motion` recordings, the tripod gait, world start frames;
* :mod:`.streams`: torch and Warp on one CUDA stream, graph capture;
* :mod:`.flygym`: FlyGym's NeuroMechFly, GPUSimulation and Spotlight clip (also ``flycuda.flygym``);
* :mod:`.worlds`: the models by name, one table for the CLI and Python.

Warp is imported on first use (``Sim.build``), never by importing this package.
"""

from ..errors import BridgeError, CaptureAllocationError, CaptureError, FlyGymError, MotionError
from .hexapod import fly_model
from .mjwarp import Sim
from .motion import Motion, load_motion, save_motion, tripod_gait
from .worlds import NAMED_MODELS, NAMED_MOTIONS, build_worlds

__all__ = ["Sim", "Motion", "load_motion", "save_motion", "tripod_gait", "fly_model", "build_worlds",
           "NAMED_MODELS", "NAMED_MOTIONS", "BridgeError", "FlyGymError", "MotionError", "CaptureError",
           "CaptureAllocationError"]
