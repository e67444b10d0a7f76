// flycuda: pool_ommatidia — the CUDA launcher (kernel, plan and launch:
// csrc/kernels/pool_ommatidia.cuh).
#include "pool_ommatidia.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void pool_ommatidia_cuda(FLYCUDA_POOL_OMMATIDIA_PARAMS) {
  // Check inputs (the map's values: the Python wrapper, once per tensor version).
  const kernels::PoolPlan p = check_pool_ommatidia(FLYCUDA_POOL_OMMATIDIA_ARGS);
  const torch::stable::accelerator::DeviceGuard guard(readouts.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  // Launch: one thread per (image, ommatidium) on the current stream.
  kernels::launch_pool_ommatidia(cuda::Launcher{stream}, dptr<uint8_t>(pixels),
                                 pool_map(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count),
                                 dptr<float>(readouts), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("pool_ommatidia", TORCH_BOX(&pool_ommatidia_cuda)); }

}  // namespace flycuda
