"""The ``flycuda`` command: ``replay`` (:mod:`.replay`), ``render`` (:mod:`.render`),
``gpu-check`` (:mod:`.gpucheck`); the parser and the entry point in :mod:`.main`."""

from .main import main

__all__ = ["main"]
