"""The eyes of every world: FlyGym's compound-eye readouts computed on the device.

* :mod:`.retina`: :class:`RetinaMap` (FlyGym's ommatidia id map, pale mask, fisheye
  lookup) and its exact and fast :class:`PoolingMap` s;
* :mod:`.eyes`: :class:`Vision` (eye cameras traced at the retina's raw pixels by the
  tile renderer, pooled by ``pool_ommatidia``), and drawing the eyes under a mosaic;
* :mod:`.spec`: the one grammar of a vision spec (``exact``, ``fast:K``, ``@RATE``);
* :mod:`.stage`: ``VisionStage``, the eyes sampled at a rate inside a replay's step;
* :mod:`.connectome` and :mod:`.network`: flyvis's connectome-constrained network of the fly's
  motion pathway for every eye (:class:`Connectome`, :class:`ConnectomeNetwork`), fed by the eyes.
"""

from ..errors import VisionError
from .connectome import Connectome, connectome_file
from .eyes import Vision, agreement, eye_cameras, eye_strip, flygym_retina, mosaic_with_eyes
from .network import ConnectomeNetwork, flyvis_column_order, load_checkpoint, photoreceptors
from .retina import PoolingMap, RetinaMap, fisheye_lookup

__all__ = ["Vision", "RetinaMap", "PoolingMap", "fisheye_lookup", "eye_cameras", "flygym_retina", "agreement",
           "eye_strip", "mosaic_with_eyes", "VisionError", "Connectome", "connectome_file", "ConnectomeNetwork",
           "load_checkpoint", "flyvis_column_order", "photoreceptors"]
