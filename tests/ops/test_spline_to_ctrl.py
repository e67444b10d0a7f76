"""flycuda.spline_to_ctrl and flycuda.spline_coeffs vs the references, and the spline
itself vs its definition (not-a-knot interpolation; scipy's interp1d when present)."""

import importlib.util

import numpy as np
import pytest
import torch
from helpers.cases import M2C_MODES as MODES
from helpers.cases import M2C_SHAPES as SHAPES
from helpers.devices import cpu_and_cuda, poison_like, strided_view

import flycuda
from flycuda import reference
from flycuda.ops import SplineError, spline_coeffs
from flycuda.sim import Motion, MotionError

HAS_SCIPY = importlib.util.find_spec("scipy") is not None


def make_spline_case(W, M, T, D, nu, offsets_kind, device, act_dtype=torch.int64):
    angles = torch.randn(M, T, D, dtype=torch.float64).cumsum(1)  # smooth-ish, not zero
    coeffs = spline_coeffs(angles).to(device)
    act_ids = torch.randperm(nu)[:D].to(device=device, dtype=act_dtype)
    if offsets_kind is None:
        offsets = None
    elif offsets_kind == "int":
        offsets = torch.randint(0, T, (W,)).to(device=device, dtype=torch.float32)
    else:  # "wild": negative, fractional, beyond T
        offsets = ((torch.rand(W, dtype=torch.float64) * 3 - 1) * (T + 2)).to(device)
    return angles, coeffs, act_ids, offsets


def _eval(coeffs, f):
    """float64 value of the pieces at frame positions f (in [0, T)), for one recording."""
    i = np.minimum(np.floor(f).astype(np.int64), coeffs.shape[0] - 1)
    u = (f - i)[:, None]
    c = coeffs[i]
    return c[:, 0] + u * (c[:, 1] + u * (c[:, 2] + u * c[:, 3]))


# --- the coefficients ----------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 2, 3, 4, 5, 9, 660])
def test_spline_interpolates_and_is_c2(T):
    """Every piece passes through its two frames; slope and curvature are continuous at
    interior frames; not-a-knot: the third derivative too at frames 1 and T-2."""
    y = np.random.default_rng(T).standard_normal((T, 3)).cumsum(0)
    c = spline_coeffs(y)[0].numpy()
    assert np.array_equal(c[:, 0], y)  # c0 is the frame itself, exactly
    if T == 1:
        assert np.all(c[:, 1:] == 0)
        return
    ends = c[:-1].sum(axis=1)  # value at u = 1
    np.testing.assert_allclose(ends, y[1:], rtol=0, atol=1e-12 * np.abs(y).max())
    d1_end = c[:-2, 1] + 2 * c[:-2, 2] + 3 * c[:-2, 3]
    d2_end = 2 * c[:-2, 2] + 6 * c[:-2, 3]
    np.testing.assert_allclose(d1_end, c[1:-1, 1], atol=1e-11)
    np.testing.assert_allclose(d2_end, 2 * c[1:-1, 2], atol=1e-11)
    if T >= 4:
        np.testing.assert_allclose(c[0, 3], c[1, 3], atol=1e-11)
        np.testing.assert_allclose(c[T - 2, 3], c[T - 3, 3], atol=1e-11)


@pytest.mark.parametrize("T", [1, 2, 3, 6])
def test_wrap_piece_closes_the_loop(T):
    """Row T-1 goes from frame T-1 back to frame 0, C1 at both ends."""
    y = np.random.default_rng(1).standard_normal((T, 2))
    c = spline_coeffs(y)[0].numpy()
    np.testing.assert_allclose(c[T - 1].sum(axis=0), y[0], atol=1e-12)
    slope_in = c[T - 2, 1] + 2 * c[T - 2, 2] + 3 * c[T - 2, 3] if T > 1 else 0 * y[0]
    np.testing.assert_allclose(c[T - 1, 1], slope_in, atol=1e-12)
    wrap_out = c[T - 1, 1] + 2 * c[T - 1, 2] + 3 * c[T - 1, 3]
    np.testing.assert_allclose(wrap_out, c[0, 1], atol=1e-12)


def test_small_recordings_are_polynomials():
    """With T < 4 frames not-a-knot is the interpolating polynomial of degree T - 1."""
    y = np.array([[1.0], [4.0], [9.0]])  # (x + 1)^2 at x = 0, 1, 2
    c = spline_coeffs(y)[0].numpy()
    f = np.linspace(0, 2, 17)
    np.testing.assert_allclose(_eval(c, f)[:, 0], (f + 1) ** 2, atol=1e-12)
    y4 = np.array([[0.0], [1.0], [8.0], [27.0]])  # x^3: one cubic
    np.testing.assert_allclose(_eval(spline_coeffs(y4)[0].numpy(), np.linspace(0, 3, 31))[:, 0],
                               np.linspace(0, 3, 31) ** 3, atol=1e-12)


@pytest.mark.skipif(not HAS_SCIPY, reason="scipy is not installed (it comes with flygym)")
@pytest.mark.parametrize("T", [4, 5, 8, 660])
def test_spline_equals_scipy_interp1d_cubic(T):
    """The same spline as FlyGym's resampling (interp1d kind="cubic"): float64 values
    within 1e-13 relative, and the same float32 value everywhere sampled."""
    from scipy.interpolate import interp1d

    y = np.random.default_rng(T).standard_normal((T, 5)).cumsum(0)
    f = np.random.default_rng(0).uniform(0, T - 1, 5000)
    ours = _eval(spline_coeffs(y)[0].numpy(), f)
    theirs = interp1d(np.arange(T), y, kind="cubic", axis=0)(f)
    scale = np.abs(y).max()
    assert np.abs(ours - theirs).max() <= 1e-13 * scale
    assert np.array_equal(ours.astype(np.float32), theirs.astype(np.float32))


def test_spline_coeffs_bad_input():
    with pytest.raises(SplineError, match=r"argument 'angles' must be \[T, D\] or \[M, T, D\].*got shape \(5,\)"):
        spline_coeffs(np.zeros(5))
    with pytest.raises(SplineError, match="T >= 1"):
        spline_coeffs(np.zeros((0, 3)))
    with pytest.raises(SplineError, match="non-finite"):
        spline_coeffs(np.array([[1.0], [np.nan]]))


def test_motion_spline_prefers_float64_frames():
    a64 = torch.randn(20, 3, dtype=torch.float64).cumsum(0)
    m = Motion(a64.float(), 330.0, ("a", "b", "c"), angles64=a64)
    assert torch.equal(m.spline()[0, :, 0], a64)  # c0 = the float64 frames
    assert m.spline() is m.spline()  # computed once
    with pytest.raises(MotionError, match="angles64 must have the shape"):
        Motion(a64.float(), 330.0, ("a", "b", "c"), angles64=a64[:5])


# --- the op ----------------------------------------------------------------------------

def check_against_reference(device, shape, offsets_kind, fps, mode, step_value, ctrl_kind="contiguous",
                            advance=0, act_dtype=torch.int64):
    W, M, T, D, nu = shape
    _, coeffs, act_ids, offsets = make_spline_case(W, M, T, D, nu, offsets_kind, device, act_dtype)
    ctrl, parent = strided_view(W, nu, ctrl_kind, device)
    before = parent.clone()
    step = flycuda.new_step_counter(device, step_value)
    flycuda.spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets=offsets, frames_per_step=fps, mode=mode,
                           advance=advance)
    ref_parent = before.clone().cpu()
    ref_view = (ref_parent if ctrl_kind == "contiguous" else
                ref_parent[:, 2:2 + nu] if ctrl_kind == "row_stride" else ref_parent.t())
    ref_step = flycuda.new_step_counter("cpu", step_value)
    reference.spline_to_ctrl(coeffs.cpu(), ref_step, ref_view, act_ids.cpu(),
                             offsets=None if offsets is None else offsets.cpu(), frames_per_step=fps,
                             mode=mode, advance=advance)
    # The same float64 operations in the same order, rounded once: bit for bit.
    assert torch.equal(parent.cpu(), ref_parent)
    assert int(step[0]) == step_value + advance == int(ref_step[0])


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("offsets_kind,fps", [(None, 1.0), ("int", 1.0), ("wild", 0.033), ("wild", 2.5)])
@pytest.mark.parametrize("step_value", [0, 7, 10 ** 9])
def test_matches_reference(device, shape, mode, offsets_kind, fps, step_value):
    check_against_reference(device, shape, offsets_kind, fps, mode, step_value)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("ctrl_kind", ["row_stride", "transposed"])
@pytest.mark.parametrize("act_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("advance", [0, 1])
def test_strided_ctrl_index_dtypes_advance(device, ctrl_kind, act_dtype, advance):
    check_against_reference(device, (33, 1, 29, 42, 47), "wild", 0.33, "loop", 77, ctrl_kind=ctrl_kind,
                            act_dtype=act_dtype, advance=advance)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("mode", MODES)
def test_exact_copy_at_frames(device, mode):
    """At integer frame positions the target is the frame rounded to float32, exactly."""
    W, T, D, nu = 37, 23, 42, 45
    angles, coeffs, act_ids, _ = make_spline_case(W, W, T, D, nu, None, device)
    offsets = torch.randint(-5, T + 5, (W,)).to(device=device, dtype=torch.float64)
    ctrl = poison_like(torch.empty(W, nu)).to(device)
    flycuda.spline_to_ctrl(coeffs, flycuda.new_step_counter(device, 11), ctrl, act_ids, offsets=offsets,
                           mode=mode)
    f = offsets.cpu().long() + 11
    f = f % T if mode == "loop" else f.clamp(0, T - 1)
    assert torch.equal(ctrl.cpu()[:, act_ids.cpu()], angles[torch.arange(W), f].float())


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_clamp_holds_ends_and_loop_wraps(device):
    y = torch.tensor([[1.0], [2.0], [4.0], [3.0], [5.0]], dtype=torch.float64)
    coeffs = spline_coeffs(y).to(device)
    ids = torch.tensor([0]).to(device)
    ctrl = poison_like(torch.empty(4, 1)).to(device)
    offsets = torch.tensor([-3.0, 4.0, 9.25, 4.25], dtype=torch.float64).to(device)
    flycuda.spline_to_ctrl(coeffs, flycuda.new_step_counter(device), ctrl, ids, offsets=offsets, mode="clamp")
    assert ctrl.cpu().flatten().tolist()[:3] == [1.0, 5.0, 5.0]
    flycuda.spline_to_ctrl(coeffs, flycuda.new_step_counter(device), ctrl, ids, offsets=offsets, mode="loop")
    c = coeffs.cpu()[0, 4, :, 0].tolist()  # the wrap piece, a quarter of the way from frame 4 to frame 0
    quarter = float(np.float32(c[0] + 0.25 * (c[1] + 0.25 * (c[2] + 0.25 * c[3]))))
    assert quarter not in (5.0, 1.0, 4.0)  # between frames: neither end, nor the clamp value
    assert ctrl.cpu().flatten().tolist() == [4.0, 5.0, quarter, quarter]  # -3 = 2 (mod 5): frame 2


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (3, 3, 5, 7, 9), (10, 1, 6, 13, 20)])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("advance", [0, 1, 4])
def test_grid_emulator_matches_cpu_op(shape, mode, advance):
    W, M, T, D, nu = shape
    _, coeffs, act_ids, offsets = make_spline_case(W, M, T, D, nu, "wild", "cpu")
    ctrl = poison_like(torch.empty(W, nu))
    ctrl_grid = ctrl.clone()
    step, step_grid = flycuda.new_step_counter("cpu", 9), flycuda.new_step_counter("cpu", 9)
    flycuda.spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets=offsets, frames_per_step=0.7, mode=mode,
                           advance=advance)
    reference.grid.spline_to_ctrl(coeffs, step_grid, ctrl_grid, act_ids, offsets=offsets,
                                  frames_per_step=0.7, mode=mode, advance=advance, threads=8)
    assert torch.equal(ctrl, ctrl_grid)
    assert int(step[0]) == int(step_grid[0]) == 9 + advance


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("W", [1, 300])
def test_fused_advance_reads_counter_before_advancing(device, W):
    T, D = 50, 42
    y = torch.arange(T, dtype=torch.float64).view(T, 1).expand(T, D).contiguous()
    coeffs = spline_coeffs(y).to(device)  # a straight line: S(f) = f
    ids = torch.arange(D).to(device)
    ctrl = poison_like(torch.empty(W, D)).to(device)
    step = flycuda.new_step_counter(device, 0)
    for k in range(5):
        flycuda.spline_to_ctrl(coeffs, step, ctrl, ids, advance=3)
        assert torch.all(ctrl == 3 * k).item(), f"call {k}: some world read an advanced counter"
    assert int(step[0]) == 15


def test_bad_input_leaves_outputs_untouched():
    _, coeffs, act_ids, offsets = make_spline_case(4, 1, 6, 3, 5, "wild", "cpu")
    ctrl = poison_like(torch.empty(4, 5))
    step = flycuda.new_step_counter("cpu", 2)
    before, step_before = ctrl.clone(), step.clone()
    cases = [
        (dict(coeffs=coeffs.float()), r"flycuda.spline_to_ctrl: argument 'coeffs' must have dtype Double, got Float"),
        (dict(coeffs=coeffs[:, :, :3]), r"argument 'coeffs' must have size 4 in dim 2, got shape \[1, 6, 3, 3\]"),
        (dict(coeffs=coeffs[0]), r"argument 'coeffs' must be a 4-D tensor, got 3-D"),
        (dict(coeffs=coeffs.expand(2, -1, -1, -1).contiguous()),
         r"argument 'coeffs' must have size 1 or W = ctrl.size\(0\) = 4 in dim 0"),
        (dict(coeffs=coeffs.transpose(1, 3)), "4 in dim 2|contiguous"),
        (dict(act_ids=torch.tensor([0, 1, 9])), r"act_ids"),
        (dict(mode="wrap"), "argument 'mode' must be 'clamp' or 'loop', got 'wrap'"),
        (dict(offsets=offsets[:3]), r"argument 'offsets' must have size 4 in dim 0"),
        (dict(offsets=offsets.half()), r"argument 'offsets' must have dtype Float or Double, got Half"),
        (dict(step=step.int()), r"argument 'step' must be a contiguous int64 step counter"),
        (dict(step=step.view(2, 1)), r"argument 'step' must be a contiguous int64 step counter"),
        (dict(advance=-1), r"argument 'advance' must be >= 0, got -1"),
        (dict(coeffs=coeffs.to("meta")), r"argument 'coeffs' must be on cpu"),
        (dict(ctrl="alias"), r"argument 'ctrl' must not share memory with argument 'coeffs'"),
        (dict(act_ids="step_alias"), r"argument 'step' must not share memory with argument 'act_ids'"),
        (dict(frames_per_step=float("nan")), "argument 'frames_per_step' must be finite"),
    ]
    for kw, msg in cases:
        args = dict(coeffs=coeffs, act_ids=act_ids, mode="loop", frames_per_step=0.5, offsets=offsets, step=step,
                    ctrl=ctrl, advance=1)
        args.update(kw)
        if args["ctrl"] == "alias":  # a view into the coefficients' storage
            args["ctrl"] = coeffs.view(torch.float32).view(-1)[:20].view(4, 5)
        if isinstance(args["act_ids"], str):  # the counter doubles as the index tensor
            big = torch.tensor([2, 0, 1, 2], dtype=torch.int64)
            args["step"], args["act_ids"] = big[:2], big[1:]
        with pytest.raises((RuntimeError, ValueError), match=msg):
            flycuda.spline_to_ctrl(args["coeffs"], args["step"], args["ctrl"], args["act_ids"],
                                   offsets=args["offsets"], frames_per_step=args["frames_per_step"],
                                   mode=args["mode"], advance=args["advance"])
        assert torch.equal(ctrl, before) and torch.equal(step, step_before), kw


def test_many_recordings_in_one_solve():
    """[M, T, D] is solved in one go; each recording gets the pieces it would get alone."""
    y = torch.randn(5, 31, 3, dtype=torch.float64).cumsum(1)
    together = spline_coeffs(y)
    for m in range(5):
        assert torch.equal(together[m], spline_coeffs(y[m])[0])
    with pytest.raises(SplineError, match="got shape"):
        spline_coeffs(torch.zeros(0, 4, 3))


def test_opcheck():
    _, coeffs, act_ids, offsets = make_spline_case(9, 9, 11, 5, 8, "wild", "cpu")
    args = (coeffs, flycuda.new_step_counter("cpu", 3), torch.randn(9, 8), act_ids, offsets, 0.5, "loop", 1)
    torch.library.opcheck(torch.ops.flycuda.spline_to_ctrl.default, args)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_torch_compile(device):
    torch._dynamo.reset()
    _, coeffs, act_ids, offsets = make_spline_case(6, 1, 40, 42, 42, "wild", device)

    def per_step(ctrl, step):
        flycuda.spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets=offsets, frames_per_step=0.033,
                               mode="loop", advance=1)
        return ctrl.sum()

    compiled = torch.compile(per_step, backend="aot_eager", fullgraph=True)
    ctrl_e, ctrl_c = torch.randn(6, 42).to(device), torch.randn(6, 42).to(device)
    step_e, step_c = flycuda.new_step_counter(device), flycuda.new_step_counter(device)
    for _ in range(4):
        out_e, out_c = per_step(ctrl_e, step_e), compiled(ctrl_c, step_c)
        assert torch.equal(ctrl_e, ctrl_c) and torch.equal(out_e, out_c)
    assert int(step_c[0]) == int(step_e[0]) == 4
