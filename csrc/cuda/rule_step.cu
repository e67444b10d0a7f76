// flycuda: rule_step — the CUDA launcher (the kernel, its plan and its launch:
// csrc/kernels/rule_step.cuh; checks: csrc/rule_step.h). It reads and writes everything on
// the device (each world's random stream included) and copies nothing to the host, so a
// control step that runs it can be captured into a CUDA graph. act_ids' values are the
// Python wrapper's to check on CUDA (flycuda/ops/_values.py); the kernel skips bad ones.
#include "rule_step.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void rule_step_cuda(const Tensor& params, const Tensor& rules, Tensor& state, Tensor& rng, const Tensor& act_ids,
                    Tensor& ctrl) {  // shapes: RuleArgs
  const RuleArgs a{params, rules, state, rng, act_ids, ctrl};
  const kernels::RulePlan p = check_rule_step(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(ctrl.get_device_index());
  const cuda::Launcher launch{cuda::stream_for_launch()};
  FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "rule_step_cuda", [&] {
    kernels::launch_rule_step(launch, dptr<double>(params), dptr<double>(rules), dptr<double>(state),
                              dptr<int64_t>(rng), dptr<index_t>(act_ids), dptr<float>(ctrl), p);
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("rule_step", TORCH_BOX(&rule_step_cuda));
}

}  // namespace flycuda
