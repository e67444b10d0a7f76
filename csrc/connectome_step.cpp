// flycuda: connectome_step — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/connectome_step.cuh. The CUDA kernel and the emulator run its
// connectome_step_kernel, a warp per (node, 256 eyes); the CPU twin below reads each row once for
// the whole batch and adds the same terms to each sum in the same order, then the same
// connectome_update.
#include "connectome_step.h"

#include "common.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace flycuda {
namespace {

constexpr const char* kOpName = "connectome_step";

// A float32 [B, cols] tensor on out's device.
void check_batch(const Tensor& t, const char* name, int64_t B, int64_t cols, const char* cols_name,
                 const Tensor& out) {
  FLYCUDA_CHECK(t.device() == out.device(), "argument '", name, "' must be on ", out.device(),
                " (the device of 'out'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == kFloat, "argument '", name, "' must have dtype Float, got ", t.scalar_type());
  FLYCUDA_CHECK(t.dim() == 2 && t.size(0) == B && (cols < 0 || t.size(1) == cols), "argument '", name,
                "' must have shape [B, ", cols_name, "] with B = out.size(0) = ", B,
                cols < 0 ? "" : " and N = out.size(1) = ", cols < 0 ? "" : std::to_string(cols), ", got ", sizes_of(t));
}

// A contiguous 1-D tensor of `n` entries and dtype `dtype` on out's device.
void check_table(const Tensor& t, const char* name, ScalarType dtype, int64_t n, const char* n_name,
                 const Tensor& out) {
  FLYCUDA_CHECK(t.device() == out.device(), "argument '", name, "' must be on ", out.device(),
                " (the device of 'out'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == dtype, "argument '", name, "' must have dtype ", dtype, ", got ", t.scalar_type());
  FLYCUDA_CHECK(t.dim() == 1 && (n < 0 || t.size(0) == n), "argument '", name, "' must be a 1-D tensor [", n_name,
                "]", n < 0 ? "" : " of " + std::to_string(n), ", got shape ", sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous, got strides ", strides_of(t));
  FLYCUDA_CHECK(!may_share_memory(out, t), "argument 'out' must not share memory with argument '", name, "'");
}

}  // namespace

kernels::ConnectomePlan check_connectome_step(const ConnectomeArgs& a) {
  const Tensor& out = a.out;  // the macros name the argument by its variable
  CHECK_DTYPE(out, kFloat);
  FLYCUDA_CHECK(out.dim() == 2, "argument 'out' must be a 2-D tensor [B, N], got shape ", sizes_of(out));
  CHECK_NO_OVERLAP(out);
  const int64_t B = out.size(0), N = out.size(1);
  check_batch(a.v, "v", B, N, "N", out);
  const Tensor& v = a.v;
  CHECK_NOT_ALIASED(out, v);
  check_batch(a.stimulus, "stimulus", B, -1, "C", out);
  const Tensor& stimulus = a.stimulus;
  CHECK_NOT_ALIASED(out, stimulus);
  check_table(a.rowptr, "rowptr", kInt, N + 1, "N + 1", out);
  check_table(a.src, "src", kInt, -1, "E", out);
  const int64_t E = a.src.size(0);
  check_table(a.weight, "weight", kFloat, E, "E = src.size(0)", out);
  check_table(a.bias, "bias", kFloat, N, "N", out);
  check_table(a.tau, "tau", kFloat, N, "N", out);
  const int64_t C = a.stimulus.size(1);
  const float dt32 = static_cast<float>(a.dt);  // the step's float32 dt (flyvis's)
  FLYCUDA_CHECK_VALUE(std::isfinite(dt32) && dt32 > 0.0f, "argument 'dt' must be finite and > 0 in float32, got ",
                      a.dt);
  FLYCUDA_CHECK_VALUE(a.input_nodes >= 0 && a.input_nodes <= N && (a.input_nodes == 0 || (C > 0 && a.input_nodes % C == 0)),
                      "argument 'input_nodes' must be a multiple of C = stimulus.size(1) = ", C, " in [0, N = ", N,
                      "], got ", a.input_nodes);
  const int64_t lanes = (B + kernels::kConnectomeChunk - 1) / kernels::kConnectomeChunk * 32;  // per node
  FLYCUDA_CHECK(lanes * N <= INT32_MAX, "B = ", B, " (", lanes, " lanes per node) * N = ", N,
                " must be < 2^31 (32-bit thread indices)");
  FLYCUDA_CHECK(B <= INT32_MAX - kernels::kConnectomeChunk, "B = ", B, " must be < 2^31 - ",
                kernels::kConnectomeChunk, " (32-bit eye indices)");
  const int64_t reach = B > 0 && N > 0 ? (B - 1) * a.v.stride(0) + (N - 1) * a.v.stride(1) : 0;
  FLYCUDA_CHECK(reach <= INT32_MAX, "argument 'v' reaches element ", reach,
                " past its first: must be < 2^31 (32-bit offsets)");
  FLYCUDA_CHECK(E <= INT32_MAX, "E = ", E, " must be < 2^31 (int32 edge offsets)");
  if (checks_values_here(out)) {
    check_offsets_values(kOpName, "rowptr", a.rowptr, E, "E = src.size(0)");
    check_index_values(kOpName, "src", HostValues(a.src), N, "N = out.size(1)", false);
  }
  kernels::ConnectomePlan p;
  p.B = B, p.N = N, p.E = E, p.C = C, p.input_nodes = a.input_nodes, p.dt = dt32;
  p.v_s0 = a.v.stride(0), p.v_s1 = a.v.stride(1);
  p.x_s0 = a.stimulus.stride(0), p.x_s1 = a.stimulus.stride(1);
  p.out_s0 = out.stride(0), p.out_s1 = out.stride(1);
  return p;
}

namespace {

// Nodes [begin, end) of every batch entry: each row's edges once, each edge's term added to all
// B sums (acc) in order (the kernel's sums, term for term); contiguous batches (node-major
// voltages) in a loop the compiler vectorizes across the batch.
void connectome_rows(const float* v, const float* stimulus, const int32_t* rowptr, const int32_t* src,
                     const float* weight, const float* bias, const float* tau, float* out,
                     const kernels::ConnectomePlan& p, int64_t begin, int64_t end) {
  std::vector<float> acc(static_cast<size_t>(p.B));
  float* s = acc.data();
  for (int64_t n = begin; n < end; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t hi = kernels::connectome_row_hi(rowptr, p, n);
    for (int64_t e = kernels::connectome_row_lo(rowptr, n); e < hi; ++e) {
      const int64_t j = src[e];
      const float w = weight[e];
      if (j < 0 || j >= p.N) {
        for (int64_t b = 0; b < p.B; ++b) s[b] = s[b] + w * NAN;
      } else if (p.v_s0 == 1) {
        const float* col = v + j * p.v_s1;
        for (int64_t b = 0; b < p.B; ++b) s[b] = s[b] + w * kernels::connectome_relu(col[b]);
      } else {
        const float* col = v + j * p.v_s1;
        for (int64_t b = 0; b < p.B; ++b) s[b] = s[b] + w * kernels::connectome_relu(col[b * p.v_s0]);
      }
    }
    for (int64_t b = 0; b < p.B; ++b) {
      out[b * p.out_s0 + n * p.out_s1] = kernels::connectome_update(v, stimulus, bias, tau, p, b, n, s[b]);
    }
  }
}

void connectome_step_cpu(const Tensor& v, const Tensor& stimulus, const Tensor& rowptr, const Tensor& src,
                         const Tensor& weight, const Tensor& bias, const Tensor& tau, Tensor& out, double dt,
                         int64_t input_nodes) {  // shapes: ConnectomeArgs
  const ConnectomeArgs a{v, stimulus, rowptr, src, weight, bias, tau, out, dt, input_nodes};
  const kernels::ConnectomePlan p = check_connectome_step(a);
  if (p.threads() == 0) return;
  // The pointers once (each dptr is a call through the stable ABI).
  const float *pv = dptr<float>(v), *px = dptr<float>(stimulus), *pw = dptr<float>(weight);
  const float *pb = dptr<float>(bias), *pt = dptr<float>(tau);
  const int32_t *pr = dptr<int32_t>(rowptr), *ps = dptr<int32_t>(src);
  float* po = dptr<float>(out);
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, p.B));  // nodes a task
  torch::stable::parallel_for(0, p.N, grain, [&](int64_t begin, int64_t end) {
    connectome_rows(pv, px, pr, ps, pw, pb, pt, po, p, begin, end);
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("connectome_step", TORCH_BOX(&connectome_step_cpu)); }

}  // namespace flycuda
