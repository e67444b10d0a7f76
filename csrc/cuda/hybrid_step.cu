// flycuda: hybrid_step — the CUDA launcher (the kernel, its plan and its launch:
// csrc/kernels/hybrid_step.cuh; checks: csrc/hybrid_step.h). It reads its inputs on the
// device and copies nothing to the host, so a control step that runs it can be captured
// into a CUDA graph once and replayed. act_ids' values are the Python wrapper's to check on
// CUDA (once per tensor version, flycuda/ops/_values.py); the kernel skips out-of-range ones.
#include "hybrid_step.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void hybrid_step_cuda(const Tensor& drive, const Tensor& thorax_z, const Tensor& tarsus5_z,
                      const Tensor& stumbling_forces, const Tensor& heading, const Tensor& params, Tensor& state,
                      Tensor& persistence, const Tensor& act_ids, Tensor& ctrl) {  // shapes: HybridArgs
  const HybridArgs a{drive, thorax_z, tarsus5_z, stumbling_forces, heading, params, state, persistence, act_ids, ctrl};
  const kernels::HybridPlan p = check_hybrid_step(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(ctrl.get_device_index());
  const cuda::Launcher launch{cuda::stream_for_launch()};
  FLYCUDA_DISPATCH_FLOATING_TYPES(drive.scalar_type(), "hybrid_step_cuda", [&] {
    FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "hybrid_step_cuda", [&] {
      kernels::launch_hybrid_step(launch, dptr<scalar_t>(drive), dptr<scalar_t>(thorax_z), dptr<scalar_t>(tarsus5_z),
                                  dptr<scalar_t>(stumbling_forces), dptr<scalar_t>(heading), dptr<double>(params),
                                  dptr<double>(state), dptr<int64_t>(persistence), dptr<index_t>(act_ids),
                                  dptr<float>(ctrl), p);
    });
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("hybrid_step", TORCH_BOX(&hybrid_step_cuda));
}

}  // namespace flycuda
