"""Recording what the worlds do: observables, the device rings and their stream to a zarr
store, and reading a recording back.

* :mod:`.observables`: what can be recorded (``KIND[:NAMES][@EVERY]``) and its columns;
* :mod:`.recorder`: :class:`Recorder`, every observable's ring of device chunks,
  filled by ``record_chunk`` inside the step and streamed out between launches;
* :mod:`.store`: the zarr v3 store and its writer thread;
* :mod:`.reader`: :class:`Recording` (reads a store lazily) and :class:`Target`
  (where a replay's recording goes);
* :mod:`.sink`: the one way a store is opened and closed (a replay's, a LoopRecorder's);
* :mod:`.loop_recorder`: :class:`LoopRecorder`, the same for a loop of one's own (a controller, a CPG);
* :mod:`.plume`: odor plumes on disk (:class:`Plume`, :func:`save_plume`, :func:`load_plume`);
* :mod:`.progress`: how far a store's run got (rows written, the step they reach, a heartbeat);
  :mod:`.runs`: :func:`open_run`, which reads the run's state and the valid prefix of every array.
"""

from ..errors import ObservableError, RecordingError, StoreError
from .loop_recorder import LoopRecorder
from .observables import Observable, parse, resolve
from .plume import Plume, load_plume, save_plume
from .reader import Recording, Target, parse_worlds
from .recorder import Recorder
from .runs import Run, open_run

__all__ = ["Recording", "Target", "Recorder", "LoopRecorder", "Observable", "parse", "resolve", "parse_worlds", "RecordingError",
           "ObservableError", "StoreError", "Plume", "save_plume", "load_plume", "Run", "open_run"]
