"""flycuda.dev: a small CPU kernel built through load_inline vs its reference, and the
grid emulator as a public helper (1D and 2D grids, phases split by __syncthreads)."""

import torch

import flycuda
from flycuda import dev, reference

RECORD_SRC = r"""
#include <torch/extension.h>
// history[w, k, d] = qpos[w, adrs[d]] with k = step / every (the record_qpos contract).
void record_qpos_inline(torch::Tensor qpos, torch::Tensor adrs, torch::Tensor history,
                        torch::Tensor step, int64_t every) {
  const int64_t s = step.data_ptr<int64_t>()[0];
  const int64_t W = history.size(0), R = history.size(1), D = history.size(2);
  if (s < 0 || s % every != 0 || s / every >= R) return;
  auto q = qpos.accessor<float, 2>();
  auto a = adrs.accessor<int64_t, 1>();
  auto h = history.accessor<float, 3>();
  for (int64_t w = 0; w < W; ++w)
    for (int64_t d = 0; d < D; ++d) h[w][s / every][d] = q[w][a[d]];
}
"""


def test_load_inline_cpu_kernel_matches_reference():
    # torch's own build folder (~/.cache/torch_extensions), as a notebook's: a fixed path that
    # ccache can hit on a later run (a new tmp_path each run made every compile a miss: 50 s)
    mod = dev.load_inline("flycuda_test_record_inline", RECORD_SRC, ["record_qpos_inline"])
    qpos, adrs = torch.randn(7, 13), torch.randint(0, 13, (5,))
    for s in (0, 3, 4, 9):
        got, want = torch.full((7, 4, 5), 3.0), torch.full((7, 4, 5), 3.0)
        step = flycuda.new_step_counter("cpu", s)
        mod.record_qpos_inline(qpos, adrs, got, step, 3)
        reference.record_qpos(qpos, adrs, want, step, every=3)
        assert torch.equal(got, want), s


def test_grid_emulator_2d_and_sync_phases():
    """A 2D block-sum kernel with shared memory: phase 1 writes, phase 2 (after
    __syncthreads) thread (0, 0) sums what the whole block wrote."""
    x = torch.randn(6, 10)
    out = torch.zeros(dev.cdiv(6, 4), dev.cdiv(10, 4))

    def load(ctx, x, out):
        r = ctx.blockIdx.y * ctx.blockDim.y + ctx.threadIdx.y
        c = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
        ctx.shared[(ctx.threadIdx.y, ctx.threadIdx.x)] = float(x[r, c]) if r < 6 and c < 10 else 0.0

    def reduce(ctx, x, out):
        if ctx.threadIdx.x == 0 and ctx.threadIdx.y == 0:
            out[ctx.blockIdx.y, ctx.blockIdx.x] = sum(ctx.shared.values())

    dev.launch([load, reduce], dev.dim3(dev.cdiv(10, 4), dev.cdiv(6, 4)), dev.dim3(4, 4), x, out)
    padded = torch.zeros(8, 12)
    padded[:6, :10] = x
    want = padded.view(2, 4, 3, 4).sum(dim=(1, 3))
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


def test_build_refuses_the_installed_namespace():
    import pytest

    with pytest.raises(RuntimeError, match="namespace 'flycuda' is taken"):
        dev.build(namespace="flycuda")
    with pytest.raises(ValueError, match="unknown op families"):
        dev.build(["nope"])
