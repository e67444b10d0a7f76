// flycuda: advance_step — the CUDA launcher (kernel and launch: csrc/kernels/advance_step.cuh).
#include "advance_step.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void advance_step_cuda(Tensor& step,  // [1] or [2]
                       int64_t n) {
  check_advance_step(step);
  const torch::stable::accelerator::DeviceGuard guard(step.get_device_index());
  kernels::launch_advance_step(cuda::Launcher{cuda::stream_for_launch()}, dptr<int64_t>(step), n);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("advance_step", TORCH_BOX(&advance_step_cuda)); }

}  // namespace flycuda
