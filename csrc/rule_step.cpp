// flycuda: rule_step — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/rule_step.cuh, whose per-world function the CPU twin below calls
// in a loop (the CUDA kernel and the emulator call the same).
#include "rule_step.h"

#include "common.h"
#include "hybrid_step.h"  // walking:: the checks both walking controllers make

namespace flycuda {
namespace {

constexpr const char* kOpName = "rule_step";

}  // namespace

kernels::RulePlan check_rule_step(const RuleArgs& a) {
  walking::check_ctrl_shape(kOpName, a.ctrl);
  const int64_t W = a.ctrl.size(0);
  walking::expect(kOpName, a.params, "params", kDouble, {kernels::kParCount}, a.ctrl);
  walking::expect(kOpName, a.rules, "rules", kDouble, {kernels::kRuleCount}, a.ctrl);
  walking::expect(kOpName, a.state, "state", kDouble, {W, kernels::kRuleRows, kernels::kLegs}, a.ctrl);
  walking::expect(kOpName, a.rng, "rng", kLong, {W, kernels::kRngCols}, a.ctrl);
  return walking::check_ctrl(kOpName, a.act_ids, a.ctrl,
                             {{"params", &a.params}, {"rules", &a.rules}, {"act_ids", &a.act_ids}},
                             {{"state", &a.state}, {"rng", &a.rng}, {"ctrl", &a.ctrl}});
}

namespace {

void rule_step_cpu(const Tensor& params, const Tensor& rules, Tensor& state, Tensor& rng, const Tensor& act_ids,
                   Tensor& ctrl) {  // shapes: RuleArgs
  const RuleArgs a{params, rules, state, rng, act_ids, ctrl};
  const kernels::RulePlan p = check_rule_step(a);
  FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "rule_step_cpu", [&] {
    const double *par = dptr<double>(params), *ru = dptr<double>(rules);
    double* s = dptr<double>(state);
    int64_t* g = dptr<int64_t>(rng);
    const index_t* ids = dptr<index_t>(act_ids);
    float* c = dptr<float>(ctrl);
    torch::stable::parallel_for(0, p.W, /*grain_size=*/64, [&](int64_t begin, int64_t end) {
      for (int64_t w = begin; w < end; ++w) kernels::rule_one(par, ru, s, g, ids, c, p, w);
    });
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("rule_step", TORCH_BOX(&rule_step_cpu));
}

}  // namespace flycuda
