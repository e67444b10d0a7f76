// flycuda: pool_ommatidia's host-side checks, shared by the CPU impl
// (pool_ommatidia.cpp) and the CUDA launcher (cuda/pool_ommatidia.cu) so both
// reject exactly the same inputs before touching the readouts.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/pool_ommatidia.cuh"

namespace flycuda {

// Validates every argument's dtype, shape, device, contiguity and aliasing, and
// returns the launch plan (kernels/pool_ommatidia.cuh) that the CPU twin, the
// CUDA launcher and the emulator all run. `check_values` also runs
// check_pool_ommatidia_values (host copies on CUDA; skipped during capture).
kernels::PoolPlan check_pool_ommatidia(const at::Tensor& pixels,       // [S, E, P, 3]
                                       const at::Tensor& omm_ptr,      // [O + 1]
                                       const at::Tensor& omm_pixels,   // [nnz]
                                       const at::Tensor& omm_channel,  // [O]
                                       const at::Tensor& omm_column,   // [O]
                                       const at::Tensor& omm_count,    // [O]
                                       const at::Tensor& readouts,     // [S, E, O, 2]
                                       bool check_values);

// The map's values: omm_ptr CSR offsets from 0 to nnz, omm_pixels in [0, P),
// omm_channel in [0, 3), omm_column in [0, 2), omm_count >= 1 (each cached per
// tensor version, as check_index_values).
void check_pool_ommatidia_values(const at::Tensor& omm_ptr,      // [O + 1]
                                 const at::Tensor& omm_pixels,   // [nnz]
                                 const at::Tensor& omm_channel,  // [O]
                                 const at::Tensor& omm_column,   // [O]
                                 const at::Tensor& omm_count,    // [O]
                                 const kernels::PoolPlan& p);

// The map arrays' pointers, as the kernel takes them (after the checks).
kernels::PoolMap pool_map(const at::Tensor& omm_ptr, const at::Tensor& omm_pixels, const at::Tensor& omm_channel,
                          const at::Tensor& omm_column, const at::Tensor& omm_count);

}  // namespace flycuda
