// flycuda: advance_step — the CUDA launcher (kernel: csrc/kernels/advance_step.cuh).
#include "checks.h"
#include "common.h"
#include "cuda/launch.h"
#include "kernels/advance_step.cuh"

namespace flycuda {
namespace {

void advance_step_cuda(Tensor& step,  // [1] or [2]
                       int64_t n) {
  check_advance_step(step);
  const torch::stable::accelerator::DeviceGuard guard(step.get_device_index());
  kernels::advance_step_kernel<<<1, 1, 0, cuda::stream_for_launch()>>>(dptr<int64_t>(step), n);
  FLYCUDA_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("advance_step", TORCH_BOX(&advance_step_cuda)); }

}  // namespace flycuda
