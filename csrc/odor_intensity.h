// flycuda: odor_intensity (every world's odor at its sensors, issue 41) — the argument checks,
// shared by the CPU impl (odor_intensity.cpp) and the CUDA launcher (cuda/odor_intensity.cu) so
// that both refuse exactly the same inputs before touching the output. The kernel and its launch
// plan: kernels/odor_intensity.cuh.
#pragma once

#include "common.h"
#include "kernels/odor_intensity.cuh"

#include <optional>
#include <string_view>

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct OdorArgs {
  const Tensor& sources;              // [W, n, 3] float32, any strides (stride 0: shared)
  const Tensor& peaks;                // [n, k] or [W, n, k] float32, any strides
  const Tensor& sensors;              // [W, s, 3] float32, any strides
  Tensor& out;                        // [W, k, s] float32, any strides, no overlap
  std::string_view field;             // "power" or "advection_diffusion"
  double exponent;                    // power: >= 0
  const std::optional<Tensor>& wind;  // advection_diffusion: [W, 2] float32 (None: still air)
  double diffusivity, decay;          // advection_diffusion: > 0
};

// Validates every argument; the plan.
kernels::OdorPlan check_odor_intensity(const OdorArgs& a);

}  // namespace flycuda
