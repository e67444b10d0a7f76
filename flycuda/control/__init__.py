"""The fly's motor interface: FlyGym's walking controllers for every world at once.

* :mod:`.steps`: FlyGym's preprogrammed leg steps (periodic cubic splines of its step data);
* :mod:`.cpg`: the central pattern generator's parameters (six coupled oscillators per world);
* :mod:`.hybrid`: :class:`CPGController`, :class:`HybridController` (retraction and stumbling
  rules, adhesion) and :class:`HybridTurningController` (two descending drives), each a batch
  of FlyGym's own (``flygym_demo.complex_terrain``), equal to it world by world;
* :mod:`.rules`: :class:`RuleBasedController` (Walknet's leg-coordination rules; each world
  its own random stream, as FlyGym's instance);
* :mod:`.export`: the step data written from FlyGym's own (FlyGym lane).

Every step is one launch of a device op, :func:`flycuda.ops.hybrid_step` or
:func:`flycuda.ops.rule_step` (CPU or CUDA; capturable), whose references are in
:mod:`flycuda.reference.walking`. FlyGym is not
needed to run it.
"""

from ..errors import ControlError
from .cpg import CPGParams, tripod_params
from .hybrid import CPGController, HybridController, HybridTurningController
from .rules import RuleBasedController
from .steps import LEGS, STEP_DURATION, load_steps, locomotion_dof_names

__all__ = ["CPGController", "HybridController", "HybridTurningController", "RuleBasedController", "CPGParams",
           "tripod_params", "LEGS", "STEP_DURATION", "load_steps", "locomotion_dof_names", "ControlError"]
