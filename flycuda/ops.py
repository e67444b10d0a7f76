"""Typed Python wrappers of flycuda's ops, with fake kernels for torch.compile.

Every op works in place on tensors that may be zero-copy views of MuJoCo Warp
arrays (``wp.to_torch(d.ctrl)``), reads the step counter on the device and
never synchronizes with the host while a CUDA graph is being captured, so a
sequence of them can be captured once and replayed every simulation step.

Shapes: W worlds, T recorded frames, D driven DOFs, nu controls, nq positions,
R recorded samples.
"""

from __future__ import annotations

import torch

from . import _ext  # noqa: F401  (loads flycuda._C before the fakes below)

__all__ = ["motion_to_ctrl", "spline_to_ctrl", "advance_step", "record_qpos", "record_chunk", "new_step_counter",
           "render_tiles", "pool_ommatidia"]

MODES = ("clamp", "loop")


def motion_to_ctrl(motion: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """Writes each world's target angles at the current step into ``ctrl``.

    For every world w and DOF d, with the frame position
    ``f = offsets[w] + step[0] * frames_per_step`` (float64)::

        ctrl[w, act_ids[d]] = lerp(motion[m, floor(f), d], motion[m, next, d], f - floor(f))

    where ``m = 0`` if M == 1 else ``w``. In mode ``"clamp"`` f is clamped to
    [0, T-1]; in ``"loop"`` it wraps modulo T (frame T-1 blends into frame 0).
    With ``frames_per_step == 1`` and integer offsets this is an exact copy.
    Non-finite positions (NaN offsets) read frame 0. The blend is computed in
    float64 and rounded once, identically on CPU and CUDA.

    Args:
        motion: float32 [M, T, D], contiguous; M == 1 (shared) or M == W.
        step: int64 step counter on the same device (never read on the host):
            [2] from :func:`new_step_counter` (``step[0]`` is the step), or a plain [1].
        ctrl: float32 [W, nu], written in place at columns ``act_ids`` only. Any
            strides (e.g. a row-strided view of MuJoCo Warp's ``Data.ctrl``), but
            no overlapping memory.
        act_ids: int32/int64 [D], distinct, each in [0, nu).
        offsets: float32/float64 [W] start frame per world (fractional, negative
            or past the end allowed); default 0.
        frames_per_step: recording frames per simulation step (= recording fps x
            timestep); finite.
        mode: ``"clamp"`` or ``"loop"``.
        advance: if > 0, ``step[0] += advance`` after every world has read the
            counter. With a counter from :func:`new_step_counter` this happens in
            the same launch (one kernel per step, one atomic per block: the last
            block to take a ticket from the counter's hidden word advances); with
            any other counter a second, one-thread kernel follows on the same
            stream. Either way nothing is shared between counters, so calls on
            different counters may overlap on any streams.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, or act_ids
            out of range/duplicated; ``ctrl`` and ``step`` are left untouched.
        ValueError: bad ``mode``, non-finite ``frames_per_step``, ``advance < 0``.

    act_ids values are checked once per tensor (and again after any in-place
    change to it): on CUDA with one small host copy, never while a CUDA graph
    is being captured. Ids that escape the check (e.g. written through a Warp
    alias) are skipped by the kernel, never written out of bounds.
    """
    if mode not in MODES:
        raise ValueError(f"flycuda.motion_to_ctrl: argument 'mode' must be 'clamp' or 'loop', got {mode!r}")
    torch.ops.flycuda.motion_to_ctrl.default(motion, step, ctrl, act_ids, offsets,
                                             float(frames_per_step), mode, int(advance))


def spline_to_ctrl(coeffs: torch.Tensor, step: torch.Tensor, ctrl: torch.Tensor,
                   act_ids: torch.Tensor, *, offsets: torch.Tensor | None = None,
                   frames_per_step: float = 1.0, mode: str = "clamp",
                   advance: int = 0) -> None:
    """:func:`motion_to_ctrl` with cubic instead of linear interpolation between frames:
    FlyGym's resampling (scipy ``interp1d(kind="cubic")``, a not-a-knot spline) done on
    the device at the simulation rate, from O(T x D) memory.

    For every world w and DOF d, with ``f = offsets[w] + step[0] * frames_per_step``
    mapped into [0, T) exactly as in :func:`motion_to_ctrl` (clamp or loop; NaN reads
    frame 0), ``i = floor(f)`` and ``a = f - i``::

        ctrl[w, act_ids[d]] = c0 + a * (c1 + a * (c2 + a * c3)),  (c0..c3) = coeffs[m, i, :, d]

    in float64, rounded once to float32; ``a == 0`` gives ``c0`` (the recorded frame)
    exactly. ``m = 0`` if M == 1 else ``w``. Piece T-1 is the loop's wrap piece (frame
    T-1 back to frame 0); in clamp mode it is read only at ``a == 0``.

    Args:
        coeffs: float64 [M, T, 4, D], contiguous: :func:`flycuda.spline_coeffs` of the
            recording(s) (``Motion.spline()``); M == 1 (shared) or M == W.
        step, ctrl, act_ids, offsets, frames_per_step, mode, advance: as in
            :func:`motion_to_ctrl` (same checks, same fused advance).

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, or act_ids out of
            range/duplicated; ``ctrl`` and ``step`` are left untouched.
        ValueError: bad ``mode``, non-finite ``frames_per_step``, ``advance < 0``.
    """
    if mode not in MODES:
        raise ValueError(f"flycuda.spline_to_ctrl: argument 'mode' must be 'clamp' or 'loop', got {mode!r}")
    torch.ops.flycuda.spline_to_ctrl.default(coeffs, step, ctrl, act_ids, offsets,
                                             float(frames_per_step), mode, int(advance))


def advance_step(step: torch.Tensor, n: int = 1) -> None:
    """Adds ``n`` to the step counter (``step[0]``; [1] or [2]) in place, on its own device."""
    torch.ops.flycuda.advance_step.default(step, int(n))


def record_qpos(qpos: torch.Tensor, adrs: torch.Tensor, history: torch.Tensor,
                step: torch.Tensor, *, every: int = 1) -> None:
    """Records joint positions at the current step into ``history``.

    With ``s = step[0]``: if ``s >= 0``, ``s % every == 0`` and ``s // every < R``,
    ``history[w, s // every, d] = qpos[w, adrs[d]]`` for all w, d; otherwise
    nothing is written.

    Args:
        qpos: float32 [W, nq], any strides (e.g. ``wp.to_torch(d.qpos)``).
        adrs: int32/int64 [D], each in [0, nq) (repeats allowed).
        history: float32 [W, R, D], written in place; no overlapping memory.
        step: int64 [1] or [2] step counter on the same device (``step[0]`` is read).
        every: record one sample every ``every`` steps (>= 1).

    adrs values are checked once per tensor, as act_ids in :func:`motion_to_ctrl`.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, or adrs out of range;
            ``history`` is left untouched.
        ValueError: ``every < 1``.
    """
    torch.ops.flycuda.record_qpos.default(qpos, adrs, history, step, int(every))


def record_chunk(source: torch.Tensor, columns: torch.Tensor, chunks: torch.Tensor,
                 step: torch.Tensor, *, every: int = 1) -> None:
    """Records columns of any per-world array at the current step into a ring of chunks.

    With ``s = step[0]``: if ``s >= 0`` and ``s % every == 0``, then with ``k = s // every``::

        chunks[(k // C) % B, w, k % C, d] = source[w, columns[d]]    for all w, d

    otherwise nothing is written. Sample k is row ``k % C`` of chunk ``k // C``, and
    chunk c lives in ring slot ``c % B``: with B = 2 one chunk fills while the other
    is copied out (:mod:`flycuda.recording` streams a whole run through this fixed
    memory). The source is a zero-copy view of any [W, N] float32 array of MuJoCo
    Warp's Data (qpos, qvel, ctrl, actuator_force, sensordata, xpos as [W, nbody*3],
    ...). :func:`record_qpos` is the case B = 1, C = R without wrapping.

    Args:
        source: float32 [W, N], any strides.
        columns: int32/int64 [D], each in [0, N) (repeats allowed), contiguous.
        chunks: float32 [B, W, C, D] (B >= 1, C >= 1), written in place; any strides,
            no overlapping memory, not sharing memory with the inputs.
        step: int64 [1] or [2] step counter on the same device (``step[0]`` is read).
        every: record one sample every ``every`` steps (>= 1).

    columns values are checked once per tensor, as act_ids in :func:`motion_to_ctrl`.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, or columns out of range;
            ``chunks`` is left untouched.
        ValueError: ``every < 1``.
    """
    torch.ops.flycuda.record_chunk.default(source, columns, chunks, step, int(every))


def pool_ommatidia(pixels: torch.Tensor, omm_ptr: torch.Tensor, omm_pixels: torch.Tensor,
                   omm_channel: torch.Tensor, omm_column: torch.Tensor, omm_count: torch.Tensor,
                   readouts: torch.Tensor) -> None:
    """Pools eye images into FlyGym's ommatidia readouts, in place.

    FlyGym's ``Retina.fisheye_image_to_hex_pxls`` for every image (s, e), through a
    CSR map (:class:`flycuda.retina.PoolingMap` builds it from FlyGym's Retina)::

        acc = 0.0  (float64); for j in omm_ptr[o]..omm_ptr[o+1]-1, in order:
            acc += float64(pixels[s, e, omm_pixels[j], omm_channel[o]]) / omm_count[o]
        readouts[s, e, o, omm_column[o]] = float32(acc / 255);  readouts[s, e, o, 1 - omm_column[o]] = 0

    FlyGym's float64 operations in FlyGym's order, so with an exact map the result
    equals ``np.float32(retina.fisheye_image_to_hex_pxls(image))`` (what
    ``get_ommatidia_readouts`` returns) bit for bit.

    Args:
        pixels: uint8 [S, E, P, 3], contiguous: the RGB colors of the P raw pixels the
            map lists for each of S worlds' E eyes (P = H * W: whole images flattened).
        omm_ptr: int32 [O + 1], CSR offsets: 0, non-decreasing, ending at nnz.
        omm_pixels: int32 [nnz], each in [0, P): the entries of each ommatidium.
        omm_channel: int32 [O], each in [0, 3): the RGB channel ommatidium o reads.
        omm_column: int32 [O], each in [0, 2): where its value goes (FlyGym: 0 yellow, 1 pale).
        omm_count: int32 [O], each >= 1: its divisor (FlyGym: the pixels of its footprint).
        readouts: float32 [S, E, O, 2], written in place; any strides, no overlapping
            memory, not sharing memory with the inputs.

    The map's values are checked once per tensor (and again after an in-place change),
    on CUDA with small host copies, never while a CUDA graph is being captured; values
    that escape the check are clamped or skipped by the kernel, never read or written
    out of bounds.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, aliasing or map
            values (naming the argument, what was expected and what was got);
            ``readouts`` is left untouched.
    """
    torch.ops.flycuda.pool_ommatidia.default(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count,
                                             readouts)


def new_step_counter(device: torch.device | str = "cpu", start: int = 0) -> torch.Tensor:
    """A fresh step counter on ``device``: int64 [2] = {``start``, reserved}.

    ``step[0]`` is the step (read it with ``int(step[0])``, set it with any tensor
    op: ``step += k``, ``step.fill_(s)``, ``step.copy_(other)``). ``step[1]`` is
    reserved: no op reads it, so any value there is harmless.

    The tensor views the first 16 of the 20 bytes of its storage
    (``launch_plan.COUNTER_BYTES``). Bytes 16..19 hold the ticket that lets
    :func:`motion_to_ctrl` fuse its advance into its one launch (each block takes
    one ticket with ``atomicInc``; the last block advances and the ticket wraps to
    0 by itself). No op on the tensor reaches them, and no int64 view of the
    storage can cover them, so no value a user writes to the counter can make a
    launch read an advanced step or skip an advance. A counter without them (a
    plain [1], ``step.clone()``, ``step.to(...)``, a [2] sliced from a bigger
    buffer) is accepted by every op and advanced by a second one-thread launch
    instead. One counter must not be used on two streams at once.
    """
    raw = int(start).to_bytes(8, "little", signed=True) + bytes(_COUNTER_BYTES - 8)
    buf = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(device)  # one copy to the device
    return torch.empty(0, dtype=torch.int64, device=buf.device).set_(buf.untyped_storage(), 0, (2,), (1,))


_COUNTER_BYTES = 20  # csrc/kernels/motion_to_ctrl.cuh kCounterBytes (flycuda.launch_plan.COUNTER_BYTES)


def render_tiles(geom_xpos: torch.Tensor, geom_xmat: torch.Tensor, cam_pos: torch.Tensor,
                 cam_mat: torch.Tensor, worlds: torch.Tensor, scene, *, fovy, height: int,
                 width: int, rgb: torch.Tensor | None = None, depth: torch.Tensor | None = None,
                 seg: torch.Tensor | None = None, mosaic_cols: int = 0, samples: int = 1,
                 shadows: bool = False, zfar: float | None = None, pixels: torch.Tensor | None = None,
                 top_boxes: torch.Tensor | None = None, timers: torch.Tensor | None = None,
                 check: bool = True) -> None:
    """Ray-casts each selected world's cameras into preallocated outputs.

    Args:
        geom_xpos: float32 [W, G, 3] geom positions (e.g. ``wp.to_torch(d.geom_xpos)``).
        geom_xmat: float32 [W, G, 9] (or [W, G, 3, 3]) geom orientations.
        cam_pos: float32 [W, C, 3] the C cameras' positions per world ([W, 3]: one camera);
            cam_mat: float32 [W, C, 9] (or [W, C, 3, 3]; [W, 9] or [W, 3, 3]: one camera)
            orientations (MuJoCo convention: looks along -z, y up). C <= 8.
        worlds: int32 [S] worlds to render; image (s, c) shows camera c of world ``worlds[s]``.
        scene: a :class:`flycuda.scene.Scene` (geoms, meshes with BVHs, lights).
        fovy: vertical field of view in degrees, one per camera (a number: every camera).
        height, width: image size in pixels.
        rgb: uint8 [S, C, H, Wd, 3] images ([S, H, Wd, 3] when C = 1), or with a pixel
            list [S, C, P, 3], or with ``mosaic_cols`` > 0 the mosaic
            [ceil(S * C / cols) * H, cols * Wd, 3] (image s * C + c at row (s * C + c) // cols).
        depth: float32 [S, C, H, Wd] planar depth (0 for background); seg: int32 likewise,
            the geom id (-1 for background); [S, C, P] with a pixel list.
        samples: n: n x n rays per pixel, averaged (depth/seg from the first).
        shadows: cast shadow rays towards the lights that cast shadows.
        zfar: far plane (planar depth; 0 = none); default the scene's (MuJoCo's).
        pixels: int32 [P] pixel ids (py * width + px) to cast instead of every pixel
            (e.g. the raw pixels a retina reads); outputs then hold P entries per image.
        top_boxes: float32 [S, Nt, 12] workspace (Nt = ``scene.top_links.shape[0]``):
            each selected world's top-level BVH, refit from the poses at the start of the
            call. Allocated here when None (pass one to capture the call in a graph).
        timers: int64 [blocks, 5] in-kernel stage timers per block of 128 pixels
            (flycuda.launch_plan.render_blocks): trace, shade (summed over its pixels),
            the block's total (clock64 cycles on CUDA, nanoseconds on CPU), and the
            primary rays' BVH nodes visited and triangles tested.
        check: validate the index values (worlds, geom ids, pixel ids, BVH links and
            depths); on CUDA this copies them to the host (skipped while capturing a
            graph). Pass False only for inputs already validated (TileRenderer checks
            its static scene once).

    Outputs left as None are not computed. With top_boxes given nothing is
    allocated: the call can be captured in a CUDA graph.
    """
    torch.ops.flycuda.render_tiles.default(*render_tiles_args(
        geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, fovy=fovy, height=height, width=width, rgb=rgb,
        depth=depth, seg=seg, mosaic_cols=mosaic_cols, samples=samples, shadows=shadows, zfar=zfar, pixels=pixels,
        top_boxes=top_boxes, timers=timers, check=check))


def render_tiles_args(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, *, fovy, height, width, rgb=None,
                      depth=None, seg=None, mosaic_cols=0, samples=1, shadows=False, zfar=None, pixels=None,
                      top_boxes=None, timers=None, check=True) -> tuple:
    """The op's argument tuple for :func:`render_tiles`' arguments (one camera's [W, 3],
    [S, H, Wd(, 3)] forms given their camera dim, absent outputs as empty tensors).
    TileRenderer builds it once and calls the op with it on every render."""
    dev = geom_xpos.device
    cam_pos = cam_pos.unsqueeze(1) if cam_pos.dim() == 2 else cam_pos  # [W, 3]: one camera
    cam_mat = _flat9("cam_mat", cam_mat, cam_mat.dim() - 2)
    cam_mat = cam_mat.unsqueeze(1) if cam_mat.dim() == 2 else cam_mat
    C = cam_pos.shape[1] if cam_pos.dim() == 3 else 1
    fov = [float(f) for f in fovy] if isinstance(fovy, (list, tuple)) else [float(fovy)] * C
    if rgb is not None and mosaic_cols == 0 and rgb.dim() == (3 if pixels is not None else 4) and C == 1:
        rgb = rgb.unsqueeze(1)
    if depth is not None and depth.dim() == (2 if pixels is not None else 3) and C == 1:
        depth = depth.unsqueeze(1)
    if seg is not None and seg.dim() == (2 if pixels is not None else 3) and C == 1:
        seg = seg.unsqueeze(1)
    if top_boxes is None:
        top_boxes = torch.empty(worlds.shape[0], scene.top_links.shape[0], 12, device=dev)
    empty_u8 = torch.empty(0, dtype=torch.uint8, device=dev)
    empty_f = torch.empty(0, dtype=torch.float32, device=dev)
    empty_i = torch.empty(0, dtype=torch.int32, device=dev)
    return (geom_xpos, _flat9("geom_xmat", geom_xmat, 2), cam_pos, cam_mat, worlds, scene.tensors(), fov,
            float(scene.zfar if zfar is None else zfar), int(samples), bool(shadows), int(height), int(width),
            int(mosaic_cols), empty_i if pixels is None else pixels, bool(check),
            empty_u8 if rgb is None else rgb, empty_f if depth is None else depth,
            empty_i if seg is None else seg, top_boxes,
            torch.empty(0, dtype=torch.int64, device=dev) if timers is None else timers)


def _flat9(name: str, t: torch.Tensor, n: int) -> torch.Tensor:
    """[..., 3, 3] -> [..., 9] as a view (n leading dims): never a silent copy."""
    if t.dim() != n + 2 or t.shape[-2:] != (3, 3):
        return t
    try:
        return t.view(*t.shape[:n], 9)
    except RuntimeError as e:
        raise ValueError(f"flycuda.render_tiles: argument '{name}' of shape {tuple(t.shape)} and strides "
                         f"{t.stride()} cannot be viewed as [..., 9] (each 3x3 matrix must be "
                         f"contiguous); pass it as [..., 9] or make it contiguous") from e


# --- fake kernels (shape/dtype checks only) for torch.compile ---------------------

def _check_same_device(op: str, ref_name: str, ref: torch.Tensor, **others) -> None:
    for name, t in others.items():
        if t is not None:
            torch._check(t.device == ref.device,
                         lambda: f"flycuda.{op}: argument '{name}' must be on {ref.device} "
                                 f"(the device of '{ref_name}'), got {t.device}")


def _check_counter(op: str, step: torch.Tensor) -> None:
    torch._check(step.dtype == torch.int64 and step.dim() == 1 and step.shape[0] in (1, 2),
                 lambda: f"flycuda.{op}: argument 'step' must be an int64 step counter of shape [1] or "
                         f"[2], got {step.dtype} {tuple(step.shape)}")


@torch.library.register_fake("flycuda::motion_to_ctrl")
def _motion_to_ctrl_fake(motion, step, ctrl, act_ids, offsets, frames_per_step, mode, advance):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.motion_to_ctrl: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} {tuple(ctrl.shape)}")
    torch._check(motion.dim() == 3 and motion.dtype == torch.float32,
                 lambda: f"flycuda.motion_to_ctrl: argument 'motion' must be float32 [M, T, D], got {motion.dtype} {tuple(motion.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == motion.shape[2],
                 lambda: f"flycuda.motion_to_ctrl: argument 'act_ids' must have shape [D] = [{motion.shape[2]}], got {tuple(act_ids.shape)}")
    _check_same_device("motion_to_ctrl", "ctrl", ctrl, motion=motion, step=step,
                       act_ids=act_ids, offsets=offsets)
    _check_counter("motion_to_ctrl", step)
    return None


@torch.library.register_fake("flycuda::spline_to_ctrl")
def _spline_to_ctrl_fake(coeffs, step, ctrl, act_ids, offsets, frames_per_step, mode, advance):
    torch._check(ctrl.dim() == 2 and ctrl.dtype == torch.float32,
                 lambda: f"flycuda.spline_to_ctrl: argument 'ctrl' must be float32 [W, nu], got {ctrl.dtype} {tuple(ctrl.shape)}")
    torch._check(coeffs.dim() == 4 and coeffs.dtype == torch.float64 and coeffs.shape[2] == 4,
                 lambda: f"flycuda.spline_to_ctrl: argument 'coeffs' must be float64 [M, T, 4, D], got {coeffs.dtype} {tuple(coeffs.shape)}")
    torch._check(act_ids.dim() == 1 and act_ids.shape[0] == coeffs.shape[3],
                 lambda: f"flycuda.spline_to_ctrl: argument 'act_ids' must have shape [D] = [{coeffs.shape[3]}], got {tuple(act_ids.shape)}")
    _check_same_device("spline_to_ctrl", "ctrl", ctrl, coeffs=coeffs, step=step, act_ids=act_ids, offsets=offsets)
    _check_counter("spline_to_ctrl", step)
    return None


@torch.library.register_fake("flycuda::advance_step")
def _advance_step_fake(step, n):
    _check_counter("advance_step", step)
    return None


@torch.library.register_fake("flycuda::record_qpos")
def _record_qpos_fake(qpos, adrs, history, step, every):
    torch._check(history.dim() == 3 and history.dtype == torch.float32,
                 lambda: f"flycuda.record_qpos: argument 'history' must be float32 [W, R, D], got {history.dtype} {tuple(history.shape)}")
    torch._check(qpos.dim() == 2 and qpos.shape[0] == history.shape[0],
                 lambda: f"flycuda.record_qpos: argument 'qpos' must have shape [W, nq] with W = {history.shape[0]}, got {tuple(qpos.shape)}")
    _check_same_device("record_qpos", "history", history, qpos=qpos, step=step, adrs=adrs)
    _check_counter("record_qpos", step)
    return None


@torch.library.register_fake("flycuda::record_chunk")
def _record_chunk_fake(source, columns, chunks, step, every):
    torch._check(chunks.dim() == 4 and chunks.dtype == torch.float32,
                 lambda: f"flycuda.record_chunk: argument 'chunks' must be float32 [B, W, C, D], got {chunks.dtype} {tuple(chunks.shape)}")
    torch._check(source.dim() == 2 and source.shape[0] == chunks.shape[1],
                 lambda: f"flycuda.record_chunk: argument 'source' must have shape [W, N] with W = {chunks.shape[1]}, got {tuple(source.shape)}")
    torch._check(columns.dim() == 1 and columns.shape[0] == chunks.shape[3],
                 lambda: f"flycuda.record_chunk: argument 'columns' must have shape [{chunks.shape[3]}], got {tuple(columns.shape)}")
    _check_same_device("record_chunk", "chunks", chunks, source=source, step=step, columns=columns)
    _check_counter("record_chunk", step)
    return None


@torch.library.register_fake("flycuda::pool_ommatidia")
def _pool_ommatidia_fake(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, readouts):
    op = "flycuda.pool_ommatidia"
    torch._check(readouts.dim() == 4 and readouts.shape[3] == 2 and readouts.dtype == torch.float32,
                 lambda: f"{op}: argument 'readouts' must be float32 [S, E, O, 2], got {readouts.dtype} {tuple(readouts.shape)}")
    torch._check(pixels.dim() == 4 and pixels.dtype == torch.uint8 and pixels.shape[3] == 3
                 and tuple(pixels.shape[:2]) == tuple(readouts.shape[:2]),
                 lambda: f"{op}: argument 'pixels' must be uint8 [S, E, P, 3] with [S, E] = {list(readouts.shape[:2])}, got {pixels.dtype} {tuple(pixels.shape)}")
    O = readouts.shape[2]
    for name, t, n in (("omm_ptr", omm_ptr, O + 1), ("omm_pixels", omm_pixels, None), ("omm_channel", omm_channel, O),
                       ("omm_column", omm_column, O), ("omm_count", omm_count, O)):
        torch._check(t.dtype == torch.int32 and t.dim() == 1 and (n is None or t.shape[0] == n),
                     lambda: f"{op}: argument '{name}' must be int32 [{n if n is not None else 'nnz'}], got {t.dtype} {tuple(t.shape)}")
    _check_same_device("pool_ommatidia", "readouts", readouts, pixels=pixels, omm_ptr=omm_ptr, omm_pixels=omm_pixels,
                       omm_channel=omm_channel, omm_column=omm_column, omm_count=omm_count)
    return None


@torch.library.register_fake("flycuda::render_tiles")
def _render_tiles_fake(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, fovy, zfar, samples, shadows,
                       height, width, mosaic_cols, pixels, check, rgb, depth, seg, top_boxes, timers):
    torch._check(geom_xpos.dim() == 3 and geom_xpos.dtype == torch.float32,
                 lambda: f"flycuda.render_tiles: argument 'geom_xpos' must be float32 [W, G, 3], got {geom_xpos.dtype} {tuple(geom_xpos.shape)}")
    torch._check(cam_pos.dim() == 3 and len(fovy) == cam_pos.shape[1],
                 lambda: f"flycuda.render_tiles: argument 'fovy' must hold one angle per camera, got {len(fovy)} for cam_pos {tuple(cam_pos.shape)}")
    torch._check(len(scene) == 11, lambda: f"flycuda.render_tiles: argument 'scene' must hold 11 tensors, got {len(scene)}")
    torch._check(height > 0 and width > 0, lambda: "flycuda.render_tiles: the image must not be empty")
    _check_same_device("render_tiles", "geom_xpos", geom_xpos, geom_xmat=geom_xmat, cam_pos=cam_pos,
                       cam_mat=cam_mat, worlds=worlds, pixels=pixels, rgb=rgb, depth=depth, seg=seg,
                       top_boxes=top_boxes, timers=timers)
    return None
