// flycuda: advance_step — the CUDA impl: one thread adds n to the counter, so
// the counter never leaves the device (graph-capturable).
#include "checks.h"
#include "common.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

__global__ void advance_step_kernel(int64_t* step,  // [1]
                                    int64_t n) {
  step[0] += n;
}

void advance_step_cuda(at::Tensor& step,  // [1]
                       int64_t n) {
  // Check inputs, then guard the device.
  check_advance_step(step);
  const c10::cuda::CUDAGuard guard(step.device());
  // Launch the kernel and check the launch.
  advance_step_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(
      step.data_ptr<int64_t>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("advance_step", &advance_step_cuda); }

}  // namespace flycuda
