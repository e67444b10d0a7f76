"""The results stage: what a replay measured (:class:`ReplayResult`, its report)
and the tracking error. Nothing here holds a [worlds, steps, D] array: the error
comes from the device's running sums, the recording stays in its store."""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, field

import torch

from ..errors import RecordingError

TRACKING_SKIP_SECONDS = 0.01  # the tracking error leaves out the first 10 ms (the servos settle)


@dataclass
class ReplayResult:
    """What a replay did and measured. ``recording``: the store, read lazily
    (:class:`flycuda.recording.Recording`), or None when nothing was stored."""

    worlds: int
    steps: int
    timestep: float
    device: str
    graph: bool
    steps_per_graph: int
    record_every: int
    dof_names: tuple
    sim_seconds: float
    wall_seconds: float
    jit_seconds: float
    split_seconds: dict = field(default_factory=dict)
    peak_memory: str = ""
    rmse_per_dof: torch.Tensor | None = None
    outputs: list = field(default_factory=list)
    profile_summary: str = ""
    render_frames: int = 0     # mosaics rendered
    render_tiles: int = 0      # worlds in each
    out_dir: str = ""          # the output folder, when one was asked for
    interp: str = "linear"     # targets between frames: linear or cubic
    model: str = ""            # what was replayed (set by the CLI)
    motion: str = ""
    recording: object = None   # flycuda.recording.Recording, or None
    track_sq: torch.Tensor | None = None  # float64 [D]: summed squared tracking error
    track_count: int = 0                  # samples in track_sq (worlds x samples after settling)
    rank_walls: list = field(default_factory=list)  # torchrun: wall seconds of each rank
    store_bytes: int = 0       # bytes handed to the store (uncompressed)
    store_seconds: float = 0.0  # writer thread time spent writing them
    progress_writes: int = 0  # the store's progress (JSON) written by the writer, and its seconds
    progress_seconds: float = 0.0
    recorder_device_bytes: int = 0  # device memory of the recording (rings, tracking)
    rows_written: dict = field(default_factory=dict)  # samples written per stored array
    resumed_from: int | None = None  # the step a resumed run went on from (its snapshot's)
    snapshots: dict = field(default_factory=dict)  # taken, bytes, seconds (flycuda.replay.snapshot)
    render_afterwards: bool = False  # the video was rendered from the store after the run
    vision: str = ""           # the vision stage's spec (flycuda.vision.stage), "" without one
    vision_samples: int = 0    # readouts of every world taken
    vision_rays: int = 0       # rays per readout (world and eye)
    vision_device_bytes: int = 0  # device memory of the vision stage (rings not included)
    steps_in_launches: int = 0  # steps run inside launches of steps_per_graph (graphs on CUDA, plain calls on the CPU)
    eager_steps: int = 0        # steps run one by one (the warm-up's, partial launches)
    split_steps: int = 0        # of which synchronized and timed stage by stage
    overflow: dict = field(default_factory=dict)  # world -> what overflowed MuJoCo Warp's buffers (Sim.overflowed)

    @property
    def recorded(self) -> torch.Tensor:
        """Recorded joint angles [W, R, D], read from the store (small runs)."""
        return self._store().recorded

    @property
    def targets(self) -> torch.Tensor:
        """Targets [W, R, D] at the same steps, read from the store (small runs)."""
        return self._store().targets

    def _store(self):
        if self.recording is None:
            raise RecordingError("this replay stored no recording: pass record='memory' or a path "
                             "(flycuda replay --record out.zarr)")
        return self.recording

    @property
    def render_images_per_s(self) -> float:
        """Rendered world images per second of render time (nan when nothing was rendered)."""
        t = self.split_seconds.get("render", 0.0)
        return self.render_frames * self.render_tiles / t if self.render_frames and t > 0 else math.nan

    @property
    def timed_steps(self) -> int:
        """Steps inside ``wall_seconds``: all but the first (JIT/warm-up) step."""
        return self.steps - 1

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds (all worlds together) per wall second, over the timed steps."""
        if self.wall_seconds <= 0 or self.timed_steps <= 0:
            return math.nan
        return self.worlds * self.timed_steps * self.timestep / self.wall_seconds

    @property
    def world_steps_per_s(self) -> float:
        if self.wall_seconds <= 0 or self.timed_steps <= 0:
            return math.nan
        return self.worlds * self.timed_steps / self.wall_seconds

    def report(self) -> str:
        """A human-readable report of the run."""
        split = self.split_seconds
        tot = sum(split.values()) or 1.0
        split_s = ", ".join(f"{k} {100 * v / tot:.0f}%" for k, v in split.items())
        rmse = self.rmse_per_dof
        worst = ""
        if rmse is not None and rmse.numel():
            k = int(torch.argmax(rmse))
            worst = f" (worst {self.dof_names[k]} {math.degrees(float(rmse[k])):.2f} deg)"
        lines = [
            f"flycuda replay: {self.worlds} worlds x {self.steps} steps of {self.timestep * 1e3:g} ms on {self.device}"
            f" ({'CUDA graph, ' + str(self.steps_per_graph) + ' step(s)/launch' if self.graph else 'eager' if not self.steps_in_launches else str(self.steps_per_graph) + ' plain step(s)/launch'})",
            *([f"  model          {self.model}; motion {self.motion}; {self.interp} targets"] if self.model else []),
            f"  simulated      {self.sim_seconds:.3f} s per world ({self.worlds * self.sim_seconds:.3f} s in all)",
            f"  wall (timed)   {self.wall_seconds:.3f} s for {self.timed_steps} steps   +  setup/JIT/first step {self.jit_seconds:.2f} s",
            f"  x real time    {self.realtime_factor:.3f}  ({self.world_steps_per_s:,.0f} world-steps/s)",
            f"  time split     {split_s}   (physics/ops from {self.split_steps} synchronized eager steps)",
            f"  launches       {self.steps_in_launches} steps in launches of {self.steps_per_graph}, "
            f"{self.eager_steps} eager (warm-up, partial launches)",
            f"  peak memory    {self.peak_memory}",
        ]
        if rmse is not None and rmse.numel():
            lines.append(f"  tracking RMSE  {math.degrees(float(rmse.pow(2).mean().sqrt())):.2f} deg over "
                         f"{len(self.dof_names)} DOFs after {TRACKING_SKIP_SECONDS * 1e3:.0f} ms{worst}")
        if self.recording is not None or self.store_bytes:
            rate = self.store_bytes / self.store_seconds / 2**20 if self.store_seconds > 0 else math.nan
            lines.append(f"  recording      {self.store_bytes / 2**20:,.1f} MiB streamed to the store ({rate:,.0f} MiB/s "
                         f"writer); {self.recorder_device_bytes / 2**20:,.1f} MiB of device chunks")
        if self.resumed_from is not None:
            lines.append(f"  resumed        from the snapshot at step {self.resumed_from:,}")
        if self.snapshots.get("taken"):
            n = self.snapshots["taken"]
            sn = self.snapshots
            lines.append(f"  snapshots      {n}: {sn['file_bytes'] / 2**20:,.2f} MiB each, {1e3 * sn['seconds'] / n:.1f} ms "
                         f"to take + {1e3 * sn['write_seconds'] / n:.1f} ms to write (writer thread); the latest 2 "
                         "kept until the run completes")
        if self.render_frames:
            t = self.split_seconds.get("render", 0.0)
            how = ", afterwards from the store" if self.render_afterwards else ""
            lines.append(f"  render         {self.render_frames} frames x {self.render_tiles} worlds: "
                         f"{self.render_images_per_s:,.0f} images/s, {1e3 * t / self.render_frames:.1f} ms per frame{how}")
        if self.vision_samples:
            t = self.split_seconds.get("vision", 0.0)
            rate = self.vision_samples * self.worlds / t if t > 0 else math.nan
            lines.append(f"  vision         {self.vision}: {self.vision_samples} samples x {self.worlds} worlds, "
                         f"{rate:,.0f} readouts/s ({self.vision_rays:,} rays per eye); "
                         f"{self.vision_device_bytes / 2**20:,.1f} MiB of device buffers")
        if self.overflow:
            ws = sorted(self.overflow)
            lines.append(f"  OVERFLOW       MuJoCo Warp dropped constraint rows or contacts in {len(ws)} of {self.worlds} "
                         f"worlds ({ws[:8]}{' ...' if len(ws) > 8 else ''}: {self.overflow[ws[0]]}); their states are "
                         "not MuJoCo's: raise njmax/nconmax")
        if self.out_dir:
            lines.append(f"  output folder  {self.out_dir}")
        for p in self.outputs:
            lines.append(f"  wrote          {p}")
        return "\n".join(lines)


def tracking_rmse(recorded: torch.Tensor, targets: torch.Tensor, timestep: float,
                  record_every: int) -> torch.Tensor:
    """RMSE per DOF ([D]) of recorded vs target angles [W, R, D], over worlds and the
    samples after the first TRACKING_SKIP_SECONDS (always at least the last sample)."""
    settle = settle_row(timestep, record_every, recorded.shape[1])
    return (recorded[:, settle:] - targets[:, settle:]).pow(2).mean(dim=(0, 1)).sqrt()


def settle_row(timestep: float, every: int, rows: int) -> int:
    """The first sample (of ``rows``, one every ``every`` steps) the tracking error counts: the
    first after TRACKING_SKIP_SECONDS, and never past the last."""
    return min(int(math.ceil(TRACKING_SKIP_SECONDS / (timestep * every))), rows - 1)


def rmse_from_sums(sq: torch.Tensor, count: int) -> torch.Tensor:
    """float32 [D] RMSE from summed squared errors (float64 [D]) over ``count`` samples."""
    return (sq.double() / max(int(count), 1)).sqrt().to(torch.float32)


def peak_memory(dev: torch.device) -> str:
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return (f"{(total - free) / 2**20:,.0f} MiB in use on the GPU at the end (all processes; torch peak "
                f"{torch.cuda.max_memory_allocated(dev) / 2**20:,.1f} MiB)")
    return f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB max RSS (CPU)"


def make_result(stats, targets, recording, renders, eyes=None) -> ReplayResult:
    """The ReplayResult of a finished run: what the loop measured (a
    :class:`flycuda.sim.stepper.LoopStats`) and its stages (:mod:`flycuda.replay.stages`;
    ``eyes``: the :class:`flycuda.vision.stage.VisionStage`, if any)."""
    split = dict(stats.split, render=renders.seconds)
    if eyes is not None:
        split["vision"] = eyes.seconds
    sim, rec, sink = targets.sim, recording.recorder, recording.sink
    tracker = rec.tracker
    sq = tracker.sq.cpu()
    sel = getattr(renders.renderer, "worlds", None)
    writer = sink.writer if sink is not None else None
    steps = rec.steps
    return ReplayResult(
        worlds=sim.nworld, steps=steps, timestep=sim.timestep, device=str(sim.device),
        graph=stats.graph, steps_per_graph=stats.per_launch if stats.launched else 1,
        record_every=tracker.every, dof_names=targets.motion.dof_names,
        sim_seconds=steps * sim.timestep, wall_seconds=stats.wall_seconds, jit_seconds=stats.jit_seconds,
        split_seconds=split, peak_memory=peak_memory(sim.device), rmse_per_dof=rmse_from_sums(sq, tracker.count),
        profile_summary=stats.profile_summary, render_frames=renders.frames,
        render_tiles=int(sel.numel()) if isinstance(sel, torch.Tensor) else sim.nworld, interp=targets.interp,
        recording=sink.recording() if sink is not None else None, track_sq=sq,
        track_count=tracker.count, store_bytes=writer.bytes_written if writer else 0,
        store_seconds=writer.seconds if writer else 0.0, recorder_device_bytes=rec.device_bytes(),
        progress_writes=writer.progress_writes if writer else 0, progress_seconds=writer.progress_seconds if writer else 0.0,
        rows_written=dict(writer.rows) if writer else {}, vision=str(eyes.spec) if eyes else "",
        vision_samples=eyes.samples if eyes else 0, vision_rays=eyes.vision.rays_per_readout if eyes else 0,
        vision_device_bytes=eyes.device_bytes() if eyes else 0, steps_in_launches=stats.launched,
        overflow=dict(stats.overflow), eager_steps=stats.eager, split_steps=stats.split_steps)
