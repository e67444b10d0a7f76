"""The main job: replay recorded fly motion in N MuJoCo Warp worlds with flycuda's ops.

One simulation step is ``[motion_to_ctrl(advance=1), mjw.step, record_chunk...]``:
* ``motion_to_ctrl`` samples each world's targets from the recording at the
  device-side counter s (frame ``offsets[w] + s * fps * timestep``), writes them
  into ``ctrl`` (a zero-copy view of ``Data.ctrl``) and advances the counter to
  s + 1, all in one launch (``interp="cubic"``: ``spline_to_ctrl``, FlyGym's
  cubic resampling evaluated on the device);
* ``mjw.step`` advances the physics to time ``(s + 1) * timestep``;
* ``record_chunk`` records every observable of that state (the driven joint
  angles and whatever else was asked for, each at its own rate) into its ring
  of device chunks (:mod:`flycuda.recording.recorder`), which stream out to a zarr store
  while the next steps run; the tracking error is accumulated on the device.

The replay is four stages of :func:`flycuda.sim.stepper.run_stages`: the targets
(:class:`flycuda.replay.stages.Targets`), the eyes (``vision``:
:class:`flycuda.vision.stage.VisionStage`), the recording and its store
(:class:`flycuda.replay.stages.Recording`) and the frames
(:class:`flycuda.replay.stages.Renders`). On CUDA the step (or K steps) is captured once
into a CUDA graph on the stream torch and Warp share and replayed; on the CPU it runs
eagerly on Warp's CPU device. The first step (Warp's JIT/module load) is timed apart,
and a few eager steps with synchronization measure the split physics / flycuda ops / render.
"""

from __future__ import annotations

import time

import torch

from ..sim.mjwarp import Sim
from ..sim.motion import motion_window
from ..sim.preempt import Preempted, preemptible
from ..sim.stepper import SPLIT_STEPS, LoopOptions, run_stages
from ..vision.stage import VisionStage
from ..worlds import resolve
from . import snapshot
from .results import TRACKING_SKIP_SECONDS, ReplayResult, make_result, tracking_rmse
from .settings import ReplayError, ReplaySettings
from .stages import Recording, Renders, Targets

__all__ = ["replay", "ReplaySettings", "ReplayResult", "ReplayError", "tracking_rmse", "TRACKING_SKIP_SECONDS",
           "SPLIT_STEPS"]


def replay(settings: ReplaySettings | None = None, *, sim: Sim | None = None, renderer=None, frame_writer=None,
           act_ids: torch.Tensor | None = None, retina=None, **options) -> ReplayResult:
    """Replays ``settings.motion`` in MuJoCo Warp worlds of ``settings.model`` as ``settings`` say.

    Args:
        settings: a :class:`ReplaySettings` (every option, documented there); ``options``
            replace its fields by name (``replay(worlds=8, duration=0.1, motion=my_motion)``).
        sim: an existing :class:`flycuda.sim.Sim` (e.g. wrapping a FlyGym mjw pair) instead
            of building ``settings.model`` (which then only names its defaults); it must have
            ``settings.worlds`` worlds, if given.
        renderer: a TileRenderer or MjwRenderer (``render_mosaic() -> uint8 image``), drawn
            every ``settings.render_every`` steps and at the first and last state.
        frame_writer: a :class:`flycuda.render.FrameWriter` for the mosaics.
        act_ids: actuator per motion DOF (int [D]); default: FlyGym's order for NeuroMechFly's
            own clip, else matched by ``motion.dof_names`` (see :meth:`Sim.actuator_ids`).
        retina: the :class:`flycuda.vision.RetinaMap` for ``settings.vision`` (default FlyGym's).

    Returns:
        a :class:`ReplayResult` (its ``report()`` is what the CLI prints; its ``recording``
        reads the store lazily).
    """
    s = ReplaySettings.of(settings, **options)
    t_start = time.perf_counter()
    checked = s.check(renderer)  # every setting, before anything is built
    window = []  # (seconds, start frames): checked before the build wherever the motion is known

    def check_window(m, n):
        window.append(motion_window(m, n, s.duration, s.snippet, s.offsets))

    ws = resolve(s.model, s.worlds, device=s.device, motion=s.motion, sim=sim, act_ids=act_ids,
                 vision=checked.vision is not None, interp=s.interp, warmup=s.warmup, nconmax=s.nconmax, njmax=s.njmax,
                 check=check_window)
    (duration, offs), = window
    steps = max(1, int(round(duration / ws.sim.timestep)))
    targets = Targets(ws.motion, offs, s.mode, ws.interp, ws.act_ids)
    facts = dict(mode=s.mode, interp=ws.interp, fps=ws.motion.fps, length_unit=ws.unit,
                 **({"model": ws.model} if ws.model is not None else {}))
    recording = Recording(targets, checked.specs, checked.target, s.record_every, s.chunk_bytes, facts)
    renders = Renders(renderer, frame_writer, s.render_every)
    eyes = [VisionStage(checked.vision, retina, connectome=checked.connectome,
                        checkpoint=s.connectome_checkpoint)] if checked.vision is not None else []
    store = snapshot.store_path(checked.target)
    fp = snapshot.fingerprint(s, ws, steps, offs)
    resumed = snapshot.resume_from(s.resume, fp, checked.target) if s.resume else None
    snaps = [snapshot.Snapshots(snapshot.snapshot_dir(store), fp, recording, s.snapshot_seconds)] \
        if store and s.snapshots else []
    options = LoopOptions(steps, s.steps_per_graph, s.graph, int(round(ws.warmup / ws.sim.timestep)), s.keep_state,
                          s.progress, s.profile, t_start, desc=f"replay {ws.sim.nworld} worlds",
                          resume=resumed.state if resumed else None)
    with preemptible(s.preemptible):
        try:
            stats = run_stages(ws.sim, [targets, *eyes, recording, *snaps, renders], options)
        except Preempted as e:
            e.store = store  # what the command line tells the user to resume
            raise
    if store and checked.target.finalize:
        snapshot.remove_snapshots(store)  # the run is complete: nothing left to resume
    res = make_result(stats, targets, recording, renders, eyes[0] if eyes else None)
    res.resumed_from = resumed.step if resumed else None
    res.snapshots = snaps[0].summary() if snaps else {}
    return res
