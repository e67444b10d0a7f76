"""The vision stage of a replay: every world's ommatidia readouts, recorded at a chosen rate.

    flycuda replay --model neuromechfly --vision exact@500hz --out out/
    replay(model, motion, vision="fast:4@100hz", record="out.zarr")

SPEC is ``MODE[:K][@RATE]``: MODE ``exact`` (FlyGym's readout of flycuda's eye
images, :class:`flycuda.vision.Vision`) or ``fast`` with K rays per ommatidium
(default 4); RATE ``@STEPS`` or ``@HZhz`` (default 500 Hz). At every sample's step
(between graph launches: the replay never runs a launch across one) the stage runs
:meth:`Vision.update` (render the eyes' pixels, pool them) and records the readouts
into the recording's ring with ``record_chunk`` at the device step counter; on CUDA
(graphs on) those launches (and the network's, when observed) are captured into one CUDA
graph next to the step's graph, after the first (eager, checked) sample, and its samples are timed with CUDA
events (no host synchronization). The readouts stream to the store as the array ``vision`` [world, time,
2 * O * 2] (attrs ``sample_shape`` [2, O, 2]: eye (left, right), ommatidium,
(yellow, pale)), chunk by chunk like every observable: nothing of size
[worlds, samples, ...] is ever held. Like FlyGym's ``get_ommatidia_readouts`` after a
step, the eyes see the geom and camera poses MuJoCo computed during that step (from
the state at its start). With graphs of K steps per launch the rate must be a multiple
of K steps (no launch runs across a sample).
"""

from __future__ import annotations

import collections
import time

import torch

from ..errors import ReplayError, VisionError
from ..recording.observables import CONNECTOME_KINDS, Observable
from ..sim import streams
from ..sim.stepper import Stage, due_room
from .eye_network import DEFAULT_CELL_TYPES, EyeNetworks
from .eyes import Vision, readout_names
from .spec import DEFAULT_HZ, VisionSpec, parse_vision

__all__ = ["VisionSpec", "VisionStage", "parse_vision", "DEFAULT_HZ"]  # the grammar: flycuda.vision.spec

class VisionStage(Stage):
    """The eyes of every world sampled every ``spec.steps`` steps into the replay's
    recording (see the module's text): a stage of :func:`flycuda.sim.stepper.run_stages`,
    its eyes built at the loop's set-up. ``retina``: the :class:`flycuda.vision.RetinaMap`
    (default FlyGym's). ``connectome``: a parsed ``connectome[:TYPES]`` or
    ``connectome_columns[:TYPES]`` observable (:mod:`flycuda.recording.observables`): flyvis's
    network behind the eyes (:class:`flycuda.vision.eye_network.EyeNetworks`, from the grey steady
    state, one step of the eyes' period per sample on its readouts) recorded as ``connectome``;
    ``checkpoint``: its flyvis checkpoint (None: the connectome's initial parameters)."""

    def __init__(self, spec, retina=None, connectome=None, checkpoint=None):
        self.spec = parse_vision(spec)
        self.retina = retina
        self.connectome, self.checkpoint = connectome, checkpoint  # the network's observable (a Spec), or None
        self.network = None
        self.sim = self.step = self.vision = self.recorder = None
        self.every = 0
        self.samples = 0
        self._graph = None
        self._seconds = 0.0
        self._events: collections.deque = collections.deque()  # CUDA: (start, end) of samples not yet summed

    def setup(self, loop) -> None:
        """The eyes of ``loop.sim``'s worlds; with graphs of K steps, the rate must be a
        multiple of K steps (no launch runs across a sample)."""
        self.sim, self.step = loop.sim, loop.step
        self.every = self.spec.steps(loop.sim.timestep)
        K = loop.options.per_launch
        if loop.graphs and self.every % K:
            raise ReplayError(f"vision every {self.every} steps ({self.spec}) is not a multiple of "
                              f"steps_per_graph={K}: a graph launch would run across a sample; "
                              f"choose a rate of k x {K} steps or fewer steps per graph")
        self.vision = Vision(loop.sim, mode=self.spec.mode, k=self.spec.k, retina=self.retina)
        if self.connectome is not None:
            self.network = self._network(loop.sim.timestep * self.every)

    def _network(self, dt: float) -> EyeNetworks:
        """flyvis's network behind the eyes, one step of ``dt`` (the eyes' period) per sample."""
        c = self.connectome
        try:
            return EyeNetworks(self.vision, dt, c.names or DEFAULT_CELL_TYPES, CONNECTOME_KINDS[c.kind],
                               checkpoint=self.checkpoint)
        except VisionError as e:
            raise ReplayError(f"observe {c}: {e}") from None

    def observables(self, loop) -> list:
        return [self.observable()] + ([self.network_observable()] if self.network is not None else [])

    def network_observable(self) -> Observable:
        """The network's observed voltages as the observable ``connectome`` ([W, 2 * K]: eyes,
        then cell types, then columns), one network step per sample on its readouts."""
        n = self.network
        W, _, K = n.out.shape
        attrs = {"cell_types": list(n.cell_types), "observed_columns": n.columns, "dt": n.net.dt,
                 "units": "voltage (flyvis's units; its activity)", "checkpoint": self.checkpoint}
        return Observable("connectome", "connectome", n.out.view(W, -1),
                          torch.arange(2 * K, dtype=torch.int32, device=n.out.device), n.names, self.every,
                          str(self.connectome), update=self._network_update, attrs=attrs)

    def _network_update(self) -> None:
        self.network.advance(1)
        self.network.observe()

    def observable(self) -> Observable:
        """The readouts as an observable ``vision``: [W, 2 * O * 2] float32, recorded
        by this stage (``update``), not inside the steps."""
        return readouts_observable(self.vision, self.every, f"vision:{self.spec}", update=self.vision.update)

    def attach(self, recorder) -> None:
        """The replay's recorder, which holds the ``vision`` ring."""
        self.recorder = recorder

    def room(self, loop, done: int) -> int:
        return due_room(self.every, loop.steps, done)

    def after(self, loop, done: int) -> None:
        """The sample of step ``done`` when one is due; at the initial state kept as given
        (no warm-up), the eyes' poses from that state, not stale ones."""
        if done == 0 and loop.options.keep_state and not loop.options.warmup_steps:
            self.sim.kinematics()
        self.sample(done)

    def state(self, loop) -> dict:
        """The network's voltages (the eyes' readouts are sampled anew; the recorder keeps the
        samples taken)."""
        return {"voltages": self.network.net.voltages.cpu().clone()} if self.network is not None else {}

    def restore(self, loop, state: dict) -> None:
        if (self.network is not None) != ("voltages" in state):
            raise VisionError("the snapshot's eyes and this run's differ in having flyvis's network behind them")
        if self.network is not None:
            self.network.net.voltages.copy_(state["voltages"])

    def next_due(self, done: int) -> int:
        """The next step after ``done`` at which a sample is due."""
        return (done // self.every + 1) * self.every

    def sample(self, done: int) -> None:
        """The sample of step ``done`` when one is due (the device counter equals
        ``done``): a launch of the captured graph once :meth:`capture` made it, else
        eager (the first one checks the scene and pixel ids)."""
        if done % self.every:
            return
        cuda = self.sim.device.type == "cuda"
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        if self._graph is not None:
            streams.launch_graph(self._graph)
        else:
            self._record()
        if cuda:
            end.record()
            self._events.append((start, end))
            self._sum_events(wait=False)
        else:
            self._seconds += time.perf_counter() - t0
        self.samples += 1

    @property
    def seconds(self) -> float:
        """Time spent on samples (device time between CUDA events on CUDA; waits for
        the samples still running)."""
        self._sum_events(wait=True)
        return self._seconds

    def _sum_events(self, wait: bool) -> None:
        while self._events and (wait or self._events[0][1].query()):
            start, end = self._events.popleft()
            end.synchronize()
            self._seconds += start.elapsed_time(end) / 1e3

    def capture(self, loop=None) -> None:
        """Captures a sample (render, pool, record_chunk) into a CUDA graph that later
        samples launch; call after the first sample, on the replay's shared stream."""
        self.vision.renderer.prepare_capture()
        self._graph = streams.capture_graph(self._record, self.sim.wp_device)

    def _record(self) -> None:
        self.recorder.record_updated(self.step, "vision")
        if self.network is not None:  # on the readouts just updated
            self.recorder.record_updated(self.step, "connectome")

    def device_bytes(self) -> int:
        """Device memory of the stage: eye pixels, readouts, the renderer's scene
        (meshes, BVHs) and per-world BVH workspace, the pixel list, the pooling map, and
        flyvis's network when observed (the recording's ring not included)."""
        v, r = self.vision, self.vision.renderer
        ts = [v.pixels, v.readouts, r.top_boxes, r.pixels, *v.map.args(), v.map.raw_pixels, *r.scene.tensors()]
        if self.network is not None:
            ts += self.network.tensors()
        seen, n = set(), 0
        for t in ts:
            if t is not None and t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                n += t.numel() * t.element_size()
        return n


def readouts_observable(v, every: int, spec: str, update=None) -> Observable:
    """A :class:`flycuda.vision.Vision`'s readouts as the observable ``vision`` ([W, 2 * O * 2]
    float32 with the attributes ``flycuda render`` reads to draw each world's eyes), sampled
    every ``every`` steps; ``update``: what computes them at a sample (None: they are fresh
    at every step, as in flycuda.env)."""
    S, E, O, K = v.readouts.shape
    names = readout_names(O)
    attrs = {"sample_shape": [E, O, K], "dims": ["eye", "ommatidium", "type"], "eyes": ["left", "right"],
             "types": ["yellow", "pale"], "cameras": list(v.cameras), "mode": v.mode,
             "k": v.k if v.mode == "fast" else None, "rays_per_readout": v.rays_per_readout}
    columns = torch.arange(E * O * K, dtype=torch.int32, device=v.readouts.device)
    return Observable("vision", "vision", v.readouts.view(S, -1), columns, names, every, spec, update=update,
                      attrs=attrs)
