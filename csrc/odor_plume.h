// flycuda: odor_plume (a replayed odor plume at every world's sensors, issue 41) — the argument
// checks, shared by the CPU impl (odor_plume.cpp) and the CUDA launcher (cuda/odor_plume.cu) so that
// both refuse exactly the same inputs before touching the output. The kernel and its launch plan:
// kernels/odor_plume.cuh.
#pragma once

#include "common.h"
#include "kernels/odor_plume.cuh"

#include <string_view>
#include <vector>

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct PlumeArgs {
  const Tensor& plume;                  // [T, X, Y] or [T, X, Y, Z] float32, contiguous
  const Tensor& sensors;                // [W, s, 3] float32, any strides
  const Tensor& time;                   // [W] float32, any stride (MuJoCo Warp's Data.time)
  Tensor& out;                          // [W, s] float32, any strides, no overlap
  const std::vector<double>& origin;    // the grid's node (0, 0[, 0]): 2 or 3 values
  const std::vector<double>& spacing;   // its step per axis: 2 or 3 values > 0
  double fps;                           // frames per second, > 0
  std::string_view time_mode;           // "clamp" or "loop"
};

// Validates every argument; the plan.
kernels::PlumePlan check_odor_plume(const PlumeArgs& a);

}  // namespace flycuda
