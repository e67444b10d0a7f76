"""FlyGym's wing: NeuroMechFly, its ``GPUSimulation`` and its recordings next to flycuda.

For code that already has a FlyGym ``GPUSimulation``::

    from flycuda import flygym as fg
    sim = fg.wrap(gpu_sim)                      # zero-copy flycuda Sim of its mjw pair
    act_ids = fg.actuator_ids(sim, fly)         # FlyGym's actuated-DOF order
    motion = fg.spotlight(fly)                  # the bundled clip, FlyGym's preprocessing

and to build the model the way FlyGym's GPU tutorial and benchmark do: :func:`neuromechfly`
(the fly, its world and tracking camera), :func:`gpu_simulation` (on flycuda's device choice,
CPU when there is no GPU), or both at once, wrapped: :class:`Setup`.

* :mod:`.bridge`: the fly, FlyGym's simulation and its wrap, DOF order, :class:`Setup`;
* :mod:`.spotlight`: the Spotlight clip and the per-world targets of FlyGym's tutorial;
* :mod:`.trajectories`: FlyGym's ``RecordedTrajectory`` to and from a flycuda store;
* :mod:`.eyes`: FlyGym's own vision (its CPU renderer), the reference of :mod:`flycuda.vision`;
* :mod:`.senses`: the hybrid walking controllers' sensory inputs of every world, on the device
  (:class:`HybridSenses`: FlyGym's ``HybridControllerObservation.from_sim``, batched);
* :mod:`.terrain`: FlyGym's terrains (:data:`TERRAINS`) as MuJoCo Warp runs them;
* :mod:`.frozen` and :mod:`.freeze`: NeuroMechFly's worlds, clip and retina written where FlyGym
  is (``python -m flycuda.flygym.freeze DIR``), built where it cannot be installed
  (``$FLYCUDA_NEUROMECHFLY``; a GPU lease);
* :mod:`.olfaction`: FlyGym 1.x's four odor sensors (palps and antennae) on 2.x's NeuroMechFly.

FlyGym 2.x needs Python >= 3.12; everything here raises :class:`FlyGymError` (one line)
when FlyGym cannot be imported. Install with ``pip install 'flycuda[flygym]'`` (or
``bash run.sh`` on a machine with Python 3.12). This package sits above :mod:`flycuda.sim`
and :mod:`flycuda.recording`; importing it imports neither FlyGym nor Warp.
"""

from ..errors import FlyGymError
from . import frozen
from .bridge import (
                     MIN_PYTHON,
                     MODELS,
                     TIMESTEP,
                     Setup,
                     actuator_ids,
                     available,
                     can_build,
                     dof_names,
                     gpu_simulation,
                     neuromechfly,
                     position_dofs,
                     require,
                     wrap,
)
from .eyes import FlyGymEyes
from .olfaction import ODOR_SENSORS, add_odor_sensors, odor_sensor_sites
from .senses import HybridSenses
from .spotlight import SPOTLIGHT_FPS, flygym_targets, spotlight, tutorial_buffer, tutorial_offsets
from .terrain import TERRAINS
from .trajectories import from_trajectories, to_trajectories

__all__ = ["FlyGymError", "available", "can_build", "frozen", "require", "neuromechfly", "gpu_simulation", "wrap", "dof_names",
           "actuator_ids", "position_dofs", "spotlight", "flygym_targets", "tutorial_buffer", "tutorial_offsets",
           "Setup", "FlyGymEyes", "MODELS", "SPOTLIGHT_FPS", "TIMESTEP", "MIN_PYTHON", "to_trajectories",
           "from_trajectories", "HybridSenses", "TERRAINS", "ODOR_SENSORS", "add_odor_sensors",
           "odor_sensor_sites"]
