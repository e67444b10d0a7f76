"""``flycuda.flygym`` is :mod:`flycuda.sim.flygym` (FlyGym's NeuroMechFly next to flycuda),
kept at this name because users import it so."""

import sys

from .sim import flygym as _module

sys.modules[__name__] = _module
