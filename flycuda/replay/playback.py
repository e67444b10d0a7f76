"""Render afterwards: re-pose recorded worlds from their stored qpos and draw them.

    flycuda render out.zarr --worlds 0:16 --camera NAME --out video.mp4 [--speed S]

or :func:`render_recording`. A small Sim of the recorded model (one world per
selected world) is posed from each stored qpos sample (forward kinematics only:
:meth:`flycuda.sim.Sim.kinematics`) and drawn with flycuda's tile renderer
into one mosaic per sample. The qpos samples are read from the store chunk by
chunk, so memory does not grow with the recording's length.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from ..recording.reader import Recording, RecordingError, parse_worlds
from ..recording.runs import open_run
from ..render import FrameWriter, TileRenderer, camera_arg
from ..sim.bodies import add_bodies
from ..vision.eyes import flygym_retina, mosaic_with_eyes
from ..worlds import resolve

__all__ = ["render_recording", "PlaybackResult"]


@dataclass
class PlaybackResult:
    frames: int = 0
    worlds: int = 0
    seconds: float = 0.0        # render time (kinematics + ray casting + mosaic)
    outputs: list = field(default_factory=list)

    @property
    def images_per_s(self) -> float:
        return self.frames * self.worlds / self.seconds if self.seconds > 0 else math.nan


def _open(source) -> Recording:
    rec = source if isinstance(source, Recording) else Recording.open(source)
    if not rec.complete:  # an interrupted, preempted or failed run: its valid prefix, said in one line
        run = open_run(rec.group.store)
        if run.state != "running" and "qpos" in run.rows:
            print(f"flycuda render: {run.line()}; rendering its valid prefix ({run.rows['qpos']:,} qpos samples)",
                  file=sys.stderr)
    if "qpos" not in rec.names:
        raise RecordingError("the recording has no qpos to re-pose the worlds from; record it with "
                             "--observe qpos@30hz (replay(observe=[..., 'qpos@30hz']))")
    return rec


def render_recording(source, out: str | None = None, *, worlds="0:16", camera: str | None = None,
                     size=(160, 120), speed: float = 1.0, png: str | None = None, sim=None,
                     device: str | None = None, progress: bool = True, max_frames: int | None = None,
                     frame_callback=None, eyes: bool | None = None, retina=None) -> PlaybackResult:
    """Renders the stored qpos of ``worlds`` as a mosaic video.

    Args:
        source: a recording (path or :class:`Recording`) with a ``qpos`` array.
        out: the video to write (.mp4/.gif), or None.
        worlds: which worlds ("0:16", "1,5", a list or slice).
        camera: a camera of the model (default: the one the replay used).
        size: (width, height) of each world's tile.
        speed: playback speed (1.0: real time; the video has one frame per sample).
        png: also write the last frame as PNG.
        sim: worlds to pose (``len(worlds)`` of the recorded model); built from the
            recording's model name when None.
        frame_callback: called with each mosaic (uint8 [H, W, 3] tensor).
        eyes: draw each world's eyes under its tile (FlyGym's hexagon images of the
            recorded ``vision`` readouts, the latest sample at or before each frame; the
            eyes saw the poses of the step before their sample, the frame is posed at
            its own qpos); None: when the recording has them.
        retina: the :class:`flycuda.vision.retina.RetinaMap` they were recorded with
            (default FlyGym's).

    Samples not written (an incomplete recording's NaN rows) end the video there.
    """

    rec = _open(source)
    info, qpos = rec.info, rec["qpos"]
    ids = parse_worlds(worlds, qpos.shape[0])
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise RecordingError(f"speed must be > 0, got {speed!r}")
    if sim is None:
        if not info.get("model"):
            raise RecordingError("the recording does not name its model (it was made from a Sim given to replay): "
                                 "pass sim= (that model, one world per selected world)")
        bodies = info.get("bodies") or []  # a task's objects (flycuda env's approach pillar), drawn again
        built = resolve(info["model"], len(ids), device=device, motion=False,
                        decorate=(lambda spec: add_bodies(spec, bodies)) if bodies else None)
        sim, camera = built.sim, camera or info.get("camera") or built.camera
    camera = camera or info.get("camera") or "track"
    if sim.nworld != len(ids) or sim.mjm.nq != qpos.shape[2]:
        raise RecordingError(f"sim ({sim.nworld} worlds, nq={sim.mjm.nq}) does not fit the recording's qpos "
                             f"({len(ids)} worlds selected, nq={qpos.shape[2]})")
    fps = speed / (rec.every("qpos") * float(info["timestep"]))
    eye_rows = _EyeRows(rec, ids, rec.every("qpos"), retina) if _want_eyes(rec, eyes) else None
    renderer = TileRenderer(sim, camera=camera_arg(camera), width=size[0], height=size[1], mosaic=eye_rows is None)
    writer = FrameWriter(video=out, png=png, fps=fps) if (out or png) else None
    result = PlaybackResult(worlds=len(ids))
    view = sim.view("qpos")
    rows = qpos.shape[1] if max_frames is None else min(qpos.shape[1], max_frames)
    step = max(1, qpos.chunks[1])
    bar = _bar(progress, rows)
    for k0 in range(0, rows, step):
        block = np.asarray(qpos.get_orthogonal_selection((ids, slice(k0, min(k0 + step, rows)), slice(None))))
        if not _render_block(block, k0, view, sim, renderer, eye_rows, writer, result, frame_callback, bar):
            break
    if bar is not None:
        bar.close()
    if writer is not None:
        result.outputs += writer.close()
    return result


def _want_eyes(rec: Recording, eyes: bool | None) -> bool:
    if eyes and "vision" not in rec.names:
        raise RecordingError("the recording has no eyes' readouts to draw; record them with --vision "
                             "(replay(vision=...))")
    return "vision" in rec.names if eyes is None else bool(eyes)


class _EyeRows:
    """The recorded readouts to draw with qpos sample k: the latest vision sample at
    or before its step, read one chunk of the selected worlds at a time."""

    def __init__(self, rec: Recording, ids: list[int], qpos_every: int, retina=None):
        self.rec, self.ids, self.qpos_every = rec, ids, qpos_every
        arr = rec["vision"]
        self.every, self.rows, self.C = rec.every("vision"), arr.shape[1], max(1, arr.chunks[1])
        self.retina = retina or flygym_retina()
        if arr.attrs.get("sample_shape", [0, 0, 0])[1] != self.retina.num_ommatidia:
            raise RecordingError(f"the recorded eyes have {arr.attrs.get('sample_shape')} readouts but the retina "
                                 f"{self.retina.num_ommatidia} ommatidia: pass the retina they were recorded with")
        self.b0, self.block = -1, None

    def at(self, k: int) -> np.ndarray:
        r = min(k * self.qpos_every // self.every, self.rows - 1)
        b0 = r // self.C * self.C
        if b0 != self.b0:
            self.block, self.b0 = self.rec.vision(self.ids, slice(b0, b0 + self.C)), b0
        return self.block[:, r - b0]

    def frame(self, renderer, k: int) -> torch.Tensor:
        return mosaic_with_eyes(renderer.render(), torch.from_numpy(self.at(k)), self.retina)


def _render_block(block, k0, view, sim, renderer, eye_rows, writer, result, frame_callback, bar) -> bool:
    """Renders samples [S, r, nq] (sample k0 first); False at the first sample not written (NaN)."""
    for j in range(block.shape[1]):
        sample = torch.from_numpy(np.ascontiguousarray(block[:, j]))
        if torch.isnan(sample).any():
            return False
        t0 = time.perf_counter()
        view.copy_(sample.to(view.device))
        sim.kinematics()
        frame = renderer.render_mosaic() if eye_rows is None else eye_rows.frame(renderer, k0 + j)
        if sim.device.type == "cuda":
            torch.cuda.synchronize(sim.device)
        result.seconds += time.perf_counter() - t0
        result.frames += 1
        if writer is not None:
            writer.add(frame)
        if frame_callback is not None:
            frame_callback(frame)
        if bar is not None:
            bar.update(1)
    return True


def _bar(progress: bool, total: int):
    if not progress:
        return None

    return tqdm(total=total, unit="frame", desc="render afterwards", leave=False)
