"""The main job: replay recorded fly motion in N MuJoCo Warp worlds with flycuda's ops.

One simulation step is ``[motion_to_ctrl(advance=1), mjw.step, record_qpos]``:

* ``motion_to_ctrl`` samples each world's targets from the recording at the
  device-side counter s (frame ``offsets[w] + s * fps * timestep``), writes them
  into ``ctrl`` (a zero-copy view of ``Data.ctrl``) and advances the counter to
  s + 1, all in one launch (``interp="cubic"``: ``spline_to_ctrl``, FlyGym's
  cubic resampling evaluated on the device);
* ``mjw.step`` advances the physics to time ``(s + 1) * timestep``;
* ``record_qpos`` stores the driven joint angles of that state in history row
  ``(s + 1) // record_every`` (row 0 is the initial state).

On CUDA the step (or K steps) is captured once into a CUDA graph on the stream
torch and Warp share and replayed; on the CPU it runs eagerly on Warp's CPU
device. The first step (Warp's JIT/module load) is timed apart, and a few eager
steps with synchronization measure the split physics / flycuda ops / render.
"""

from __future__ import annotations

import contextlib
import math
import resource
import time
from dataclasses import dataclass, field

import torch

from . import ops, reference, streams
from . import profile as profiling
from .bridge import Sim
from .motion import Motion, MotionError, offsets_from_seconds, snippet_offsets, tripod_gait
from .results import SETTLE_SECONDS, SPLIT_STEPS, ReplayResult, tracking_rmse

__all__ = ["replay", "ReplayResult", "ReplayError", "tracking_rmse", "SETTLE_SECONDS", "SPLIT_STEPS"]


class ReplayError(ValueError):
    """Bad replay settings (worlds, duration, offsets, ...)."""


def _sync(sim: Sim) -> None:
    if sim.device.type == "cuda":
        import warp as wp

        wp.synchronize_device(sim.wp_device)
        torch.cuda.synchronize(sim.device)


def _resolve_offsets(motion: Motion, worlds: int, snippet, offsets) -> torch.Tensor:
    if offsets is not None and snippet is not None:
        raise ReplayError("give snippet or offsets, not both")
    if offsets is not None:
        if isinstance(offsets, torch.Tensor):
            if offsets.shape != (worlds,):
                raise ReplayError(f"offsets must have shape [{worlds}] (frames), got {tuple(offsets.shape)}")
            return offsets.to(torch.float64)
        return offsets_from_seconds(motion, list(offsets), worlds)
    if snippet is not None:
        return snippet_offsets(motion, worlds, snippet)
    return torch.zeros(worlds, dtype=torch.float64)


def replay(model=None, motion: Motion | None = None, *, worlds: int = 2, duration: float | None = None,
           snippet: float | None = None, offsets=None, mode: str = "clamp", device=None,
           graph: bool = True, steps_per_graph: int = 1, record_every: int = 1,
           render_every: int = 0, renderer=None, frame_writer=None, profile: str | None = None,
           progress: bool = True, sim: Sim | None = None, nconmax: int | None = None,
           njmax: int | None = None, interp: str = "linear", act_ids: torch.Tensor | None = None,
           keep_state: bool = False, warmup: float = 0.0) -> ReplayResult:
    """Replays ``motion`` in ``worlds`` MuJoCo Warp worlds of ``model``.

    Args:
        model: MJCF path/string, ``mujoco.MjModel`` or None for the built-in hexapod.
        motion: a :class:`Motion`; None for the built-in tripod gait (2 s at 330 Hz).
        worlds: number of worlds (> 0).
        duration: simulated seconds; default the snippet length, else the recording.
        snippet: seconds per world; worlds start at evenly spread frames.
        offsets: start per world: seconds (list of 1 or ``worlds`` floats) or a
            float64 tensor of frames.
        mode: "clamp" (hold the last frame) or "loop".
        device: "cuda", "cpu" or None (CUDA when available).
        graph: capture the step in a CUDA graph (CUDA only; ignored on CPU).
        steps_per_graph: K steps per graph launch.
        record_every: record joint angles every this many steps.
        render_every: render every N steps with ``renderer`` (0: never).
        renderer: a TileRenderer or MjwRenderer (``render_mosaic() -> uint8 image``).
        frame_writer: a :class:`flycuda.render.FrameWriter` for the mosaics.
        profile: path of a torch.profiler Chrome/Perfetto trace to write.
        progress: show a tqdm progress bar.
        sim: an existing :class:`Sim` (e.g. wrapping a FlyGym mjw pair) instead of model.
        interp: "linear" (motion_to_ctrl) or "cubic" (spline_to_ctrl: the not-a-knot
            spline FlyGym resamples recordings with, from ``motion.angles64`` if set).
        act_ids: actuator per motion DOF (int [D]); default: matched by
            ``motion.dof_names`` (see :meth:`Sim.actuator_ids`).
        keep_state: start from the worlds' current state (e.g. after FlyGym's
            warm-up) instead of putting the driven joints at their first targets.
        warmup: seconds simulated before the replay with the controls held at the
            first targets (as FlyGym's ``sim.warmup()``, which lets the fly settle on
            the ground); not timed, not recorded.

    Returns:
        a :class:`ReplayResult` (its ``report()`` is what the CLI prints).
    """
    t_start = time.perf_counter()
    _check_settings(worlds, steps_per_graph, record_every, render_every, renderer, mode, interp, warmup)
    motion = motion if motion is not None else tripod_gait()
    duration = _check_duration(motion, duration, snippet)
    offs = _resolve_offsets(motion, worlds, snippet, offsets)
    if motion.angles.dim() == 3 and motion.angles.shape[0] not in (1, worlds):
        raise MotionError(f"a per-world motion buffer must have {worlds} (= worlds) recordings, "
                          f"got {motion.angles.shape[0]}")
    if sim is None:
        sim = Sim.build(model, worlds, device=device, nconmax=nconmax, njmax=njmax)
    elif sim.nworld != worlds:
        raise ReplayError(f"sim has {sim.nworld} worlds but worlds={worlds}")

    run = _Run.setup(sim, motion, offs, duration, mode, record_every, interp, act_ids)
    with streams.shared_stream(run.dev):  # torch's ops and Warp's steps in one stream order
        run.initial_state(keep_state, int(round(warmup / sim.timestep)))
    renders = _Renders(run, renderer, frame_writer, render_every)
    renders.first()
    bar = _progress_bar(progress, run.steps, worlds)
    prof_ctx = profiling.Profiler(profile, cuda=run.on_cuda) if profile else contextlib.nullcontext(None)
    with prof_ctx as prof, streams.shared_stream(run.dev):
        jit_seconds, split, split_wall = _warm_up_and_split(run, renders, t_start)
        if bar:
            bar.update(run.done)
        cuda_graph = _capture(run, graph and run.on_cuda, steps_per_graph)
        loop_wall = _timed_loop(run, renders, cuda_graph, steps_per_graph, prof, bar)
    renders.last()
    if bar:
        bar.close()
    return _results(run, renders, cuda_graph, steps_per_graph, split, split_wall + loop_wall, jit_seconds,
                     prof.summary() if prof is not None else "")


# --- set-up ------------------------------------------------------------------------

INTERPS = ("linear", "cubic")


def _check_settings(worlds, steps_per_graph, record_every, render_every, renderer, mode, interp, warmup) -> None:
    if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds <= 0:
        raise ReplayError(f"worlds must be a positive integer, got {worlds!r}")
    for name, v in (("steps_per_graph", steps_per_graph), ("record_every", record_every)):
        if not isinstance(v, int) or v < 1:
            raise ReplayError(f"{name} must be an integer >= 1, got {v!r}")
    if not isinstance(render_every, int) or render_every < 0:
        raise ReplayError(f"render_every must be an integer >= 0, got {render_every!r}")
    if render_every and renderer is None:
        raise ReplayError("render_every > 0 needs a renderer")
    if mode not in ops.MODES:
        raise ReplayError(f"mode must be 'clamp' or 'loop', got {mode!r}")
    if interp not in INTERPS:
        raise ReplayError(f"interp must be 'linear' or 'cubic', got {interp!r}")
    if isinstance(warmup, bool) or not (isinstance(warmup, (int, float)) and math.isfinite(warmup) and warmup >= 0):
        raise ReplayError(f"warmup must be >= 0 seconds, got {warmup!r}")


def _check_duration(motion: Motion, duration, snippet) -> float:
    if duration is None:
        duration = snippet if snippet is not None else motion.duration
    if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
        raise ReplayError(f"duration must be > 0 seconds, got {duration!r}")
    return duration


@dataclass
class _Run:
    """The worlds, their zero-copy views and the device buffers of one replay."""

    sim: Sim
    motion: Motion
    offs: torch.Tensor         # float64 [W] start frames (host)
    mode: str
    record_every: int
    steps: int
    interp: str                # "linear" or "cubic"
    act_ids: torch.Tensor      # [D] actuator per DOF
    adrs: torch.Tensor         # [D] qpos address per DOF
    buf: torch.Tensor          # the recording on the device: [M, T, D] or cubic pieces [M, T, 4, D]
    offs_dev: torch.Tensor
    fps_step: float            # recording frames per simulation step
    history: torch.Tensor      # [W, R, D] recorded angles
    step: torch.Tensor         # the device step counter
    done: int = 0              # steps run so far
    split: dict = field(default_factory=lambda: {"physics": 0.0, "flycuda ops": 0.0})

    @classmethod
    def setup(cls, sim: Sim, motion: Motion, offs, duration: float, mode: str, record_every: int,
              interp: str = "linear", act_ids: torch.Tensor | None = None) -> "_Run":
        dev = sim.device
        if act_ids is None:
            act_ids = sim.actuator_ids(motion.dof_names)
        act_ids = torch.as_tensor(act_ids)
        if tuple(act_ids.shape) != (len(motion.dof_names),):
            raise ReplayError(f"act_ids must have shape [{len(motion.dof_names)}] (one per motion DOF), "
                              f"got {tuple(act_ids.shape)}")
        act_ids = act_ids.to(device=dev, dtype=torch.int32)
        steps = max(1, int(round(duration / sim.timestep)))
        R = steps // record_every + 1
        buf = motion.spline() if interp == "cubic" else motion.as_buffer()
        return cls(sim=sim, motion=motion, offs=offs, mode=mode, record_every=record_every, steps=steps,
                   interp=interp, act_ids=act_ids, adrs=sim.qpos_adrs(act_ids), buf=buf.to(dev),
                   offs_dev=offs.to(dev), fps_step=motion.fps * sim.timestep,
                   history=torch.full((sim.nworld, R, len(motion.dof_names)), float("nan"), device=dev),
                   step=ops.new_step_counter(dev))

    @property
    def dev(self) -> torch.device:
        return self.sim.device

    @property
    def on_cuda(self) -> bool:
        return self.dev.type == "cuda"

    def write_targets(self, ctrl: torch.Tensor, advance: int) -> None:
        """The targets op (motion_to_ctrl or spline_to_ctrl) into ``ctrl``."""
        op = ops.spline_to_ctrl if self.interp == "cubic" else ops.motion_to_ctrl
        op(self.buf, self.step, ctrl, self.act_ids, offsets=self.offs_dev, frames_per_step=self.fps_step,
           mode=self.mode, advance=advance)

    def initial_state(self, keep_state: bool = False, warmup_steps: int = 0) -> None:
        """Every joint starts at its first target (or, with ``keep_state``, where it
        is), then ``warmup_steps`` steps with the controls held there; the state
        reached is history row 0."""
        qpos, ctrl = self.sim.view("qpos"), self.sim.view("ctrl")
        if not keep_state:
            init = torch.empty_like(ctrl)
            self.write_targets(init, 0)
            cols = self.act_ids.long()
            qpos[:, self.adrs.long()] = init[:, cols]
            ctrl[:, cols] = init[:, cols]
            self.sim.forward()
        if warmup_steps:
            self.write_targets(ctrl, 0)
            for _ in range(warmup_steps):
                self.sim.step()
        ops.record_qpos(qpos, self.adrs, self.history, self.step, every=self.record_every)

    def one_step(self, timed: bool = False) -> None:
        """[targets op(advance=1), mjw.step, record_qpos]; ``timed`` synchronizes
        between the stages and adds their times to ``split``."""
        on_cuda, sim = self.on_cuda, self.sim
        t0 = time.perf_counter()
        with profiling.stage(f"flycuda.{'spline' if self.interp == 'cubic' else 'motion'}_to_ctrl", cuda=on_cuda):
            self.write_targets(sim.view("ctrl"), 1)
        if timed:
            _sync(sim)
            t1 = time.perf_counter()
        with profiling.stage("mjw.step", cuda=on_cuda):
            sim.step()
        if timed:
            _sync(sim)
            t2 = time.perf_counter()
        with profiling.stage("flycuda.record_qpos", cuda=on_cuda):
            ops.record_qpos(sim.view("qpos"), self.adrs, self.history, self.step, every=self.record_every)
        if timed:
            _sync(sim)
            t3 = time.perf_counter()
            self.split["flycuda ops"] += (t1 - t0) + (t3 - t2)
            self.split["physics"] += t2 - t1


class _Renders:
    """Renders a mosaic every ``every`` steps, and always the first and the last state
    (so ``--render`` has at least two frames and ``--frames`` the final state)."""

    def __init__(self, run: _Run, renderer, writer, every: int):
        self.run, self.renderer, self.writer, self.every = run, renderer, writer, every
        self.frames, self.seconds, self.last_step = 0, 0.0, -1

    @property
    def active(self) -> bool:
        return self.renderer is not None and (self.every > 0 or self.writer is not None)

    def next_due(self, done: int) -> int:
        """The next step at which a frame is due (the run's end when none)."""
        return (done // self.every + 1) * self.every if self.every else self.run.steps

    def render(self) -> None:
        t0 = time.perf_counter()
        with profiling.stage("render", cuda=self.run.on_cuda):
            frame = self.renderer.render_mosaic()
            if self.writer is not None:
                self.writer.add(frame)
        _sync(self.run.sim)  # render is outside the graph: always measured
        self.seconds += time.perf_counter() - t0
        self.frames += 1
        self.last_step = self.run.done

    def first(self) -> None:
        if self.active:
            self.render()

    def after_step(self) -> None:
        if self.active and self.every and self.run.done % self.every == 0:
            self.render()

    def last(self) -> None:
        if self.active and self.last_step != self.run.done:
            self.render()


def _progress_bar(progress: bool, steps: int, worlds: int):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=steps, unit="step", desc=f"replay {worlds} worlds", leave=False)


# --- the run -------------------------------------------------------------------------

def _warm_up_and_split(run: _Run, renders: _Renders, t_start: float) -> tuple[float, dict, float]:
    """The first step (Warp's JIT / module load) timed with set-up, then up to
    SPLIT_STEPS synchronized eager steps timed stage by stage (part of the replay).
    Returns (set-up + first step seconds, per-stage seconds, wall seconds of the split steps)."""
    run.one_step()
    _sync(run.sim)
    jit_seconds = time.perf_counter() - t_start - renders.seconds  # the first frame is render time
    run.done = 1
    renders.after_step()
    n_split = min(SPLIT_STEPS, run.steps - run.done)
    t0 = time.perf_counter()
    for _ in range(n_split):
        run.one_step(timed=True)
        run.done += 1
        renders.after_step()
    _sync(run.sim)
    # Per-step stage times from the synchronized eager steps, scaled to the whole run.
    split = {k: v / n_split * run.steps for k, v in run.split.items()} if n_split else dict(run.split)
    return jit_seconds, split, time.perf_counter() - t0


def _capture(run: _Run, use_graph: bool, steps_per_graph: int):
    """K steps captured into one CUDA graph on the shared stream (not timed), or None."""
    if not use_graph or run.steps - run.done < steps_per_graph:
        return None
    return streams.capture_graph(run.one_step, run.sim.wp_device, repeat=steps_per_graph)


def _timed_loop(run: _Run, renders: _Renders, cuda_graph, steps_per_graph: int, prof, bar) -> float:
    """The remaining steps: graph launches where a whole launch fits before the next due
    frame, eager steps otherwise. Returns the wall seconds."""
    _sync(run.sim)
    t0 = time.perf_counter()
    while run.done < run.steps:
        if cuda_graph is not None and run.done + steps_per_graph <= min(run.steps, renders.next_due(run.done)):
            with profiling.stage("replay.graph_launch", cuda=run.on_cuda):
                streams.launch_graph(cuda_graph)
            n = steps_per_graph
        else:
            run.one_step()
            n = 1
        run.done += n
        renders.after_step()
        if prof is not None:
            prof.step()
        if bar:
            bar.update(n)
    _sync(run.sim)
    return time.perf_counter() - t0


# --- results -------------------------------------------------------------------------

def _targets(run: _Run) -> torch.Tensor:
    """float32 [W, R, D]: what the targets op wrote at the recorded steps (the reference)."""
    cpu_buf, cpu_offs = run.buf.cpu(), run.offs.cpu()
    W, R, D = run.history.shape
    tgt = torch.empty(W, R, D)
    dof = torch.arange(D)
    ref_op = reference.spline_to_ctrl if run.interp == "cubic" else reference.motion_to_ctrl
    for r in range(R):
        target = torch.empty(W, D)
        ref_op(cpu_buf, torch.tensor([r * run.record_every]), target, dof, offsets=cpu_offs,
               frames_per_step=run.fps_step, mode=run.mode)
        tgt[:, r] = target
    return tgt


def _peak_memory(dev: torch.device) -> str:
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return (f"{(total - free) / 2**20:,.0f} MiB in use on the GPU at the end (all processes; torch peak "
                f"{torch.cuda.max_memory_allocated(dev) / 2**20:,.1f} MiB)")
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB max RSS (CPU)"


def _results(run: _Run, renders: _Renders, cuda_graph, steps_per_graph: int, split: dict, wall: float,
             jit_seconds: float, profile_summary: str) -> ReplayResult:
    if int(run.step[0]) != run.steps:  # the device counter must agree with the host's count
        raise RuntimeError(f"flycuda replay: device step counter {int(run.step[0])} != {run.steps} steps run")
    split = dict(split, render=renders.seconds)
    rec, tgt, sim = run.history.cpu(), _targets(run), run.sim
    return ReplayResult(
        worlds=sim.nworld, steps=run.steps, timestep=sim.timestep, device=str(run.dev),
        graph=cuda_graph is not None, steps_per_graph=steps_per_graph if cuda_graph is not None else 1,
        record_every=run.record_every, dof_names=run.motion.dof_names, recorded=rec, targets=tgt,
        sim_seconds=run.steps * sim.timestep, wall_seconds=wall, jit_seconds=jit_seconds, split_seconds=split,
        peak_memory=_peak_memory(run.dev), rmse_per_dof=tracking_rmse(rec, tgt, sim.timestep, run.record_every),
        profile_summary=profile_summary, render_frames=renders.frames,
        render_tiles=_tiles_of(renders.renderer, sim.nworld), interp=run.interp)


def _tiles_of(renderer, worlds: int) -> int:
    sel = getattr(renderer, "worlds", None)
    return int(sel.numel()) if isinstance(sel, torch.Tensor) else worlds
