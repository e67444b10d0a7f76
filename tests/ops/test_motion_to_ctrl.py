"""flycuda.motion_to_ctrl vs flycuda.reference (vectorized) and reference.grid (emulated)."""

import pytest
import torch
from helpers.cases import M2C_MODES, M2C_SHAPES, make_m2c_case
from helpers.devices import cpu_and_cuda, poison_like, strided_view

import flycuda
from flycuda import reference
from flycuda.ops import launch_plan

# (W, M, T, D, nu): sizes that are not multiples of any block size; W=1, T=1, M=1, M=W.
SHAPES = M2C_SHAPES
MODES = M2C_MODES


make_case = make_m2c_case


def check_against_reference(device, shape, offsets_kind, fps, mode, step_value,
                            ctrl_kind="contiguous", advance=0, act_dtype=torch.int64):
    W, M, T, D, nu = shape
    motion, act_ids, offsets = make_case(W, M, T, D, nu, offsets_kind, device, act_dtype)
    ctrl, parent = strided_view(W, nu, ctrl_kind, device)
    before = parent.clone()
    step = flycuda.new_step_counter(device, step_value)

    flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, offsets=offsets,
                           frames_per_step=fps, mode=mode, advance=advance)

    ref_parent = before.clone().cpu()
    ref_view = (ref_parent if ctrl_kind == "contiguous" else
                ref_parent[:, 2:2 + nu] if ctrl_kind == "row_stride" else ref_parent.t())
    ref_step = flycuda.new_step_counter("cpu", step_value)
    reference.motion_to_ctrl(motion.cpu(), ref_step, ref_view, act_ids.cpu(),
                             offsets=None if offsets is None else offsets.cpu(),
                             frames_per_step=fps, mode=mode, advance=advance)
    exact_copy = fps == 1.0 and offsets_kind in (None, "int")
    tol = dict(rtol=0, atol=0) if exact_copy else dict(rtol=2 ** -23, atol=0)
    # Exactly the act_ids columns changed; every other byte of the parent is intact.
    torch.testing.assert_close(parent.cpu(), ref_parent, **tol)
    untouched = torch.ones_like(ref_view, dtype=torch.bool)
    untouched[:, act_ids.long().cpu()] = False
    assert torch.equal(ctrl.cpu()[untouched], before.cpu()[:, 2:2 + nu][untouched]
                       if ctrl_kind == "row_stride" else
                       (before.cpu().t() if ctrl_kind == "transposed" else before.cpu())[untouched])
    assert int(step[0]) == step_value + advance == int(ref_step[0])
    return motion, act_ids, offsets, ctrl


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("offsets_kind,fps", [(None, 1.0), ("int", 1.0), ("wild", 0.33),
                                              ("wild", 2.5), ("int", 0.0)])
@pytest.mark.parametrize("step_value", [0, 5, 1234, 10 ** 9])
def test_matches_reference(device, shape, mode, offsets_kind, fps, step_value):
    check_against_reference(device, shape, offsets_kind, fps, mode, step_value)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("ctrl_kind", ["row_stride", "transposed"])
@pytest.mark.parametrize("act_dtype", [torch.int32, torch.int64])
def test_strided_ctrl_and_index_dtypes(device, ctrl_kind, act_dtype):
    check_against_reference(device, (33, 1, 29, 42, 47), "wild", 0.33, "loop", 77,
                            ctrl_kind=ctrl_kind, act_dtype=act_dtype)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("mode", MODES)
def test_exact_copy_of_recorded_frame(device, mode):
    """frames_per_step == 1 and integer offsets: ctrl holds motion[m, f, d] bit for bit."""
    W, T, D, nu = 37, 23, 42, 45
    motion = torch.randn(W, T, D).to(device)
    act_ids = torch.randperm(nu)[:D].to(device)
    offsets = torch.randint(-5, T + 5, (W,)).to(device=device, dtype=torch.float64)
    ctrl = poison_like(torch.empty(W, nu)).to(device)
    step_value = 11
    flycuda.motion_to_ctrl(motion, flycuda.new_step_counter(device, step_value), ctrl,
                           act_ids, offsets=offsets, mode=mode)
    f = offsets.cpu().long() + step_value
    f = f % T if mode == "loop" else f.clamp(0, T - 1)
    expected = motion.cpu()[torch.arange(W), f]  # [W, D]
    assert torch.equal(ctrl.cpu()[:, act_ids.cpu()], expected)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_loop_last_frame_blends_into_first(device):
    T = 4
    motion = torch.tensor([[[1.0], [2.0], [3.0], [5.0]]]).to(device)
    ctrl = poison_like(torch.empty(2, 1)).to(device)
    ids = torch.tensor([0]).to(device)
    offsets = torch.tensor([3.5, -0.25], dtype=torch.float64).to(device)
    flycuda.motion_to_ctrl(motion, flycuda.new_step_counter(device, 0), ctrl, ids,
                           offsets=offsets, mode="loop")
    # 3.5 -> halfway 5 -> 1 ; -0.25 -> 3.75 -> 0.75 of the way 5 -> 1
    assert ctrl.cpu().flatten().tolist() == [3.0, 2.0]
    flycuda.motion_to_ctrl(motion, flycuda.new_step_counter(device, 0), ctrl, ids,
                           offsets=offsets, mode="clamp")
    assert ctrl.cpu().flatten().tolist() == [5.0, 1.0]
    assert T == motion.shape[1]


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (3, 3, 5, 7, 9), (10, 1, 6, 13, 20)])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("advance", [0, 1, 4])
def test_grid_emulator_matches_cpu_op(shape, mode, advance):
    """The grid emulator (many small blocks, fused advance) equals the CPU op exactly."""
    W, M, T, D, nu = shape
    motion, act_ids, offsets = make_case(W, M, T, D, nu, "wild", "cpu")
    ctrl = poison_like(torch.empty(W, nu))
    ctrl_grid = ctrl.clone()
    step, step_grid = flycuda.new_step_counter("cpu", 9), flycuda.new_step_counter("cpu", 9)
    flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, offsets=offsets,
                           frames_per_step=0.7, mode=mode, advance=advance)
    reference.grid.motion_to_ctrl(motion, step_grid, ctrl_grid, act_ids, offsets=offsets,
                                  frames_per_step=0.7, mode=mode, advance=advance, threads=8)
    assert torch.equal(ctrl, ctrl_grid)
    assert int(step[0]) == int(step_grid[0]) == 9 + advance


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("W", [1, 300, 8192])
def test_fused_advance_reads_counter_before_advancing(device, W):
    """Every world sees the pre-advance step, however many blocks the launch has."""
    T, D = 50, 42
    motion = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(1, T, D).contiguous().to(device)
    ids = torch.arange(D).to(device)
    ctrl = poison_like(torch.empty(W, D)).to(device)
    step = flycuda.new_step_counter(device, 0)
    for k in range(5):
        flycuda.motion_to_ctrl(motion, step, ctrl, ids, advance=3)
        assert torch.all(ctrl == 3 * k).item(), f"call {k}: some world read an advanced counter"
    assert int(step[0]) == 15


def _user_written(device, state: str) -> tuple[torch.Tensor, int]:
    """A new_step_counter after a user's tensor ops (issue 19's stale-ticket states among
    them), and the step it then holds."""
    if state == "start=-k,+=k":
        c = flycuda.new_step_counter(device, -5)
        c += 5  # [0, 5]
        return c, 0
    c = flycuda.new_step_counter(device, 0 if state == "-=1 at 0" else 4)
    if state == "+=k":
        c += 3
        return c, 7
    if state == "fill_(-1)":
        c.fill_(-1)
        return c, -1
    c -= 1  # [-1, -1]
    return c, -1


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("state", ["+=k", "fill_(-1)", "-=1 at 0", "start=-k,+=k"])
@pytest.mark.parametrize("W", [1, 300, 8192])
def test_user_written_counters(device, state, W):
    """A counter a user wrote with tensor ops (step += k, fill_(-1), step -= 1 at 0,
    new_step_counter(start=-k) then step += k) is just the step it holds: three calls
    in a row each read it in every world and advance it once, on the fused path, and
    the op, the grid reference (many 64-thread blocks) and CUDA agree."""
    T, D = 50, 42
    motion = torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(1, T, D).contiguous().to(device)
    ids, offsets = torch.arange(D).to(device), torch.full((W,), 20.0).to(device)
    ctrl = poison_like(torch.empty(W, D)).to(device)
    step, s = _user_written(device, state)
    assert launch_plan.step_has_ticket(step)
    ref_step, _ = _user_written("cpu", state)
    ref_ctrl = poison_like(torch.empty(min(W, 300), D))
    for k in range(3):
        flycuda.motion_to_ctrl(motion, step, ctrl, ids, offsets=offsets, advance=1)
        assert torch.all(ctrl == min(max(20 + s + k, 0), T - 1)).item(), f"call {k}: a world read another step"
        if W <= 300:  # the grid reference, block by block (Python: small W only)
            reference.grid.motion_to_ctrl(motion.cpu(), ref_step, ref_ctrl, ids.cpu(), offsets=offsets.cpu()[:W],
                                          advance=1, threads=64)
            assert torch.equal(ref_ctrl, ctrl.cpu())
            assert launch_plan.ticket_of(ref_step).tolist() == [0], "the ticket must wrap to 0"
    assert int(step[0]) == s + 3 and launch_plan.ticket_of(step).cpu().tolist() == [0]
    if W <= 300:
        assert int(ref_step[0]) == s + 3


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_nan_offsets_read_frame_zero(device):
    motion = torch.randn(1, 6, 2).to(device)
    ctrl = poison_like(torch.empty(3, 2)).to(device)
    offsets = torch.tensor([float("nan"), float("inf"), float("-inf")]).to(device)
    for mode, expect_inf_frame in (("clamp", 5), ("loop", 0)):
        flycuda.motion_to_ctrl(motion, flycuda.new_step_counter(device, 2), ctrl,
                               torch.arange(2).to(device), offsets=offsets, mode=mode)
        assert torch.equal(ctrl[0].cpu(), motion[0, 0].cpu())
        assert torch.equal(ctrl[1].cpu(), motion[0, expect_inf_frame].cpu())
        assert torch.equal(ctrl[2].cpu(), motion[0, 0].cpu())


def test_empty_worlds_and_dofs_still_advance():
    step = flycuda.new_step_counter("cpu", 4)
    flycuda.motion_to_ctrl(torch.randn(1, 3, 0), step, torch.randn(5, 2),
                           torch.zeros(0, dtype=torch.long), advance=2)
    flycuda.motion_to_ctrl(torch.randn(1, 3, 2), step, torch.randn(0, 2),
                           torch.tensor([1, 0]), advance=1)
    assert int(step[0]) == 7


def test_opcheck():
    motion, act_ids, offsets = make_case(9, 9, 11, 5, 8, "wild", "cpu")
    args = (motion, flycuda.new_step_counter("cpu", 3), torch.randn(9, 8), act_ids,
            offsets, 0.5, "loop", 1)
    torch.library.opcheck(torch.ops.flycuda.motion_to_ctrl.default, args)
    args_none = (motion[:1].contiguous(), flycuda.new_step_counter("cpu", 3),
                 torch.randn(9, 8), act_ids.int(), None, 1.0, "clamp", 0)
    torch.library.opcheck(torch.ops.flycuda.motion_to_ctrl.default, args_none)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_torch_compile(device):
    """The op and the counter work inside a compiled function (fake kernels, functionalization)."""
    torch._dynamo.reset()
    motion, act_ids, offsets = make_case(6, 1, 40, 42, 42, "wild", device)

    def per_step(ctrl, step):
        flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, offsets=offsets,
                               frames_per_step=0.33, mode="loop")
        flycuda.advance_step(step, 1)
        return ctrl.sum()

    compiled = torch.compile(per_step, backend="aot_eager", fullgraph=True)
    ctrl_e, ctrl_c = torch.randn(6, 42).to(device), torch.randn(6, 42).to(device)
    step_e, step_c = flycuda.new_step_counter(device), flycuda.new_step_counter(device)
    for _ in range(4):
        out_e, out_c = per_step(ctrl_e, step_e), compiled(ctrl_c, step_c)
        assert torch.equal(ctrl_e, ctrl_c) and torch.equal(out_e, out_c)
    assert int(step_c[0]) == int(step_e[0]) == 4
