"""The ``flycuda`` command: ``replay`` (:mod:`.replay`), ``render`` (:mod:`.render`), ``env``
(:mod:`.env`), ``doctor`` (:mod:`.doctor`), ``gpu-check`` (:mod:`.gpucheck`); each maps its
options onto the package's API. The parser and the entry point: :mod:`.main`."""

from .main import main

__all__ = ["main"]
