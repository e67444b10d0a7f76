// flycuda: hybrid_step — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/hybrid_step.cuh, whose per-world function the CPU twin below
// calls in a loop (the CUDA kernel and the emulator call the same).
#include "hybrid_step.h"

#include "common.h"

#include <climits>
#include <iterator>
#include <utility>

namespace flycuda {
namespace walking {

void check_ctrl_shape(const char* op, const Tensor& ctrl) {
  const char* kOpName = op;
  FLYCUDA_CHECK(ctrl.scalar_type() == kFloat && ctrl.dim() == 2, "argument 'ctrl' must be a float32 [W, nu] "
                "tensor, got ", ctrl.scalar_type(), " of shape ", sizes_of(ctrl));
}

kernels::HybridPlan check_ctrl(const char* op, const Tensor& act_ids, const Tensor& ctrl,
                               std::initializer_list<Named> inputs, std::initializer_list<Named> outputs) {
  const char* kOpName = op;
  const int64_t W = ctrl.size(0), nu = ctrl.size(1);
  FLYCUDA_CHECK(act_ids.device() == ctrl.device() &&
                    (act_ids.scalar_type() == kInt || act_ids.scalar_type() == kLong) && act_ids.dim() == 1 &&
                    act_ids.size(0) == kernels::kHybridColumns && act_ids.is_contiguous(),
                "argument 'act_ids' must be a contiguous int32/int64 [", kernels::kHybridColumns,
                "] tensor on ", ctrl.device(), " (the ctrl columns of the 42 joint angles, then the 6 adhesion "
                "actuators), got ", act_ids.scalar_type(), " of shape ", sizes_of(act_ids), " on ", act_ids.device());
  FLYCUDA_CHECK(!has_internal_overlap(ctrl), "argument 'ctrl' must not have overlapping memory (e.g. an expanded "
                "tensor), got shape ", sizes_of(ctrl), " strides ", strides_of(ctrl));
  check_disjoint(op, inputs, outputs);
  FLYCUDA_CHECK(W <= INT32_MAX, "W = ", W, " must be < 2^31 (32-bit thread indices)");
  if (checks_values_here(ctrl)) {
    check_index_values(kOpName, "act_ids", HostValues(act_ids), nu, "nu = ctrl.size(1)", true);
  }
  kernels::HybridPlan p;
  p.W = W;
  p.nu = nu;
  p.ctrl_s0 = ctrl.stride(0);
  p.ctrl_s1 = ctrl.stride(1);
  return p;
}

}  // namespace walking

namespace {

constexpr const char* kOpName = "hybrid_step";

}  // namespace

kernels::HybridPlan check_hybrid_step(const HybridArgs& a) {
  walking::check_ctrl_shape(kOpName, a.ctrl);
  const int64_t W = a.ctrl.size(0);
  const ScalarType st = a.drive.scalar_type();
  FLYCUDA_CHECK(st == kFloat || st == kDouble, "argument 'drive' must have dtype Float or Double, got ", st);
  const auto expect = [&](const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape) {
    walking::expect(kOpName, t, name, dt, std::move(shape), a.ctrl);
  };
  expect(a.drive, "drive", st, {W, 2});
  expect(a.thorax_z, "thorax_z", st, {W});
  expect(a.tarsus5_z, "tarsus5_z", st, {W, kernels::kLegs});
  expect(a.stumbling_forces, "stumbling_forces", st, {W, kernels::kLegs, 3, 3});
  expect(a.heading, "heading", st, {W, 3});
  expect(a.params, "params", kDouble, {kernels::kParCount});
  expect(a.state, "state", kDouble, {W, kernels::kStateRows, kernels::kLegs});
  expect(a.persistence, "persistence", kLong, {W, kernels::kLegs});
  return walking::check_ctrl(kOpName, a.act_ids, a.ctrl,
                             {{"drive", &a.drive}, {"thorax_z", &a.thorax_z}, {"tarsus5_z", &a.tarsus5_z},
                              {"stumbling_forces", &a.stumbling_forces}, {"heading", &a.heading},
                              {"params", &a.params}, {"act_ids", &a.act_ids}},
                             {{"state", &a.state}, {"persistence", &a.persistence}, {"ctrl", &a.ctrl}});
}

namespace {

void hybrid_step_cpu(const Tensor& drive, const Tensor& thorax_z, const Tensor& tarsus5_z,
                     const Tensor& stumbling_forces, const Tensor& heading, const Tensor& params, Tensor& state,
                     Tensor& persistence, const Tensor& act_ids, Tensor& ctrl) {  // shapes: HybridArgs
  const HybridArgs a{drive, thorax_z, tarsus5_z, stumbling_forces, heading, params, state, persistence, act_ids, ctrl};
  const kernels::HybridPlan p = check_hybrid_step(a);
  FLYCUDA_DISPATCH_FLOATING_TYPES(drive.scalar_type(), "hybrid_step_cpu", [&] {
    FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "hybrid_step_cpu", [&] {
      const scalar_t *d = dptr<scalar_t>(drive), *tz = dptr<scalar_t>(thorax_z), *t5 = dptr<scalar_t>(tarsus5_z);
      const scalar_t *f = dptr<scalar_t>(stumbling_forces), *h = dptr<scalar_t>(heading);
      const double* par = dptr<double>(params);
      double* s = dptr<double>(state);
      int64_t* cnt = dptr<int64_t>(persistence);
      const index_t* ids = dptr<index_t>(act_ids);
      float* c = dptr<float>(ctrl);
      torch::stable::parallel_for(0, p.W, /*grain_size=*/64, [&](int64_t begin, int64_t end) {
        for (int64_t w = begin; w < end; ++w) kernels::hybrid_one(d, tz, t5, f, h, par, s, cnt, ids, c, p, w);
      });
    });
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("hybrid_step", TORCH_BOX(&hybrid_step_cpu));
}

}  // namespace flycuda
