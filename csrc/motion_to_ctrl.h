// flycuda: motion_to_ctrl and spline_to_ctrl — the argument checks, shared by the CPU
// impls (motion_to_ctrl.cpp) and the CUDA launchers (cuda/motion_to_ctrl.cu) so that
// both reject exactly the same inputs before touching any output. The launch plan:
// kernels/motion_to_ctrl.cuh.
#pragma once

#include "advance_step.h"
#include "common.h"
#include "kernels/motion_to_ctrl.cuh"

#include <cstdint>

namespace flycuda {

// How motion_to_ctrl maps a frame position outside [0, T-1] back into it.
enum class FrameMode : int { Clamp = 0, Loop = 1 };

// Validates every argument of motion_to_ctrl and returns the parsed mode; on the
// CPU also the entries of act_ids (range, duplicates; checks_values_here).
FrameMode check_motion_to_ctrl(const Tensor& motion,                 // [M, T, D]
                               const Tensor& step,                   // [1] or [2]
                               const Tensor& ctrl,                   // [W, nu]
                               const Tensor& act_ids,                // [D]
                               const std::optional<Tensor>& offsets, // [W]
                               double frames_per_step, std::string_view mode,
                               int64_t advance);

// The same for spline_to_ctrl (coeffs float64 [M, T, 4, D] instead of motion).
FrameMode check_spline_to_ctrl(const Tensor& coeffs,                 // [M, T, 4, D]
                               const Tensor& step,                   // [1] or [2]
                               const Tensor& ctrl,                   // [W, nu]
                               const Tensor& act_ids,                // [D]
                               const std::optional<Tensor>& offsets, // [W]
                               double frames_per_step, std::string_view mode,
                               int64_t advance);

}  // namespace flycuda
