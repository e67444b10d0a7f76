"""The worlds: MuJoCo Warp models and data with zero-copy torch views, and what drives them.

* :mod:`.mjwarp`: :class:`Sim`, an mjw Model/Data pair with zero-copy torch views
  (``sim.view("ctrl")``), built from MJCF or wrapping an existing pair;
* :mod:`.hexapod`: the built-in fly-like hexapod (no FlyGym needed);
* :mod:`.motion`: :class:`Motion` recordings, the tripod gait, world start frames;
* :mod:`.streams`: torch and Warp on one CUDA stream, graph capture;
* :mod:`.stepper`: the step loop: stages around the physics, launches of K steps (CUDA graphs),
  host work between them;
* :mod:`.bodies`: a task's objects added to a model's spec before it is compiled;
* :mod:`.preempt`: SIGTERM / SIGINT noted and acted on between launches (:class:`Preempted`).

FlyGym's NeuroMechFly lives one floor up (:mod:`flycuda.flygym`), and the models by name
(the resolver of what each brings) in :mod:`flycuda.worlds`.

Warp is imported on first use (``Sim.build``), never by importing this package.
"""

from ..errors import BridgeError, CaptureAllocationError, CaptureError, FlyGymError, MotionError
from .hexapod import fly_model
from .mjwarp import Sim
from .motion import Motion, load_motion, save_motion, tripod_gait
from .preempt import Preempted, preemptible
from .stepper import LoopOptions, LoopStats, Stage, run_stages

__all__ = ["Sim", "Motion", "load_motion", "save_motion", "tripod_gait", "fly_model", "Stage", "run_stages",
           "LoopOptions", "LoopStats", "BridgeError", "FlyGymError", "MotionError", "CaptureError",
           "CaptureAllocationError", "Preempted", "preemptible"]
