// flycuda: pool_ommatidia — the CUDA launcher (kernel and plan:
// csrc/kernels/pool_ommatidia.cuh).
#include "common.h"
#include "cuda/launch.h"
#include "kernels/pool_ommatidia.cuh"
#include "pool_ommatidia.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

void pool_ommatidia_cuda(FLYCUDA_POOL_OMMATIDIA_PARAMS) {
  // Check inputs (the map's values once per tensor version, never in capture).
  const kernels::PoolPlan p = check_pool_ommatidia(FLYCUDA_POOL_OMMATIDIA_ARGS, /*check_values=*/false);
  const c10::cuda::CUDAGuard guard(readouts.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  if (!cuda::capturing(stream)) {
    check_pool_ommatidia_values(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, p);
  }
  if (p.threads() == 0) return;
  // Launch: one thread per (image, ommatidium) on the current stream.
  kernels::pool_ommatidia_kernel<<<static_cast<unsigned int>(p.blocks()), kernels::kPoolThreads, 0, stream>>>(
      pixels.data_ptr<uint8_t>(), pool_map(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count),
      readouts.data_ptr<float>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("pool_ommatidia", &pool_ommatidia_cuda); }

}  // namespace flycuda
