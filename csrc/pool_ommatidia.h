// flycuda: pool_ommatidia's host-side checks, shared by the CPU impl
// (pool_ommatidia.cpp) and the CUDA launcher (cuda/pool_ommatidia.cu) so both
// reject exactly the same inputs before touching the readouts.
#pragma once

#include "common.h"
#include "kernels/pool_ommatidia.cuh"

// The op's parameter list (the schema's, registration.cpp), written once for the
// CPU impl, the CUDA launcher and the checks; FLYCUDA_POOL_OMMATIDIA_ARGS passes it on.
//   pixels [S, E, P, 3] uint8; omm_ptr [O + 1], omm_pixels [nnz], omm_channel [O],
//   omm_column [O], omm_count [O] int32; readouts [S, E, O, 2] float32 (written).
#define FLYCUDA_POOL_OMMATIDIA_PARAMS                                                               \
  const Tensor &pixels, const Tensor &omm_ptr, const Tensor &omm_pixels,                 \
      const Tensor &omm_channel, const Tensor &omm_column, const Tensor &omm_count,       \
      Tensor &readouts
#define FLYCUDA_POOL_OMMATIDIA_ARGS pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, readouts

namespace flycuda {

// Validates every argument's dtype, shape, device, contiguity and aliasing, and
// returns the launch plan (kernels/pool_ommatidia.cuh) that the CPU twin, the
// CUDA launcher and the emulator all run; on the CPU also the map's values
// (checks_values_here): omm_ptr CSR offsets from 0 to nnz, omm_pixels in [0, P),
// omm_channel in [0, 3), omm_column in [0, 2), omm_count >= 1.
kernels::PoolPlan check_pool_ommatidia(FLYCUDA_POOL_OMMATIDIA_PARAMS);

// The map arrays' pointers, as the kernel takes them (after the checks).
kernels::PoolMap pool_map(const Tensor& omm_ptr, const Tensor& omm_pixels, const Tensor& omm_channel,
                          const Tensor& omm_column, const Tensor& omm_count);

}  // namespace flycuda
