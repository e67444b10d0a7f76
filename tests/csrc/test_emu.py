"""Every __global__ kernel of csrc/kernels/, executed on the emulated grid (csrc/emu/).

The kernels' own source runs on OS threads (one per CUDA thread, blocks
concurrently), under AddressSanitizer + UndefinedBehaviorSanitizer ("asan") and,
where threads or blocks synchronize, ThreadSanitizer ("tsan"). Each case is
checked against the C++ CPU op bit for bit (the agreement the GPU tests demand
of CUDA) and against flycuda.reference with the op tests' tolerance.

Branches reached (csrc/kernels/):
  motion_to_ctrl_kernel: idx < W*D and idx >= W*D (partial last block; W=0 with a
    fused advance: one block of idle threads); offsets null / float32 / float64;
    M == 1 and M == W; clamp and loop, fractional/negative/past-the-end/NaN offsets
    (sample_frame: clamp both ends, loop wrap below 0, non-finite -> frame 0,
    i1 past the end: wrap and clamp; blend a == 0 exact copy and a != 0);
    int32 and int64 act_ids; 32- and 64-bit index math (the latter, which grids past
    2^31 threads take, forced on small grids); contiguous, row-strided and transposed
    ctrl; steps up to 1e9; advance == 0, fused advance (new_step_counter: every block takes one
    ticket from the hidden word, the last one advances) and the unfused [1] counter
    (second launch); the atomics of every launch counted (one per block fused, none
    unfused) at 1, 672 and 5000 blocks; every counter a user can write.
  motion_to_ctrl_kernel<SplineFrames> (spline_to_ctrl): the same cases with cubic
    pieces (cubic: a == 0 exact copy and a != 0; the loop's wrap piece).
  advance_step_kernel: counters [1] and [2], negative and huge n.
  pool_ommatidia_kernel: idx >= S*E*O (partial last block), exact maps over a P-list
    and over whole images (duplicate reads), fast maps (ommatidia with no reads),
    yellow and pale (columns 0 and 1, channels 1 and 2), strided readouts; a corrupt
    map (what escapes the host checks in a capture: offsets below 0, past nnz and
    decreasing, pixel ids below 0 and past P, channel and column out of range) against
    the grid reference; exact_quotient's device path against division for every x
    and n in 1..65536 and a sweep up to 2^31 - 1.
  record_kernel (record_qpos and record_chunk): s < 0, s % every != 0, k >= limit
    (early returns), idx >= W*D (partial block), recorded steps; strided sources
    and outputs; int32/int64 columns with repeats; the ring's slot and row for
    k past B*C (record_chunk wraps), one-row chunks.
  refit_top_kernel: one block per selected world, threads past the top level idle;
    every selected world and a bad world id (all boxes empty); leaf children of every
    bounded geom type (mesh: its root's two child boxes), internal children as unions
    bottom-up; corrupted top levels (links back and past the end, a leaf of a missing
    geom, a leaf of two geoms).
  render_tiles_kernel / render_tiles_timed_kernel: 16 x 8 blocks of 8 x 4 warps
    (threads past the image's edge idle) and pixel lists (the last block's threads past
    the list idle); one and two cameras per world (different fovy, fixed cameras with
    a stride-0 world dim); tiles and mosaic (empty cells cleared), rgb/depth/seg each
    present or absent, samples 1 and 2, shadows on and off, a near far plane, a NaN
    light (reads 0), stage timers and work counts (atomics and two __syncthreads) and
    none; unbounded geoms then the two-level traversal (top-level primitive leaves
    tested at once, mesh leaves entered with the marker, nearer child first), every
    geom type (checkered plane, sphere, capsule, ellipsoid, cylinder, box, mesh BVH),
    axis-aligned rays; corrupted mesh BVHs (links back and past the end, leaves of
    triangles past the end, mesh roots past the nodes or negative) and unbounded
    entries out of range, all in bounds.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess

import numpy as np
import pytest
import torch
from helpers import emu
from helpers.brain import brain_args
from helpers.cases import (
    EPISODE_OPS,
    M2C_SHAPES,
    SENSE_OUTPUTS,
    clone_args,
    episode_args,
    hybrid_controls,
    hybrid_params,
    hybrid_senses,
    hybrid_state,
    make_m2c_case,
    odor_args,
    plume_args,
    senses_args,
)
from helpers.connectome import connectome_args
from helpers.devices import poison_like, strided_view
from helpers.images import assert_images_close, corrupt_scenes
from helpers.worlds import fly_sim, prims_sim

import flycuda
from flycuda import reference
from flycuda.ops import launch_plan

pytestmark = pytest.mark.emu

SANITIZERS = ["asan", "tsan"]
# The tests that run the op cases also run them once on a gcov build ("cov"); the
# last test of this file then checks that they executed every line of the kernels.
FLAVOURS = SANITIZERS + ["cov"]


# --- motion_to_ctrl ----------------------------------------------------------------

def _counter(size: int, value: int) -> torch.Tensor:
    c = flycuda.new_step_counter("cpu", value)
    return c if size == 2 else c[:1].clone()


def _put_counter(case: emu.Case, counter: torch.Tensor) -> emu.Case:
    return case.counter(counter)


def _ticket_out(case: emu.Case) -> int:
    """The hidden ticket after the run (bytes 16..19 of the counter's storage)."""
    return int(case.out["counter"].view(torch.int32)[4])


def _check_counter(case: emu.Case, cpu_counter: torch.Tensor, what) -> None:
    """The emulated counter equals the CPU op's, and a new_step_counter's ticket is back
    to 0 (it wrapped), the padding untouched."""
    out, n = case.out["counter"], cpu_counter.numel()
    assert torch.equal(out[:n], cpu_counter), f"counter: {what}"
    if case.scalars["counter_bytes"] == launch_plan.COUNTER_BYTES:
        assert len(out) == 3 and int(out[2]) == 0, f"ticket and padding: {what} {out.tolist()}"
    else:
        assert len(out) == n


def _m2c_cases():
    combos = itertools.product(M2C_SHAPES + [(0, 1, 4, 3, 5)], ["clamp", "loop"],
                               [(None, 1.0), ("int", 1.0), ("wild", 0.33), ("wild", 2.5)])
    cycle = itertools.cycle(itertools.product([0, 5, 1234, 10 ** 9], ["contiguous", "row_stride", "transposed"],
                                              [torch.int64, torch.int32], [(2, 3), (1, 3), (2, 0)]))
    for (shape, mode, (okind, fps)), (step, ckind, adt, (csize, adv)) in zip(combos, cycle):
        if shape[0] == 1000 and (okind, mode) != ("wild", "loop"):
            continue  # the big shape once: 165 blocks
        if shape[0] == 0:
            ckind, csize, adv = "contiguous", 2, 2
        yield dict(shape=shape, mode=mode, okind=okind, fps=fps, step=step, ckind=ckind, adt=adt,
                   csize=csize, advance=adv)


def _index64(p) -> int:
    """1 for the cases at step 1234 (a quarter): their launch takes the kernel's 64-bit
    index math, which only grids past 2^31 threads take on a GPU (too big to emulate)."""
    return int(p["step"] == 1234)


def _m2c_case(p):
    W, M, T, D, nu = p["shape"]
    motion, act_ids, offsets = make_m2c_case(W, M, T, D, nu, p["okind"], "cpu", p["adt"])
    if p["okind"] == "wild" and W > 2:
        offsets[1] = float("nan")  # non-finite positions read frame 0
    ctrl, parent = strided_view(W, nu, p["ckind"], "cpu")
    counter = _counter(p["csize"], p["step"])
    case = emu.Case("motion_to_ctrl", W=W, nu=nu, frames_per_step=float(p["fps"]),
                    loop=int(p["mode"] == "loop"), advance=p["advance"], index64=_index64(p))
    case.array("motion", motion).array("act_ids", act_ids)
    _put_counter(case, counter)
    if offsets is not None:
        case.array("offsets", offsets)
    case.strided("ctrl", ctrl, "ctrl")
    # The CPU op on the same inputs: the emulated kernel must equal it bit for bit.
    cpu_counter = counter.clone()
    flycuda.motion_to_ctrl(motion, cpu_counter, ctrl, act_ids, offsets=offsets,
                           frames_per_step=p["fps"], mode=p["mode"], advance=p["advance"])
    ref_parent = parent.clone()  # parent now holds the CPU op's result
    return case, dict(cpu_parent=ref_parent, cpu_counter=cpu_counter, motion=motion, act_ids=act_ids,
                      offsets=offsets, counter=counter, parent_shape=parent.shape)


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_motion_to_ctrl(sanitizer):
    params = list(_m2c_cases())
    built = [_m2c_case(p) for p in params]
    emu.run([c for c, _ in built], sanitizer)
    for p, (case, exp) in zip(params, built):
        got_parent = case.out["ctrl"].view(exp["parent_shape"])
        assert torch.equal(got_parent, exp["cpu_parent"]), f"ctrl differs from the CPU op: {p}"
        _check_counter(case, exp["cpu_counter"], p)
        assert int(case.out["counter"][0]) == p["step"] + p["advance"]
        launches = case.out["launches"]  # (blocks, atomics, max per block) per launch
        W, D = p["shape"][0], p["shape"][3]
        plan = launch_plan.plan_motion_to_ctrl(W, D, p["advance"], p["csize"] == 2)
        assert len(launches) == plan.run_kernel + plan.advance_kernel, f"launches: {p}"
        if plan.fused:  # one ticket per block, nothing else
            assert launches[0].tolist() == [plan.blocks, plan.blocks, 1], f"fused: {p}"
        else:
            assert int(launches[:, 1].sum()) == 0, f"unfused: {p}"
        assert int(launches[:, 2].max()) <= 1, f"atomics per block: {p} {launches.tolist()}"


def test_motion_to_ctrl_matches_reference():
    """The emulated kernel against the float64 reference (tolerance as the op tests)."""
    for p in list(_m2c_cases())[::3]:
        case, exp = _m2c_case(p)
        emu.run([case], "asan")
        W, M, T, D, nu = p["shape"]
        ctrl_ref = poison_like(torch.empty(W, nu))
        ctrl_emu = case.out["ctrl"]
        ref_step = flycuda.new_step_counter("cpu", p["step"])
        reference.motion_to_ctrl(exp["motion"], ref_step, ctrl_ref, exp["act_ids"], offsets=exp["offsets"],
                                 frames_per_step=p["fps"], mode=p["mode"], advance=p["advance"])
        view = _view_of(ctrl_emu.view(exp["parent_shape"]), p["ckind"], nu)
        cols = exp["act_ids"].long()
        exact = p["fps"] == 1.0 and p["okind"] in (None, "int")
        tol = dict(rtol=0, atol=0) if exact else dict(rtol=2 ** -23, atol=0)
        torch.testing.assert_close(view[:, cols], ctrl_ref[:, cols], **tol)
        assert int(ref_step[0]) == int(case.out["counter"][0])


def _s2c_case(p):
    """A spline_to_ctrl case: the motion_to_ctrl case's recording made into cubic pieces."""
    W, M, T, D, nu = p["shape"]
    _, act_ids, offsets = make_m2c_case(W, M, T, D, nu, p["okind"], "cpu", p["adt"])
    coeffs = flycuda.spline_coeffs(torch.randn(M, T, D, dtype=torch.float64).cumsum(1))
    if p["okind"] == "wild" and W > 2:
        offsets[1] = float("nan")
    ctrl, parent = strided_view(W, nu, p["ckind"], "cpu")
    counter = _counter(p["csize"], p["step"])
    case = emu.Case("spline_to_ctrl", W=W, nu=nu, frames_per_step=float(p["fps"]),
                    loop=int(p["mode"] == "loop"), advance=p["advance"], index64=_index64(p))
    case.array("coeffs", coeffs).array("act_ids", act_ids)
    _put_counter(case, counter)
    if offsets is not None:
        case.array("offsets", offsets)
    case.strided("ctrl", ctrl, "ctrl")
    cpu_counter = counter.clone()
    flycuda.spline_to_ctrl(coeffs, cpu_counter, ctrl, act_ids, offsets=offsets, frames_per_step=p["fps"],
                           mode=p["mode"], advance=p["advance"])
    return case, dict(cpu_parent=parent.clone(), cpu_counter=cpu_counter, coeffs=coeffs, act_ids=act_ids,
                      offsets=offsets, parent_shape=parent.shape)


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_spline_to_ctrl(sanitizer):
    """The cubic kernel: bit for bit the CPU op, which equals the reference bit for bit
    (tests/ops/test_spline_to_ctrl.py); a third of the cases also against the reference here."""
    params = list(_m2c_cases())
    built = [_s2c_case(p) for p in params]
    emu.run([c for c, _ in built], sanitizer)
    for i, (p, (case, exp)) in enumerate(zip(params, built)):
        assert torch.equal(case.out["ctrl"].view(exp["parent_shape"]), exp["cpu_parent"]), f"ctrl: {p}"
        _check_counter(case, exp["cpu_counter"], p)
        assert int(case.out["counter"][0]) == p["step"] + p["advance"]
        if i % 3 == 0 and sanitizer == "asan":
            W, nu = p["shape"][0], p["shape"][4]
            ref = poison_like(torch.empty(W, nu))
            reference.spline_to_ctrl(exp["coeffs"], flycuda.new_step_counter("cpu", p["step"]), ref,
                                     exp["act_ids"], offsets=exp["offsets"], frames_per_step=p["fps"],
                                     mode=p["mode"])
            view = _view_of(case.out["ctrl"].view(exp["parent_shape"]), p["ckind"], nu)
            cols = exp["act_ids"].long()
            assert torch.equal(view[:, cols], ref[:, cols]), f"reference: {p}"


def _view_of(parent, kind, nu):
    return parent if kind == "contiguous" else parent[:, 2:2 + nu] if kind == "row_stride" else parent.t()


@pytest.mark.parametrize("sanitizer", FLAVOURS)
@pytest.mark.parametrize("b_at", [3, 256], ids=["neighbours", "2KiB-apart"])
def test_fused_advance_two_counters_overlapping(sanitizer, b_at):
    """Two fused launches on different counters, from two host threads at once, 40
    times each (16 under TSan, whose happens-before analysis needs no lucky timing, at
    2.5x the cost): every block reads the pre-advance step and each counter advances
    exactly once per launch (tickets are per counter). The counters (each the
    20 bytes of a new_step_counter, padded to 24) sit side by side, or 2 KiB apart."""
    W, D, starts = 300, 7, (5, 9)  # 2100 threads: 9 blocks per launch
    reps = 16 if sanitizer == "tsan" else 40
    T = max(starts) + reps + 2
    motion = torch.randn(1, T, D)
    case = emu.Case("motion_to_ctrl_overlap", W=W, nu=D, frames_per_step=1.0, loop=0, advance=1,
                    reps=reps, ctrl_s0=D, ctrl_s1=1, b_at=b_at)
    case.array("motion", motion).array("act_ids", torch.arange(D))
    counters = torch.full((b_at + 3,), -7, dtype=torch.int64)  # poison between the counters
    counters[0:3] = torch.tensor([starts[0], 0, 0])
    counters[b_at:b_at + 3] = torch.tensor([starts[1], 0, 0])
    case.array("counters", counters)
    emu.run([case], sanitizer)
    assert case.out["wrong"].tolist() == [0, 0], "a block read an advanced counter or an advance was lost"
    expected = counters.clone()
    expected[0], expected[b_at] = starts[0] + reps, starts[1] + reps
    assert torch.equal(case.out["counters"], expected)


# --- advance_step ------------------------------------------------------------------

@pytest.mark.parametrize("sanitizer", ["asan", "cov"])
def test_advance_step(sanitizer):
    params = [(1, 0, 1), (2, 7, 3), (1, 10 ** 12, -5), (2, -3, 10 ** 12)]
    cases = [emu.Case("advance_step", n=n).array("counter", _counter(size, start)) for size, start, n in params]
    emu.run(cases, sanitizer)
    for (size, start, n), case in zip(params, cases):
        assert case.out["counter"].tolist() == ([start + n, 0] if size == 2 else [start + n])


# --- pool_ommatidia ----------------------------------------------------------------

def _pool_case(pixels: torch.Tensor, args, readouts: torch.Tensor) -> emu.Case:
    """The plan check_pool_ommatidia builds; readouts as its base buffer and strides."""
    S, E, O, _ = readouts.shape
    ptr, pix, chan, col, count = args
    case = emu.Case("pool_ommatidia", S=S, E=E, P=pixels.shape[2], O=O, nnz=pix.shape[0])
    case.array("pixels", pixels).array("omm_ptr", ptr).array("omm_pixels", pix).array("omm_channel", chan)
    case.array("omm_column", col).array("omm_count", count)
    return case.strided("readouts", readouts, "readouts")


def _pool_maps():
    from helpers.retinas import synthetic_retina

    from flycuda.vision import RetinaMap

    for (H, W, O), kind, (S, E) in [((37, 29, 23), "exact", (1, 1)), ((37, 29, 23), "full", (3, 2)),
                                    ((51, 45, 40), "fast2", (2, 2)), ((51, 45, 40), "exact", (5, 2))]:
        rm = RetinaMap.from_arrays(*synthetic_retina(H, W, O))
        pm = {"exact": rm.exact, "full": lambda: rm.exact().full_image(), "fast2": lambda: rm.fast(2)}[kind]()
        yield pm, S, E


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_pool_ommatidia(sanitizer):
    cases, expected = [], []
    for pm, S, E in _pool_maps():
        pixels = torch.randint(0, 256, (S, E, pm.rays, 3), dtype=torch.uint8)
        parent = torch.full((E, pm.num_ommatidia + 2, 2, S), float("nan"))
        readouts = parent[:, 1:-1].permute(3, 0, 1, 2)  # strided [S, E, O, 2]
        cases.append(_pool_case(pixels, pm.args(), readouts))
        flycuda.pool_ommatidia(pixels, *pm.args(), readouts)
        expected.append(parent.clone())
    emu.run(cases, sanitizer)
    for i, (case, cpu_parent) in enumerate(zip(cases, expected)):
        got = case.out["readouts"].view(cpu_parent.shape)
        assert torch.equal(got.isnan(), cpu_parent.isnan()), f"case {i}: different elements written"
        assert torch.equal(got.nan_to_num(), cpu_parent.nan_to_num()), f"case {i}: readouts differ from the CPU op"


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_pool_ommatidia_corrupt_map(sanitizer):
    """Map values no host check let through (as after a write during capture): clamped
    or skipped as reference.grid_pool mirrors, never out of bounds."""
    from flycuda.reference import grid_pool

    S, E, P = 2, 1, 9
    ptr = torch.tensor([-4, 2, 1, 5, 30, 6, 7, 8], dtype=torch.int32)   # below 0, decreasing, past nnz
    pix = torch.tensor([0, 8, -1, 9, 4, 4, 100, 3], dtype=torch.int32)  # below 0 and past P
    chan = torch.tensor([1, 2, 0, 5, -1, 2, 1], dtype=torch.int32)
    col = torch.tensor([0, 1, 7, 0, 1, -1, 1], dtype=torch.int32)
    count = torch.tensor([3, 1, 2, 4, 1, 2, 9], dtype=torch.int32)
    pixels = torch.randint(0, 256, (S, E, P, 3), dtype=torch.uint8)
    readouts = torch.full((S, E, 7, 2), float("nan"))
    want = readouts.clone()
    grid_pool.pool_ommatidia(pixels, ptr, pix, chan, col, count, want, threads=4)
    case = _pool_case(pixels, (ptr, pix, chan, col, count), readouts)
    emu.run([case], sanitizer)
    got = case.out["readouts"].view(want.shape)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
    assert want[:, :, 2].isnan().all() and not want[:, :, 0].isnan().any()  # column 7: nothing written


def test_pool_quotients_are_divisions():
    """kernels::exact_quotient's device path (one Markstein correction) equals float64
    division x / n for every x in [0, 255]: every n up to 65536, and around every power
    of two and at random up to 2^31 - 1."""
    g = torch.Generator().manual_seed(3)
    around = [(1 << e) + d for e in range(16, 31) for d in range(-64, 65)]
    counts = torch.cat([torch.arange(1, 65537), torch.tensor(around), torch.randint(65537, 2 ** 31 - 1, (20000,), generator=g),
                        torch.tensor([2 ** 31 - 1])]).to(torch.int32)
    case = emu.Case("pool_quotients").array("counts", counts)
    emu.run([case], "asan")
    assert case.out["mismatches"].tolist() == [0, -1]


# --- record_qpos -------------------------------------------------------------------

def _rq_cases():
    shapes = [(1, 1, 1, 1), (3, 8, 7, 5), (33, 49, 42, 10), (257, 69, 42, 3)]  # (W, nq, D, R)
    for (W, nq, D, R), every, step, kind, adt in zip(
            itertools.cycle(shapes), [1, 3] * 8, [-1, 0, 1, 3, 6, 8, 9, 10 ** 9] * 2,
            itertools.cycle(["contiguous", "row_stride", "transposed"]), itertools.cycle([torch.int32, torch.int64])):
        yield (W, nq, D, R, every, step, kind, adt)


def _record_case(src: torch.Tensor, cols: torch.Tensor, out4: torch.Tensor, step: int, every: int, limit: int,
                 csize: int) -> emu.Case:
    """The plan check_record_qpos / check_record_chunk build, for out4 [B, W, C, D]."""
    B, W, C, D = out4.shape
    case = emu.Case("record", W=W, D=D, N=src.shape[1], every=every, limit=limit, B=B, C=C)
    case.strided("src", src, "src").strided("out", out4, "out")
    for i, name in enumerate(("out_sb", "out_sw", "out_sr", "out_sd")):  # strides named as the plan's
        case.scalars[name] = case.scalars.pop(f"out_s{i}")
    return case.array("cols", cols).array("step", _counter(csize, step))


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_record_qpos(sanitizer):
    params, cases, expected = list(_rq_cases()), [], []
    for W, nq, D, R, every, step, kind, adt in params:
        qpos, _ = strided_view(W, nq, kind, "cpu")
        qpos.copy_(torch.randn(W, nq))
        adrs = torch.randint(0, nq, (D,), dtype=adt)  # repeats allowed
        hist_parent = poison_like(torch.empty(R, D, W))
        history = hist_parent.permute(2, 0, 1)  # strided [W, R, D]
        cases.append(_record_case(qpos, adrs, history.unsqueeze(0), step, every, R, 1 + (step % 2 == 0)))
        flycuda.record_qpos(qpos, adrs, history, flycuda.new_step_counter("cpu", step), every=every)
        expected.append(hist_parent.clone())  # the CPU op's result (checked against the reference elsewhere)
    emu.run(cases, sanitizer)
    for p, case, cpu_parent in zip(params, cases, expected):
        got = case.out["out"].view(cpu_parent.shape)
        assert torch.equal(got, cpu_parent), f"history differs from the CPU op: {p}"


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_record_chunk(sanitizer):
    shapes = [(1, 1, 1, 1, 1), (3, 8, 7, 2, 5), (33, 49, 42, 2, 3), (257, 73, 16, 3, 1)]  # (W, N, D, B, C)
    params = list(zip(itertools.cycle(shapes), [1, 3] * 6, [-1, 0, 5, 6, 9, 10 ** 9 + 2, 31, 3, 48, 12, 7, 2],
                      itertools.cycle(["contiguous", "row_stride", "transposed"]),
                      itertools.cycle([torch.int32, torch.int64])))
    cases, expected = [], []
    for (W, N, D, B, C), every, step, kind, cdt in params:
        src, _ = strided_view(W, N, kind, "cpu")
        src.copy_(torch.randn(W, N))
        cols = torch.randint(0, N, (D,), dtype=cdt)
        parent = poison_like(torch.empty(C, B, D, W))
        chunks = parent.permute(1, 3, 0, 2)  # strided [B, W, C, D]
        cases.append(_record_case(src, cols, chunks, step, every, 2 ** 62, 1 + (step % 2 == 0)))
        flycuda.record_chunk(src, cols, chunks, flycuda.new_step_counter("cpu", step), every=every)
        expected.append(parent.clone())
    emu.run(cases, sanitizer)
    for p, case, cpu_parent in zip(params, cases, expected):
        assert torch.equal(case.out["out"].view(cpu_parent.shape), cpu_parent), f"chunks differ from the CPU op: {p}"


# --- render_tiles ------------------------------------------------------------------

def _spec(tr, **over) -> dict:
    """One render_tiles call: the poses, cameras and scene of TileRenderer ``tr`` and its
    settings, with the outputs in the op's own shapes ([S, C, ...] or the mosaic).
    ``over`` replaces entries (worlds, scene, pixels, outputs, timers, ...)."""
    sp = dict(geom_xpos=tr.geom_xpos, geom_xmat=tr.geom_xmat, cam_pos=tr.cam_pos, cam_mat=tr.cam_mat,
              worlds=tr.worlds, scene=tr.scene, fovy=list(tr.fovy), height=tr.height, width=tr.width,
              samples=tr.samples, shadows=tr.shadows, zfar=tr.scene.zfar, mosaic_cols=tr.cols, pixels=None,
              outputs=("rgb",) * (tr.rgb is not None) + ("depth",) * (tr.depth is not None)
              + ("seg",) * (tr.seg is not None), timers=tr.timers is not None, check=True)
    sp.update(over)
    return sp


# Timer columns (pixel.h kTimers): trace, shade, the block's total, then the primary
# rays' nodes visited and triangles tested; every column but the total is summed by
# one atomicAdd per thread.
_TIMER_COLS = 5


def _outputs(sp) -> dict:
    """Poisoned outputs (and the workspace, the timers) for spec ``sp``, as the op takes them."""
    S, C = len(sp["worlds"]), sp["cam_pos"].shape[1]
    H, Wd, cols = sp["height"], sp["width"], sp["mosaic_cols"]
    P = 0 if sp["pixels"] is None else len(sp["pixels"])
    img = (S, C, P) if P else (S, C, H, Wd)
    out = {}
    if "rgb" in sp["outputs"]:
        shape = (-(-S * C // cols) * H, cols * Wd, 3) if cols else img + (3,)
        out["rgb"] = torch.randint(0, 256, shape, dtype=torch.uint8)
    if "depth" in sp["outputs"]:
        out["depth"] = poison_like(torch.empty(img))
    if "seg" in sp["outputs"]:
        out["seg"] = torch.full(img, -77, dtype=torch.int32)
    out["top_boxes"] = poison_like(torch.empty(S, sp["scene"].top_links.shape[0], 12))
    if sp["timers"]:
        tiles = -(-S * C // cols) * cols if (cols and "rgb" in sp["outputs"]) else S * C
        out["timers"] = torch.full((launch_plan.render_blocks(tiles, H, Wd, P), _TIMER_COLS), -1, dtype=torch.int64)
    return out


def _render_case(sp) -> emu.Case:
    sc = sp["scene"]
    case = emu.Case("render_tiles", zfar=float(sp["zfar"]), samples=sp["samples"], shadows=int(sp["shadows"]),
                    height=sp["height"], width=sp["width"], mosaic_cols=sp["mosaic_cols"],
                    nworld=sp["geom_xpos"].shape[0])
    case.strided("geom_xpos", sp["geom_xpos"], "xpos").strided("geom_xmat", sp["geom_xmat"], "xmat")
    case.strided("cam_pos", sp["cam_pos"], "cp").strided("cam_mat", sp["cam_mat"], "cm")
    case.array("worlds", sp["worlds"]).array("fovy", torch.tensor(sp["fovy"], dtype=torch.float64))
    for name in sc.FIELDS:
        case.array(name, getattr(sc, name))
    if sp["pixels"] is not None:
        case.array("pixels", sp["pixels"])
    for name, t in _outputs(sp).items():
        case.array(name, t)
    return case


def _cpu_render(sp) -> dict:
    """The C++ CPU op on spec ``sp``: its outputs (and workspace, timers)."""
    out = _outputs(sp)
    flycuda.render_tiles(sp["geom_xpos"], sp["geom_xmat"], sp["cam_pos"], sp["cam_mat"], sp["worlds"], sp["scene"],
                         fovy=sp["fovy"], height=sp["height"], width=sp["width"], rgb=out.get("rgb"),
                         depth=out.get("depth"), seg=out.get("seg"), mosaic_cols=sp["mosaic_cols"],
                         samples=sp["samples"], shadows=sp["shadows"], zfar=sp["zfar"], pixels=sp["pixels"],
                         top_boxes=out["top_boxes"], timers=out.get("timers"), check=sp["check"])
    return out


def _assert_close_to_reference(sp, out) -> None:
    from flycuda.reference.render import render_tiles as ref_render

    ref = ref_render(sp["geom_xpos"], sp["geom_xmat"], sp["cam_pos"], sp["cam_mat"], sp["worlds"].tolist(),
                     sp["scene"], fovy=sp["fovy"], height=sp["height"], width=sp["width"], samples=sp["samples"],
                     shadows=sp["shadows"], zfar=sp["zfar"])
    assert_images_close(out["rgb"], out["depth"], out["seg"], *ref)


# (name, scene, cameras, worlds, (width, height), mosaic, samples, shadows, timers, outputs, extra)
# extra: "nan" (NaN headlight red), "pixels" (a pixel list), "zfar" (a near far plane).
_RENDER_PARAMS = [
    ("tiles", "prims", "overview", None, (12, 9), False, 1, False, False, "rgb,depth,seg", ""),
    ("mosaic-empty-cell", "prims", "overview", [1, 0, 1], (10, 7), True, 2, True, True, "rgb,depth,seg", ""),
    ("depth-seg-only", "prims", "overview", [1], (9, 5), False, 1, True, False, "depth,seg", "zfar"),
    ("nan-light", "prims", "overview", [2], (8, 6), False, 1, False, False, "rgb,seg", "nan"),
    ("axis-aligned", "prims", "top", [0], (9, 7), False, 1, True, False, "rgb,depth,seg", ""),
    ("two-cameras", "prims", "two", [2, 0], (11, 8), False, 1, True, True, "rgb,depth,seg", ""),
    ("two-cameras-mosaic", "prims", "two", [0, 1, 2], (7, 5), True, 1, False, False, "rgb", ""),
    ("pixel-list", "prims", "two", [1, 2], (13, 10), False, 1, True, True, "rgb,depth,seg", "pixels"),
    ("fly-mosaic", "fly", "track", None, (12, 9), True, 1, True, True, "rgb", ""),
    ("fly-tiles", "fly", "track", [2, 0], (11, 8), False, 2, False, False, "rgb,depth,seg", ""),
]


def _cameras(sim, which):
    cid = sim.camera_id("overview") if which != "track" else None
    top = ((0.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), 60.0)  # straight down -z
    if which == "top":
        return top
    if which == "two":  # the overview at 45 degrees and the top view at 60: fixed cameras ([W, C] stride 0)
        return [(sim.view("cam_xpos")[0, cid], sim.view("cam_xmat")[0, cid], 45.0), top]
    return which


def _render_specs():
    from dataclasses import replace

    from flycuda.render import TileRenderer

    prims = prims_sim(3)
    sims = {"prims": prims, "fly": fly_sim(3, steps=10)}
    specs = []
    for name, scene, cams, worlds, (w, h), mos, samples, shadows, timers, outs, extra in _RENDER_PARAMS:
        sim = sims[scene]
        tr = TileRenderer(sim, _cameras(sim, cams), w, h, worlds=worlds, mosaic=mos, samples=samples,
                          shadows=shadows, rgb="rgb" in outs, depth="depth" in outs, seg="seg" in outs,
                          timers=timers)
        sp = _spec(tr, cam_pos=tr.cam_pos if tr.cam_pos.dim() == 3 else tr.cam_pos.unsqueeze(1))
        if extra == "nan":
            hl = sp["scene"].headlight.clone()
            hl[0] = float("nan")  # ambient red: every geom pixel's red is NaN
            sp["scene"] = replace(sp["scene"], headlight=hl)
        if extra == "zfar":
            sp["zfar"] = 0.9  # cuts off the far side of the floor
        if extra == "pixels":  # ids anywhere in the image, repeats and both corners; 2 x 2 x 150 entries
            g = torch.Generator().manual_seed(5)
            ids = torch.randint(0, w * h, (147,), generator=g, dtype=torch.int32)
            sp["pixels"] = torch.cat([ids, torch.tensor([0, w * h - 1, int(ids[3])], dtype=torch.int32)])
        specs.append((name, sp))
    return specs


@pytest.mark.needs_warp
@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_render_tiles(sanitizer):
    """Every render case on the emulated grid: bit for bit the CPU op (images, the refit
    top level); tiles against
    the float64 reference with the op tests' bounds; timers and atomics."""
    specs = _render_specs()
    cases = [_render_case(sp) for _, sp in specs]
    cpus = [_cpu_render(sp) for _, sp in specs]
    emu.run(cases, sanitizer)
    for (name, sp), case, cpu in zip(specs, cases, cpus):
        for key in ("rgb", "depth", "seg", "top_boxes"):
            if key in cpu:
                assert torch.equal(case.out[key], cpu[key]), f"{key} differs from the CPU op: {name}"
        launches = case.out["launches"]  # (blocks, atomics, max per block): refit, then the pixels
        assert len(launches) == 1 + (sp["scene"].top_links.shape[0] > 0), name
        if sp["timers"]:  # ns here; every block wrote its row
            tim = case.out["timers"]
            assert tim.shape == cpu["timers"].shape and (tim >= 0).all() and (tim[:, 2] > 0).all(), name
            # the work counts are no timings: the same as the CPU op's, block by block
            assert torch.equal(tim[:, 3:], cpu["timers"][:, 3:]) and (tim[:, 3] > 0).any(), name
            # the emulator counts every thread's atomics: one atomicAdd per summed column
            per = (_TIMER_COLS - 1) * launch_plan.RENDER_THREADS
            assert launches[-1].tolist() == [len(tim), per * len(tim), per], name
        else:
            assert int(launches[:, 1].sum()) == 0, name
        if "seg" in cpu:
            assert len(torch.unique(cpu["seg"])) >= 3, f"the case must see several geoms: {name}"
        if sp["pixels"] is not None:  # a pixel list casts the rays of those pixels of the full image
            full = _cpu_render(dict(sp, pixels=None))
            for key in ("rgb", "depth", "seg"):
                flat = full[key].flatten(2, 3)
                assert torch.equal(cpu[key], flat[:, :, sp["pixels"].long()]), f"pixel list {key}"
        elif not sp["mosaic_cols"] and {"rgb", "depth", "seg"} <= set(cpu) and sp["zfar"] == sp["scene"].zfar:
            _assert_close_to_reference(sp, cpu)  # the float64 reference, with the op tests' bounds
        if name == "nan-light":  # NaN red reads 0 on every geom pixel; green and blue are lit
            hit = cpu["seg"] >= 0
            assert (cpu["rgb"][..., 0][hit] == 0).all() and (cpu["rgb"][..., 1][hit] > 0).any()
        if name == "depth-seg-only":
            assert (cpu["seg"] == -1).any() and (cpu["depth"][cpu["seg"] >= 0] <= 0.9).all()


# --- the instrument itself: it must catch what it claims to catch ---------------------

@pytest.mark.parametrize("mode,sanitizer,report", [
    ("oob", "asan", "ERROR: AddressSanitizer"),          # an index bound dropped
    ("overflow", "asan", "runtime error:"),               # UBSan: signed overflow
    ("race", "tsan", "WARNING: ThreadSanitizer"),         # a __syncthreads() dropped
    ("shared_race", "tsan", "WARNING: ThreadSanitizer"),  # likewise, on FLYCUDA_SHARED memory
    ("divergent", "asan", "divergent __syncthreads()"),   # a barrier some threads skip
])
def test_emulator_catches_bugs(mode, sanitizer, report):
    exe = emu.build(sanitizer, program="selftest")
    res = emu.sanitized_run([exe, mode], timeout=120)
    assert res.returncode != 0 and report in res.stderr, res.stderr[-3000:]


@pytest.mark.parametrize("sanitizer", SANITIZERS)
def test_emulator_clean_kernel_passes(sanitizer):
    res = emu.sanitized_run([emu.build(sanitizer, program="selftest"), "clean"], timeout=120)
    assert res.returncode == 0 and not emu.reports_in(res), res.stderr[-3000:]


@pytest.mark.parametrize("feature", ["__shared__ float tile[32];", "int v = __shfl_sync(0xffffffffu, 1, 0);",
                                     "float v = __ldg(p);"])
def test_unmodelled_features_do_not_compile(feature, tmp_path):
    """A kernel using what the emulator does not model fails to compile under it."""
    src = tmp_path / "k.cpp"
    src.write_text('#include "kernels/platform.h"\n'
                   f"__global__ void k(const float* p) {{ {feature} (void)p; }}\nint main() {{ return 0; }}\n")
    res = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", "-DFLYCUDA_EMU", "-I", emu.CSRC, str(src)],
                             capture_output=True, text=True)
    assert res.returncode != 0, f"{feature!r} compiled under the emulator"


# --- the fused advance: atomics per block, and every counter a user can write --------

def _advance_case(W: int, D: int, counter: torch.Tensor, advance: int = 1, T: int = 64) -> emu.Case:
    """motion_to_ctrl on [W, D] with motion[0, t, d] = t and every offset 20: each world's
    ctrl reads 20 + the step it saw (clamped to [0, T-1]), so a block that read an
    advanced step shows."""
    motion = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(1, T, D).contiguous()
    case = emu.Case("motion_to_ctrl", W=W, nu=D, frames_per_step=1.0, loop=0, advance=advance,
                    ctrl_offset=0, ctrl_s0=D, ctrl_s1=1)
    case.array("motion", motion).array("act_ids", torch.arange(D)).array("offsets", torch.full((W,), 20.0))
    case.array("ctrl", torch.full((W * D,), -1.0))
    return _put_counter(case, counter)


def _expect_read(case: emu.Case, s: int, T: int = 64) -> None:
    assert torch.all(case.out["ctrl"] == float(min(max(20 + s, 0), T - 1))), \
        f"a block read another step than {s}: {torch.unique(case.out['ctrl']).tolist()}"


# The unfused path's launches do not depend on the grid's size: 1 and 672 blocks hold it (its
# 5000-block case was 31 s of CI's emulator phase); the fused path's ticket runs at all three.
@pytest.mark.parametrize("blocks,W,D,counter", [
    pytest.param(b, w, d, c, id=f"{c}-{b}-block{'s' * (b > 1)}")
    for c in ("new_step_counter", "plain-1") for b, w, d in ((1, 6, 7), (672, 4096, 42), (5000, 32000, 40))
    if not (c == "plain-1" and b == 5000)])
def test_fused_advance_atomics_per_block(blocks, W, D, counter):
    """The emulator counts every atomic of every block: the fused advance takes one
    (atomicInc) per block whatever the grid (1, 672 = 4096 worlds x 42 DOFs, 5000
    blocks), the unfused path (a [1] counter) none; never more than 2 per block.
    Every world reads the step of its launch and the counter advances once."""
    assert launch_plan.cdiv(W * D, launch_plan.MOTION_TO_CTRL_THREADS) == blocks
    step = flycuda.new_step_counter("cpu", 3) if counter == "new_step_counter" else torch.tensor([3])
    case = _advance_case(W, D, step, advance=2)
    emu.run([case], "asan", timeout=1200)
    _expect_read(case, 3)
    _check_counter(case, flycuda.new_step_counter("cpu", 5) if counter == "new_step_counter" else torch.tensor([5]),
                   blocks)
    launches = case.out["launches"]  # (blocks, atomics, max per block) per launch
    per_block = launches[:, 2].sum()  # at most this many atomics in any one block over the op's launches
    assert per_block <= 2, launches.tolist()
    if counter == "new_step_counter":  # fused: one launch, one atomic per block
        assert launches.tolist() == [[blocks, blocks, 1]]
    else:  # the kernel, then the one-thread advance: no atomics
        assert launches.tolist() == [[blocks, 0, 0], [1, 0, 0]]


def _user_states():
    """Counters as users write them (ordinary tensor ops on a new_step_counter), with
    the step each then holds: the stale-ticket states of issue 19 among them."""
    def plus(k):
        c = flycuda.new_step_counter("cpu", 4)
        c += k  # step[1] becomes k: 0 < k < blocks
        return c

    def fill():
        c = flycuda.new_step_counter("cpu", 4)
        c.fill_(-1)  # [-1, -1]
        return c

    def minus_at_zero():
        c = flycuda.new_step_counter("cpu", 0)
        c -= 1  # [-1, -1]
        return c

    def start_minus_k(k):
        c = flycuda.new_step_counter("cpu", -k)
        c += k  # [0, k]: issue 19's matching-tag case
        return c

    def copied():
        c = flycuda.new_step_counter("cpu")
        c.copy_(torch.tensor([7, 2 ** 40 + 3]))
        return c

    def reserved_written():
        c = flycuda.new_step_counter("cpu", 6)
        c[1] = -(2 ** 63)
        return c

    return [("step+=3", plus(3), 7), ("step+=8", plus(8), 12), ("fill_(-1)", fill(), -1),
            ("step-=1 at 0", minus_at_zero(), -1), ("start=-3,+=3", start_minus_k(3), 0),
            ("start=-8,+=8", start_minus_k(8), 0), ("copy_", copied(), 7), ("step[1]=min", reserved_written(), 6)]


@pytest.mark.parametrize("sanitizer", SANITIZERS)
def test_fused_advance_every_user_written_counter(sanitizer):
    """Every state of the counter a user can write with tensor ops (issue 19: step += k,
    fill_(-1), step -= 1 at 0, new_step_counter(start=-k) then step += k, copy_, a write
    to the reserved step[1]): none reaches the hidden ticket, so each of three
    launches in a row (9 blocks) reads the step the counter holds in every block and
    advances it once, by the fused path, and the ticket is 0 after each."""
    W, D = 300, 7  # 9 blocks
    states = _user_states()
    counters = [c for _, c, _ in states]
    for c in counters:
        assert launch_plan.step_has_ticket(c) and launch_plan.ticket_of(c).tolist() == [0]
    for launch in range(3):
        cases = [_advance_case(W, D, c, advance=1) for c in counters]
        emu.run(cases, sanitizer)
        for (name, c, s), case in zip(states, cases):
            _expect_read(case, s + launch)
            out = case.out["counter"]
            assert int(out[0]) == s + launch + 1 and int(out[1]) == int(c[1]), name
            assert int(out[2]) == 0, f"{name}: ticket {_ticket_out(case)}, padding {out.tolist()}"
            assert case.out["launches"].tolist() == [[9, 9, 1]], name
            c.copy_(out[:2])  # the next launch's counter (its ticket is 0, as the run left it)


def test_a_counter_without_hidden_words_is_not_fused():
    """What does not carry the hidden ticket takes the unfused plan: [1], a clone,
    .to(), a [2] made by hand, a view at an offset, and a [2] sliced from a bigger
    buffer (torch.zeros(4)[:2]: its next words are someone else's data)."""
    c = flycuda.new_step_counter("cpu", 5)
    for other in (c[:1], c.clone(), c.to(torch.int64, copy=True), torch.tensor([5, 0]),
                  torch.zeros(6, dtype=torch.int64)[2:4], torch.zeros(8, dtype=torch.int64)[:2],
                  torch.zeros(4, dtype=torch.int64)[:2], torch.zeros(3, dtype=torch.int64)[:2]):
        assert not launch_plan.step_has_ticket(other)
        assert not launch_plan.plan_motion_to_ctrl(10, 10, 1, launch_plan.step_has_ticket(other)).fused
    assert launch_plan.plan_motion_to_ctrl(10, 10, 1, launch_plan.step_has_ticket(c)).fused


@pytest.mark.needs_warp
@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_render_tiles_skipped_images(sanitizer):
    """worlds[s] = -1 skips image s: every camera's outputs and its top-level boxes keep
    what they held (the poison the case was given), the others render as the CPU op does,
    with a pixel list (the eyes' partial re-render: blocks spanning skipped and rendered
    tiles, and blocks of skipped tiles only, which return before culling) and without."""
    from flycuda.render import TileRenderer

    sim = prims_sim(3)
    tr = TileRenderer(sim, _cameras(sim, "two"), 10, 7, worlds=[1, 0, 2], rgb=True, depth=True, seg=True)
    worlds = torch.tensor([-1, 0, -1], dtype=torch.int32)
    pixels = torch.randperm(70, generator=torch.Generator().manual_seed(3)).to(torch.int32)  # every pixel, shuffled
    specs = [_spec(tr, worlds=worlds), _spec(tr, worlds=worlds, pixels=pixels[:6]),
             _spec(tr, worlds=worlds, pixels=pixels)]  # 420 entries: blocks 0 and 3 are skipped images' only
    cases = [_render_case(sp) for sp in specs]
    emu.run(cases, sanitizer)
    for sp, case in zip(specs, cases):
        cpu = _cpu_render(sp)
        for name in ("rgb", "depth", "seg", "top_boxes"):
            given = torch.from_numpy(case.arrays[name])
            assert torch.equal(case.out[name][[0, 2]], given[[0, 2]]), name  # skipped: untouched
            assert torch.equal(case.out[name][1], cpu[name][1]), name        # rendered: the CPU op's bits
        assert (cpu["seg"][1] >= 0).any()


@pytest.mark.needs_warp
@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_render_tiles_bad_world_id(sanitizer):
    """A world id outside [0, W) that escaped the host check (capture, check=False):
    its images are blank and its top-level boxes empty, with no access out of bounds;
    two cameras, so that a bad world's every camera is cleared."""
    from flycuda.render import TileRenderer

    sim = prims_sim(2)
    tr = TileRenderer(sim, _cameras(sim, "two"), 10, 7, worlds=[1, 0], rgb=True, depth=True, seg=True)
    sp = _spec(tr, worlds=torch.tensor([1, 99], dtype=torch.int32), check=False)
    case = _render_case(sp)
    emu.run([case], sanitizer)
    cpu = _cpu_render(sp)
    for name in ("rgb", "depth", "seg", "top_boxes"):
        assert torch.equal(case.out[name], cpu[name]), name
    assert torch.all(cpu["seg"][1] == -1) and torch.all(cpu["rgb"][1] == 0) and torch.all(cpu["depth"][1] == 0)
    assert torch.all(cpu["top_boxes"][1] >= 3e38) and (cpu["seg"][0] >= 0).any()


@pytest.mark.needs_warp
@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_render_tiles_corrupt_bvh(sanitizer):
    """BVHs the host check refuses, run unchecked (check=False): top-level links out of
    the tree and back, leaves of a missing geom and of two geoms, out-of-range
    unbounded entries; a top level deeper than the stack (pushes dropped at kStack);
    mesh links back (a cycle) and past the end, leaves of triangles past the end, a
    mesh root past the nodes or negative. The refit reads them as
    empty boxes, the rays skip them: no access out of bounds (ASan), no hang, and the
    emulated kernels write what the CPU op writes."""
    from flycuda.render import TileRenderer

    sim = prims_sim(2)
    tr = TileRenderer(sim, "overview", 12, 9, rgb=True, depth=True, seg=True, shadows=True)
    specs = [(name, _spec(tr, scene=sc, check=False, cam_pos=tr.cam_pos))
             for name, sc in corrupt_scenes(tr.scene)]
    cases = [_render_case(sp) for _, sp in specs]
    emu.run(cases, sanitizer)
    for (name, sp), case in zip(specs, cases):
        cpu = _cpu_render(sp)
        for key in ("rgb", "depth", "seg", "top_boxes"):
            assert torch.equal(case.out[key], cpu[key]), f"{key}: {name}"
        assert (cpu["seg"] >= 0).any(), name


# --- the episode family ------------------------------------------------------------

def _episode_case(op: str, a: dict) -> emu.Case:
    """The case of one episode op: the plan its check_* builds, from the arguments."""
    if op == "motion_at":
        W, D = a["out"].shape
        case = emu.Case(op, W=W, D=D, frames_per_step=float(a["frames_per_step"]), loop=int(a["mode"] == "loop"))
        case.array("frames", a["frames"]).array("world_steps", a["world_steps"]).strided("out", a["out"], "out")
        return case.array("offsets", a["offsets"]) if a["offsets"] is not None else case
    if op == "scatter_actions":
        (W, A), nu = a["actions"].shape, a["ctrl"].shape[1]
        case = emu.Case(op, W=W, A=A, nu=nu).strided("actions", a["actions"], "actions")
        return case.strided("ctrl", a["ctrl"], "ctrl").array("act_ids", a["act_ids"]).array("action_map",
                                                                                            a["action_map"])
    if op == "gather_columns":
        W, O = a["out"].shape
        case = emu.Case(op, W=W, O=O, nsrc=len(a["sources"])).strided("out", a["out"], "out")
        for k, src in enumerate(a["sources"]):
            case.strided(f"src{k}", src, f"src{k}").scalars[f"src{k}_n"] = src.shape[1]
        return case.array("columns", a["columns"])
    if op == "episode_step":
        case = emu.Case(op, W=a["qpos"].shape[0], nq=a["qpos"].shape[1], nv=a["qvel"].shape[1],
                        root_adr=a["root_adr"], min_height=float(a["min_height"]), max_height=float(a["max_height"]),
                        min_up=float(a["min_up"]), max_steps=a["max_steps"])
        case.strided("qpos", a["qpos"], "qpos").strided("qvel", a["qvel"], "qvel")
        return case.array("world_steps", a["world_steps"]).array("terminated", a["terminated"]).array(
            "truncated", a["truncated"])
    case = emu.Case(op, W=a["qpos"].shape[0], K=a["init_qpos"].shape[0], nq=a["qpos"].shape[1],
                    nv=a["qvel"].shape[1], seed=a["seed"] % 2 ** 64 - (2 ** 64 if a["seed"] % 2 ** 64 >= 2 ** 63
                                                                        else 0))
    case.strided("qpos", a["qpos"], "qpos").strided("qvel", a["qvel"], "qvel")
    for n in ("done", "init_qpos", "init_qvel", "init_frames", "qpos_noise", "qvel_noise", "world_steps", "episodes",
              "offsets"):
        case.array(n, a[n])
    return case


def _episode_outputs(op: str, a: dict) -> dict:
    """An op's outputs as the driver saves them (a strided output: its whole base buffer)."""
    names = {"motion_at": ["out"], "scatter_actions": ["ctrl"], "gather_columns": ["out"],
             "episode_step": ["world_steps", "terminated", "truncated"],
             "reset_worlds": ["qpos", "qvel", "world_steps", "episodes", "offsets"]}[op]
    return {n: emu.base_of(a[n])[0] if a[n].dim() == 2 else a[n].numpy() for n in names}


def _corrupt(op: str, a: dict) -> dict:
    """Index arguments out of range, as a write through a Warp alias during capture could leave
    them (the host check never ran): the kernels must skip them, never write out of bounds."""
    if op == "scatter_actions":
        a["act_ids"] = a["act_ids"].clone()
        a["act_ids"][0], a["act_ids"][-1] = -1, a["ctrl"].shape[1]
    if op == "gather_columns":
        a["columns"] = a["columns"].clone()
        a["columns"][0] = torch.tensor([len(a["sources"]), 0])
        a["columns"][1] = torch.tensor([0, a["sources"][0].shape[1]])
        a["columns"][2] = torch.tensor([-1, -1])
    return a


def _expect_valid_entries(op: str, a: dict) -> None:
    """What a kernel writes for _corrupt's arguments: the valid entries alone, in place."""
    if op == "scatter_actions":
        ok = slice(1, a["act_ids"].shape[0] - 1)
        flycuda.ops.scatter_actions(a["actions"][:, ok], a["act_ids"][ok].contiguous(),
                                    a["action_map"][:, ok].contiguous(), a["ctrl"])
    else:
        flycuda.ops.gather_columns(a["sources"], a["columns"][3:].contiguous(), a["out"][:, 3:])


def _episode_cases():
    for op, W, kind, seed in itertools.product(EPISODE_OPS, (1, 37, 300), ("contiguous", "transposed"), (0, 1, 2)):
        yield op, W, kind, seed, False
    yield "scatter_actions", 40, "row_stride", 1, True
    yield "gather_columns", 40, "row_stride", 1, True


@pytest.mark.parametrize("sanitizer", FLAVOURS)
@pytest.mark.parametrize("episode_op", EPISODE_OPS)
def test_episode_op(episode_op, sanitizer):
    """Each episode kernel on the emulated grid: bit for bit the CPU op (partial blocks,
    strided views, NaN and inf inputs, both frame kinds, corrupted ids skipped)."""
    params, cases, expected = [p for p in _episode_cases() if p[0] == episode_op], [], []
    for op, W, kind, seed, corrupt in params:
        a = episode_args(op, W, kind, seed)
        a = _corrupt(op, a) if corrupt else a
        cases.append(_episode_case(op, clone_args(a)))
        cpu = clone_args(a)
        if corrupt:  # the expected result: only the valid entries written (the CPU op would refuse the ids)
            _expect_valid_entries(op, cpu)
        elif op == "motion_at":
            flycuda.ops.motion_at(cpu["frames"], cpu["world_steps"], cpu["out"], offsets=cpu["offsets"],
                                  frames_per_step=cpu["frames_per_step"], mode=cpu["mode"])
        elif op == "episode_step":
            flycuda.ops.episode_step(cpu["world_steps"], cpu["qpos"], cpu["qvel"], cpu["terminated"],
                                     cpu["truncated"], root_adr=cpu["root_adr"], min_height=cpu["min_height"],
                                     max_height=cpu["max_height"], min_up=cpu["min_up"], max_steps=cpu["max_steps"])
        else:
            getattr(flycuda.ops, op)(**cpu)
        expected.append((op, _episode_outputs(op, cpu)))
    emu.run(cases, sanitizer)
    for p, case, (op, want) in zip(params, cases, expected):
        for name, w in want.items():
            got = case.out[name].reshape(-1).numpy()
            assert got.tobytes() == w.reshape(-1).tobytes(), f"{name} differs from the CPU op: {p}"


def _hybrid_args(mode: str, W: int, dtype, index_dtype, kind: str, steps: int) -> dict:
    """hybrid_step's arguments after ``steps`` steps of the CPU op (the rules' state rich: corrections
    growing and decaying, counters running)."""
    rng = np.random.default_rng(W + steps)
    state, cnt = hybrid_state(W, W)
    ids, ctrl = hybrid_controls(W, kind, index_dtype, W)
    par = hybrid_params(mode)
    for step in range(steps):
        flycuda.ops.hybrid_step(*hybrid_senses(rng, W, dtype, step), par, state, cnt, ids, ctrl)
    names = ("drive", "thorax_z", "tarsus5_z", "stumbling_forces", "heading")
    return dict(zip(names, hybrid_senses(rng, W, dtype, steps)), params=par, state=state, persistence=cnt,
                act_ids=ids, ctrl=ctrl)


def _hybrid_edges() -> dict:
    """Phases that reach every branch of the spline and the gain (exactly 0, a multiple of 2 pi,
    -1e-17: its remainder rounds to 2 pi, the closed end; negative; NaN) held still (no frequency,
    no magnitude), with retraction corrections past the persistence threshold and counters about to
    stop."""
    a = _hybrid_args("turning", 7, torch.float64, torch.int64, "contiguous", 0)
    t, c = flycuda.control.load_steps(), flycuda.control.tripod_params()
    a["params"] = flycuda.ops.hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, c.freqs * 0, c.amps, c.weights,
                                            c.biases, c.convergence, timestep=1e-4, turning=False)
    a["state"][:, 0] = torch.tensor([0.0, 2 * np.pi, -1e-17, -3.0, 4 * np.pi, 1e3])
    a["state"][1, 0] = float("nan")  # a world of NaN phases (its own: NaN couples into every leg)
    a["state"][:, 1] = 0.0
    a["state"][:, 2] = 25.0
    a["persistence"][:, ::2] = 20
    return a


def _hybrid_case(a: dict) -> emu.Case:
    W, nu = a["ctrl"].shape
    case = emu.Case("hybrid_step", W=W, nu=nu).strided("ctrl", a["ctrl"], "ctrl")
    for name in ("drive", "thorax_z", "tarsus5_z", "stumbling_forces", "heading", "params", "state", "persistence",
                 "act_ids"):
        case.array(name, a[name])
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_hybrid_step(sanitizer):
    """FlyGym's walking controllers on the emulated grid: bit for bit the CPU op (the same
    per-world function, glibc's sin in both) for the three controllers, both sensory dtypes and
    index dtypes, strided controls, partial blocks (37, 300 worlds), the spline's and the gain's
    edge phases, NaN, and corrupted ids (skipped, never written out of bounds)."""
    args = [_hybrid_args(mode, W, dtype, idx, kind, steps)
            for mode, W, dtype, idx, kind, steps in (
                ("turning", 37, torch.float32, torch.int32, "strided", 40), ("hybrid", 300, torch.float64,
                                                                             torch.int64, "transposed", 25),
                ("cpg", 5, torch.float64, torch.int32, "contiguous", 3), ("turning", 1, torch.float64, torch.int64,
                                                                          "contiguous", 260))]
    args.append(_hybrid_edges())
    corrupt = _hybrid_args("turning", 4, torch.float64, torch.int64, "contiguous", 5)
    nu = corrupt["ctrl"].shape[1]
    bad = corrupt["act_ids"].clone()
    bad[[3, 44]] = torch.tensor([-1, nu + 5])
    cases = [_hybrid_case(clone_args(a)) for a in args]
    cases.append(_hybrid_case(dict(clone_args(corrupt), act_ids=bad)))
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.hybrid_step(**cpu)
        expected.append(cpu)
    wide = clone_args(corrupt)  # the corrupted ids' columns moved past nu: the valid ones as the CPU op writes them
    wide["ctrl"] = torch.cat([wide["ctrl"], torch.full((4, 2), float("nan"))], dim=1)
    wide["act_ids"] = bad.clone()
    wide["act_ids"][[3, 44]] = torch.tensor([nu, nu + 1])
    flycuda.ops.hybrid_step(**wide)
    wide["ctrl"] = wide["ctrl"][:, :nu].contiguous()
    expected.append(wide)
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        for name in ("state", "persistence"):
            assert case.out[name].numpy().tobytes() == want[name].numpy().tobytes(), (i, name)
        base, offset, strides = emu.base_of(want["ctrl"])
        got = torch.as_strided(case.out["ctrl"], want["ctrl"].shape, strides, offset)
        assert got.numpy().tobytes() == want["ctrl"].contiguous().numpy().tobytes(), (i, "ctrl")
    assert args[-1]["state"][:, 2].gt(0).all() and int(expected[-2]["persistence"].eq(0).sum())


def _rule_args(W: int, index_dtype, kind: str, steps: int, seed: int) -> dict:
    """rule_step's arguments after ``steps`` steps of the CPU op from fresh streams (seed + w)."""
    t, c = flycuda.control.load_steps(), flycuda.control.tripod_params()
    par = flycuda.ops.hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, c.freqs, c.amps, c.weights, c.biases,
                                    c.convergence, timestep=1e-4, rules=False, turning=False, swing_extension=0.0)
    ids, ctrl = hybrid_controls(W, kind, index_dtype, W)
    a = dict(params=par, rules=flycuda.ops.rule_params(1e-4, flycuda.control.STEP_DURATION),
             state=torch.zeros(W, 5, 6, dtype=torch.float64), rng=flycuda.ops.rule_rng(range(seed, seed + W)),
             act_ids=ids, ctrl=ctrl)
    for _ in range(steps):
        flycuda.ops.rule_step(**a)
    return a


def _rule_edges() -> dict:
    """Worlds at every branch of the leg choice: a NaN score first and later (NumPy's max), no
    leg eligible (scores <= 0; every positive one already stepping), exactly one eligible (no
    draw), a step completing, streams at the key's end (the next draw regenerates it), a first step."""
    a = _rule_args(6, torch.int64, "contiguous", 40, 5)
    st, rng = a["state"], a["rng"]
    st[:, 1:] = 0.0
    st[0, 2, 0] = float("nan")
    st[1, 3, 4] = float("nan")
    st[2, 2:] = -1.0
    st[3, 3] = 1.0
    st[3, 1] = 1.0
    st[3, 0, 0] = 2 * np.pi - 1e-4  # a step about to complete
    st[4, 4, 2] = 2.0
    rng[:, 624] = 624
    rng[5, 625] = 0
    return a


def _rule_case(a: dict) -> emu.Case:
    W, nu = a["ctrl"].shape
    case = emu.Case("rule_step", W=W, nu=nu).strided("ctrl", a["ctrl"], "ctrl")
    for name in ("params", "rules", "state", "rng", "act_ids"):
        case.array(name, a[name])
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_rule_step(sanitizer):
    """FlyGym's rule-based controller on the emulated grid: bit for bit the CPU op (the same
    per-world function: phases, scores, each world's MT19937 stream) for both index dtypes,
    strided controls, partial blocks (37, 300 worlds), the leg choice's edges, and corrupted
    ids (skipped, never written out of bounds)."""
    args = [_rule_args(W, idx, kind, steps, seed) for W, idx, kind, steps, seed in (
        (37, torch.int32, "strided", 700, 1), (300, torch.int64, "transposed", 300, 2),
        (1, torch.int64, "contiguous", 0, 3))]
    args.append(_rule_edges())
    corrupt = _rule_args(4, torch.int64, "contiguous", 5, 4)
    nu = corrupt["ctrl"].shape[1]
    bad = corrupt["act_ids"].clone()
    bad[[3, 44]] = torch.tensor([-1, nu + 5])
    cases = [_rule_case(clone_args(a)) for a in args] + [_rule_case(dict(clone_args(corrupt), act_ids=bad))]
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.rule_step(**cpu)
        expected.append(cpu)
    wide = clone_args(corrupt)  # the corrupted ids' columns moved past nu: the valid ones as the CPU op writes them
    wide["ctrl"] = torch.cat([wide["ctrl"], torch.full((4, 2), float("nan"))], dim=1)
    wide["act_ids"] = bad.clone()
    wide["act_ids"][[3, 44]] = torch.tensor([nu, nu + 1])
    flycuda.ops.rule_step(**wide)
    wide["ctrl"] = wide["ctrl"][:, :nu].contiguous()
    expected.append(wide)
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        for name in ("state", "rng"):
            assert case.out[name].numpy().tobytes() == want[name].numpy().tobytes(), (i, name)
        base, offset, strides = emu.base_of(want["ctrl"])
        got = torch.as_strided(case.out["ctrl"], want["ctrl"].shape, strides, offset)
        assert got.numpy().tobytes() == want["ctrl"].contiguous().numpy().tobytes(), (i, "ctrl")
    edges = expected[3]["state"]
    assert edges[2, 1].eq(0).all() and edges[3, 1].sum() == 5 and edges[3, 0, 0] == 0, "no choice; a completed step"
    assert edges[4, 1, 2] == 1, "the one eligible leg, chosen without a draw"


def _senses_case(a: dict) -> emu.Case:
    names = dict(zip(flycuda.ops.CONTACT_FIELDS, a["contacts"]))
    case = emu.Case("hybrid_senses", W=a["xpos"].shape[0], nbody=a["xpos"].shape[1],
                    ngeom=a["geom_segment"].shape[0], slots=names["geom"].shape[0],
                    efc_cols=names["efc_address"].shape[1], njmax=names["efc_force"].shape[1],
                    friction_cols=names["friction"].shape[1], cone=a["cone"])
    for name in ("xpos", "xmat", "body_ids", "geom_segment", *SENSE_OUTPUTS):
        case.array(name, a[name])
    for name, t in names.items():
        case.array(name, t)
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_hybrid_senses(sanitizer):
    """The hybrid controllers' sensory inputs on the emulated grid: the CPU op's values for both
    cones and index dtypes, partial blocks, pools with slots past nacon; the forces summed with
    atomics from concurrent blocks (to 1e-12: any order); a bad body id reads NaN, never out of
    bounds."""
    args = [senses_args(W, slots, used, seed=W, cone=cone, index_dtype=idx) for W, slots, used, cone, idx in (
        (37, 300, 250, 0, torch.int32), (5, 130, 130, 1, torch.int64), (1, 9, 4, 0, torch.int64))]
    bad = senses_args(3, 20, 15, seed=9)
    bad["body_ids"][[0, 3]] = torch.tensor([-1, 11])
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.hybrid_senses(**cpu)
        expected.append(cpu)
    good = dict(clone_args(bad), body_ids=torch.arange(7))  # the valid ids' values, as the CPU op reads them
    flycuda.ops.hybrid_senses(**good)
    cases = [_senses_case(clone_args(a)) for a in args + [bad]]
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        for name in SENSE_OUTPUTS:
            torch.testing.assert_close(torch.as_tensor(case.out[name]).reshape(want[name].shape), want[name], rtol=1e-12, atol=1e-12,
                                       equal_nan=True, msg=lambda m, i=i, name=name: f"{i} {name}: {m}")
    out = {name: torch.as_tensor(cases[-1].out[name]).reshape(bad[name].shape) for name in SENSE_OUTPUTS}
    assert out["thorax_z"].isnan().all() and out["heading"].isnan().all(), "a bad thorax id reads NaN"
    assert out["tarsus5_z"][:, 2].isnan().all() and not out["tarsus5_z"][:, [0, 1, 3, 4, 5]].isnan().any()
    torch.testing.assert_close(out["stumbling_forces"], good["stumbling_forces"], rtol=1e-12, atol=1e-12)


def _odor_case(a: dict) -> emu.Case:
    W, k, s = a["out"].shape
    n = a["sources"].shape[1]
    peaks = a["peaks"].expand(W, n, k) if a["peaks"].dim() == 2 else a["peaks"]  # stride 0: every world's
    case = emu.Case("odor_intensity", W=W, n=n, k=k, s=s, field=launch_plan.ODOR_FIELDS.index(a["field"]),
                    exponent=float(a["exponent"]), diffusivity=float(a["diffusivity"]), decay=float(a["decay"]),
                    log_c0=math.log(1.0 / (2.0 * math.pi * a["diffusivity"])), has_wind=int(a["wind"] is not None))
    for name in ("sources", "sensors", "out") + (("wind",) if a["wind"] is not None else ()):
        case.strided(name, a[name], name)
    return case.strided("peaks", peaks, "peaks")


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_odor_intensity(sanitizer):
    """Odor at the sensors on the emulated grid: bit for bit the CPU op (the same per-element
    function) for both fields, with and without wind, strided, shared (stride 0) and per-world
    inputs, partial blocks (37 x 3 x 5 elements); both branches of k0e, a sensor on a source
    (inf) and a NaN source (NaN where it reaches)."""
    args = [odor_args(37, 7, 3, 5, "advection_diffusion", "strided", seed=1),
            odor_args(300, 2, 1, 4, "power", "shared", seed=2, exponent=1.5),
            dict(odor_args(5, 3, 2, 4, "advection_diffusion", "per_world", seed=3), wind=None),
            odor_args(1, 1, 1, 4, "power", "contiguous", seed=4),
            odor_args(6, 3, 2, 4, "power", "strided", seed=6, exponent=1.0)]  # 1 / d (torch's pow for -1)
    edge = odor_args(3, 2, 1, 4, "advection_diffusion", seed=5)
    edge["sensors"][0, 1, :2] = edge["sources"][0, 0, :2]
    edge["sources"][2, 1, 1] = float("nan")
    args.append(edge)
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.odor_intensity(**cpu)
        expected.append(cpu["out"])
    assert expected[-1][0, 0, 1].isinf() and expected[-1][2].isnan().all() and expected[-1][:2].isfinite().sum() == 7
    cases = [_odor_case(clone_args(a)) for a in args]
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        base, offset, strides = emu.base_of(want)
        got = torch.as_strided(torch.as_tensor(case.out["out"]), want.shape, strides, offset)
        assert got.contiguous().numpy().tobytes() == want.contiguous().numpy().tobytes(), i


def _plume_case(a: dict) -> emu.Case:
    W, s = a["out"].shape
    g = a["plume"]
    dims = g.dim() - 1
    case = emu.Case("odor_plume", W=W, s=s, T=g.shape[0], dims=dims, fps=float(a["fps"]),
                    time_mode=launch_plan.PLUME_TIME_MODES.index(a["time_mode"]))
    for d in range(dims):
        case.scalars.update({f"n{d}": g.shape[1 + d], f"origin{d}": float(a["origin"][d]),
                             f"spacing{d}": float(a["spacing"][d])})
    for name in ("plume", "sensors", "time", "out"):
        case.strided(name, a[name], name)
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_odor_plume(sanitizer):
    """A replayed plume on the emulated grid: bit for bit the CPU op for 2-D and 3-D grids, both
    time modes, strided inputs, partial blocks (37 x 4 and 300 x 3 pairs), sensors outside the
    grid and a non-finite time (NaN), one-node axes and one frame."""
    args = [plume_args(37, 4, 2, layout="strided", seed=1, time_mode="loop"),
            plume_args(300, 3, 3, seed=2, time_mode="clamp"),
            plume_args(5, 4, 3, T=1, shape=(1, 4, 2), seed=3, time_mode="loop"),
            plume_args(4, 2, 2, T=2, shape=(2, 1), seed=4)]
    args[0]["time"][3] = float("inf")
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.odor_plume(**cpu)
        expected.append(cpu["out"])
    assert expected[0][3].isnan().all() and expected[1].isnan().any() and not expected[1].isnan().all()
    cases = [_plume_case(clone_args(a)) for a in args]
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        base, offset, strides = emu.base_of(want)
        got = torch.as_strided(torch.as_tensor(case.out["out"]), want.shape, strides, offset)
        assert got.contiguous().numpy().tobytes() == want.contiguous().numpy().tobytes(), i



def _connectome_case(a: dict) -> emu.Case:
    B, N = a["out"].shape
    case = emu.Case("connectome_step", B=B, N=N, E=a["src"].shape[0], C=a["stimulus"].shape[1],
                    input_nodes=a["input_nodes"], dt=float(a["dt"]))
    for name in ("rowptr", "src", "weight", "bias", "tau"):
        case.array(name, a[name])
    for name in ("v", "stimulus", "out"):
        case.strided(name, a[name], name)
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_connectome_step(sanitizer):
    """flyvis's network step on the emulated grid: bit for bit the CPU op (the same sums, term for
    term) in every layout, the node-major path of whole chunks (300 eyes: 256 there, 44 on the
    general path), partial chunks and blocks, nodes without inputs; and a
    corrupted map, which the op would refuse, read safely: a source out of range reads NaN (its
    target only) and a row past the edges stops at E."""
    args = [connectome_args(5, 301, 7, 8, "node_major", seed=1), connectome_args(2, 37, 5, 3, "strided", seed=2),
            connectome_args(1, 1, 1, 1, seed=3), connectome_args(3, 64, 64, 0, seed=4),
            connectome_args(300, 9, 3, 2, "node_major", seed=6),  # a whole chunk of 256 eyes, then 44 (2 a lane)
            connectome_args(100, 7, 7, 1, "strided", seed=7), connectome_args(200, 6, 3, 2, seed=8)]  # 4, 8 a lane
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.connectome_step(**cpu)
        expected.append(cpu["out"])
    bad = connectome_args(2, 20, 4, 1, seed=5)
    hit = next(n for n in range(20) if bad["rowptr"][n + 1] > bad["rowptr"][n])  # a node with inputs
    bad["src"][int(bad["rowptr"][hit])] = 999  # its first input
    bad["rowptr"][-1] += 5
    cases = [_connectome_case(clone_args(a)) for a in args + [bad]]
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        base, offset, strides = emu.base_of(want)
        got = torch.as_strided(torch.as_tensor(case.out["out"]), want.shape, strides, offset)
        assert got.contiguous().numpy().tobytes() == want.contiguous().numpy().tobytes(), i
    got = torch.as_tensor(cases[-1].out["out"]).view(2, 20)
    assert got[:, hit].isnan().all() and got[:, [n for n in range(20) if n != hit]].isfinite().all()

def _brain_case(a: dict) -> emu.Case:
    B, N = a["v"].shape
    consts = dict(zip(flycuda.ops.BRAIN_CONSTS, a["consts"]))
    case = emu.Case("brain_step", B=B, N=N, E=a["post"].shape[0], delay=a["delay"], refractory=a["refractory"],
                    log_capacity=a["log"].shape[0], **consts)
    for name in ("v", "g", "last", "acc", "ring", "log", "log_count", "rate", "silence", "seeds", "step", "rowptr",
                 "post", "count"):
        case.array(name, a[name])
    return case


@pytest.mark.parametrize("sanitizer", FLAVOURS)
def test_brain_step(sanitizer):
    """The whole-brain step on the emulated grid (the propagation's int32 atomics from many blocks
    at once into one brain's targets, then the neurons): bit for bit the CPU op, the log in any order;
    one brain and many, a partial last block, a log that overflows; and a corrupted table, which the
    op would refuse, read safely (a target out of range skipped, a row past the synapses stops at E)."""
    args = [brain_args(3, 301, degree=30, seed=1), brain_args(1, 1, seed=2), brain_args(2, 700, degree=40, seed=3),
            brain_args(4, 37, seed=4, log=5)]
    bad = brain_args(2, 50, degree=10, seed=5)
    bad["post"][3] = 999
    bad["rowptr"][-1] += 5
    expected = []
    for a in args:
        cpu = clone_args(a)
        flycuda.ops.brain_step(**cpu)
        expected.append(cpu)
    cases = [_brain_case(clone_args(a)) for a in args + [bad]]
    emu.run(cases, sanitizer)
    for i, (case, want) in enumerate(zip(cases, expected)):
        n = min(int(want["log_count"][0]), len(want["log"]))
        for k in ("v", "g", "last", "acc", "ring", "log_count"):
            assert torch.equal(torch.as_tensor(case.out[k]).view(want[k].shape), want[k]), (i, k)
        log = torch.as_tensor(case.out["log"])
        if int(want["log_count"][0]) > len(log):  # overflowed: which spikes got a place is the atomics' order
            assert (want["last"].flatten()[log[3:] & 0xFFFFFFFF] == (log[3:] >> 32)).all(), log  # each one a spike
        else:
            assert torch.equal(log[:n].sort().values, want["log"][:n].sort().values), i
        assert torch.equal(log[n:], want["log"][n:]), i
    assert int(cases[-1].out["log_count"][0]) >= 0 and torch.as_tensor(cases[-1].out["v"]).isfinite().all()


# Lines that no valid input reaches (kept as defensive code).
UNREACHABLE = {("geoms.h", "default: return miss();")}


def test_cases_execute_every_kernel_line(request):
    """Runs last: the "cov" runs above must have executed every line of csrc/kernels/*.cuh
    (the renderer's device code included: kernels/render/*.h). Where this file's tests are
    split over workers (--dist load), it runs after them, alone (.ci/run does)."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 and request.config.getoption("dist") != "loadfile":
        pytest.skip("this file's tests are split over workers: run this check after them, alone")
    missed = emu.line_coverage()
    if not missed:
        if os.environ.get("CI"):
            pytest.fail("no coverage counters: the cov-parametrized tests did not run before this check")
        pytest.skip("no coverage counters: run the whole file (the cov-parametrized tests first)")
    for name in ("kernels/motion_to_ctrl.cuh", "kernels/record.cuh", "kernels/advance_step.cuh",
                 "kernels/pool_ommatidia.cuh", "kernels/episode.cuh", "kernels/hybrid_step.cuh", "kernels/rule_step.cuh",
                 "kernels/hybrid_senses.cuh", "kernels/odor_intensity.cuh", "kernels/odor_plume.cuh",
                 "kernels/connectome_step.cuh", "kernels/brain_step.cuh", "kernels/render_tiles.cuh", "kernels/render/layout.h", "kernels/render/geoms.h",
                 "kernels/render/bvh.h", "kernels/render/pixel.h", "kernels/render/cull.h"):
        assert name in missed, f"{name} was not compiled into the emulator"
    gaps = {name: [(n, text) for n, text in lines if (os.path.basename(name), text) not in UNREACHABLE]
            for name, lines in missed.items() if not name.startswith("emu" + os.sep)}
    assert not any(gaps.values()), f"kernel lines no case executed: { {k: v for k, v in gaps.items() if v} }"
