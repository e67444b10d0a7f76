"""The whole brain: the FlyWire connectome's leaky integrate-and-fire model (Shiu et al., Nature
2024; philshiu/Drosophila_brain_model ``model.py``) for many brains at once, equal to Brian2.

* :class:`Model`: model.py's parameters and Brian2's exact update constants;
* :class:`Connectome`: FlyWire v783's files (``Connectome.load(folder)``) or :func:`synthetic`;
* :class:`Brains`: B brains on the device, stepped by :func:`flycuda.ops.brain_step`;
* :func:`run`: activation and silencing experiments, trials as brains of one batch.
"""

from .brains import Brains, Spikes
from .connectome import Connectome, synthetic
from .experiment import Experiment, run
from .model import Model

__all__ = ["Model", "Connectome", "synthetic", "Brains", "Spikes", "run", "Experiment"]
