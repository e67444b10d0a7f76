"""CUDA graphs (GPU only): the per-step ops captured once and replayed equal eager steps."""

import pytest
import torch

import flycuda

pytestmark = pytest.mark.needs_cuda


def _problem(W=1000, T=661, D=42, nu=42, nq=49, R=100):
    g = torch.Generator().manual_seed(1)
    motion = torch.randn(1, T, D, generator=g).cuda()
    act_ids = torch.randperm(nu, generator=g)[:D].cuda()
    offsets = (torch.rand(W, generator=g, dtype=torch.float64) * T).cuda()
    qpos = torch.randn(W, nq, generator=g).cuda()
    adrs = torch.randint(0, nq, (D,), generator=g).cuda()
    return motion, act_ids, offsets, qpos, adrs, R


def _state(W=1000, nu=42, D=42, R=100):
    return (torch.full((W, nu), 5.0, device="cuda"), flycuda.new_step_counter("cuda"),
            torch.full((W, R, D), -5.0, device="cuda"))


def _targets_op(op, motion):
    """(the op, its recording argument): motion_to_ctrl on the frames, spline_to_ctrl on their pieces."""
    if op == "spline":
        return flycuda.spline_to_ctrl, flycuda.spline_coeffs(motion.cpu().double()).cuda()
    return flycuda.motion_to_ctrl, motion


@pytest.mark.parametrize("op", ["motion", "spline"], ids=["motion_to_ctrl", "spline_to_ctrl"])
@pytest.mark.parametrize("fused", [False, True])
def test_graph_replay_equals_eager(fused, op):
    motion, act_ids, offsets, qpos, adrs, R = _problem()
    targets, rec = _targets_op(op, motion)

    def one_step(ctrl, step, history):
        targets(rec, step, ctrl, act_ids, offsets=offsets,
                frames_per_step=0.33, mode="loop", advance=1 if fused else 0)
        if not fused:
            flycuda.advance_step(step, 1)
        # the physics: state depends on ctrl. In place, no temporary: the sanitizers run with torch's
        # caching allocator off, where an allocation inside the capture is a cudaMalloc, refused
        qpos.add_(ctrl[:, :1], alpha=1e-3)
        flycuda.record_qpos(qpos, adrs, history, step, every=10)

    qpos0 = qpos.clone()
    ctrl_e, step_e, hist_e = _state()
    for _ in range(1000):
        one_step(ctrl_e, step_e, hist_e)
    qpos_e = qpos.clone()

    qpos.copy_(qpos0)
    ctrl_g, step_g, hist_g = _state()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (value checks run here, outside capture)
        one_step(ctrl_g, step_g, hist_g)
    torch.cuda.current_stream().wait_stream(side)
    qpos.copy_(qpos0)
    ctrl_g.fill_(5.0), step_g.zero_(), hist_g.fill_(-5.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        one_step(ctrl_g, step_g, hist_g)
    # Capture does not run the work.
    assert int(step_g[0]) == 0
    for _ in range(1000):
        graph.replay()
    torch.cuda.synchronize()
    assert int(step_g[0]) == int(step_e[0]) == 1000
    assert torch.equal(ctrl_g, ctrl_e)
    assert torch.equal(hist_g, hist_e)
    assert torch.equal(qpos, qpos_e)


@pytest.mark.parametrize("op", ["motion", "spline"], ids=["motion_to_ctrl", "spline_to_ctrl"])
def test_cpu_and_cuda_agree_bit_for_bit(op):
    motion, act_ids, offsets, qpos, adrs, R = _problem(W=777)
    targets, rec = _targets_op(op, motion)
    ctrl_c, ctrl_g = torch.full((777, 42), 3.0), torch.full((777, 42), 3.0, device="cuda")
    for s in (0, 1, 12345, 10 ** 9):
        for mode in ("clamp", "loop"):
            targets(rec.cpu(), flycuda.new_step_counter("cpu", s), ctrl_c, act_ids.cpu(), offsets=offsets.cpu(),
                    frames_per_step=0.33, mode=mode)
            targets(rec, flycuda.new_step_counter("cuda", s), ctrl_g, act_ids, offsets=offsets,
                    frames_per_step=0.33, mode=mode)
            assert torch.equal(ctrl_c, ctrl_g.cpu()), (s, mode)
