// flycuda: hybrid_step — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/hybrid_step.cuh, whose per-world function the CPU twin below
// calls in a loop (the CUDA kernel and the emulator call the same).
#include "hybrid_step.h"

#include "common.h"

#include <climits>

namespace flycuda {
namespace {

constexpr const char* kOpName = "hybrid_step";

void expect(const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape, const Tensor& ctrl) {
  FLYCUDA_CHECK(t.device() == ctrl.device(), "argument '", name, "' must be on ", ctrl.device(),
                " (the device of 'ctrl'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ", t.scalar_type());
  bool same = t.dim() == static_cast<int64_t>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = t.size(static_cast<int64_t>(i)) == shape[i];
  FLYCUDA_CHECK(same, "argument '", name, "' must have shape ", sizes_str(shape), ", got ", sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous, got shape ", sizes_of(t), " strides ",
                strides_of(t));
}

}  // namespace

kernels::HybridPlan check_hybrid_step(const HybridArgs& a) {
  FLYCUDA_CHECK(a.ctrl.scalar_type() == kFloat && a.ctrl.dim() == 2, "argument 'ctrl' must be a float32 [W, nu] "
                "tensor, got ", a.ctrl.scalar_type(), " of shape ", sizes_of(a.ctrl));
  const int64_t W = a.ctrl.size(0), nu = a.ctrl.size(1);
  const ScalarType st = a.drive.scalar_type();
  FLYCUDA_CHECK(st == kFloat || st == kDouble, "argument 'drive' must have dtype Float or Double, got ", st);
  expect(a.drive, "drive", st, {W, 2}, a.ctrl);
  expect(a.thorax_z, "thorax_z", st, {W}, a.ctrl);
  expect(a.tarsus5_z, "tarsus5_z", st, {W, kernels::kLegs}, a.ctrl);
  expect(a.stumbling_forces, "stumbling_forces", st, {W, kernels::kLegs, 3, 3}, a.ctrl);
  expect(a.heading, "heading", st, {W, 3}, a.ctrl);
  expect(a.params, "params", kDouble, {kernels::kParCount}, a.ctrl);
  expect(a.state, "state", kDouble, {W, kernels::kStateRows, kernels::kLegs}, a.ctrl);
  expect(a.persistence, "persistence", kLong, {W, kernels::kLegs}, a.ctrl);
  FLYCUDA_CHECK(a.act_ids.device() == a.ctrl.device() &&
                    (a.act_ids.scalar_type() == kInt || a.act_ids.scalar_type() == kLong) && a.act_ids.dim() == 1 &&
                    a.act_ids.size(0) == kernels::kHybridColumns && a.act_ids.is_contiguous(),
                "argument 'act_ids' must be a contiguous int32/int64 [", kernels::kHybridColumns,
                "] tensor on ", a.ctrl.device(), " (the ctrl columns of the 42 joint angles, then the 6 adhesion "
                "actuators), got ", a.act_ids.scalar_type(), " of shape ", sizes_of(a.act_ids), " on ",
                a.act_ids.device());
  FLYCUDA_CHECK(!has_internal_overlap(a.ctrl), "argument 'ctrl' must not have overlapping memory (e.g. an expanded "
                "tensor), got shape ", sizes_of(a.ctrl), " strides ", strides_of(a.ctrl));
  const std::pair<const char*, const Tensor*> inputs[] = {
      {"drive", &a.drive}, {"thorax_z", &a.thorax_z}, {"tarsus5_z", &a.tarsus5_z},
      {"stumbling_forces", &a.stumbling_forces}, {"heading", &a.heading}, {"params", &a.params},
      {"act_ids", &a.act_ids}};
  const std::pair<const char*, const Tensor*> outputs[] = {
      {"state", &a.state}, {"persistence", &a.persistence}, {"ctrl", &a.ctrl}};
  for (const auto& [out_name, out] : outputs) {
    for (const auto& [in_name, in] : inputs) {
      FLYCUDA_CHECK(!may_share_memory(*out, *in), "argument '", out_name, "' must not share memory with argument '",
                    in_name, "'");
    }
  }
  FLYCUDA_CHECK(!may_share_memory(a.state, a.persistence) && !may_share_memory(a.state, a.ctrl) &&
                    !may_share_memory(a.persistence, a.ctrl),
                "arguments 'state', 'persistence' and 'ctrl' must not share memory");
  FLYCUDA_CHECK(W <= INT32_MAX, "W = ", W, " must be < 2^31 (32-bit thread indices)");
  if (checks_values_here(a.ctrl)) {
    check_index_values(kOpName, "act_ids", HostValues(a.act_ids), nu, "nu = ctrl.size(1)", true);
  }
  kernels::HybridPlan p;
  p.W = W;
  p.nu = nu;
  p.ctrl_s0 = a.ctrl.stride(0);
  p.ctrl_s1 = a.ctrl.stride(1);
  return p;
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
      torch::stable::parallel_for(0, p.threads(), /*grain_size=*/64, [&](int64_t begin, int64_t end) {
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
