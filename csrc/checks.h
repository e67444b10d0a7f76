// flycuda: argument checkers, one per op, shared by the CPU (.cpp) and CUDA
// (.cu) impls so both reject exactly the same inputs before touching outputs.
#pragma once

#include <cstdint>

#include "common.h"
#include "kernels/record.cuh"

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

// Does a step counter carry the fused advance's hidden ticket: an int64 [2] view at
// offset 0 of a storage of kernels::kCounterBytes bytes (what new_step_counter makes)?
bool counter_has_ticket(const Tensor& step);  // [1] or [2]

void check_advance_step(const Tensor& step);  // [1] or [2]

// The record family: validates every argument and returns the launch plan
// (kernels/record.cuh) that the CPU twin, the CUDA launcher and the
// emulator all run; on the CPU also the column ids' range (checks_values_here).
kernels::RecordPlan check_record_qpos(const Tensor& qpos,     // [W, nq]
                                      const Tensor& adrs,     // [D]
                                      const Tensor& history,  // [W, R, D]
                                      const Tensor& step,     // [1] or [2]
                                      int64_t every);
kernels::RecordPlan check_record_chunk(const Tensor& source,   // [W, N]
                                       const Tensor& columns,  // [D]
                                       const Tensor& chunks,   // [B, W, C, D]
                                       const Tensor& step,     // [1] or [2]
                                       int64_t every);

// render_tiles' checks: csrc/render_args.h.

}  // namespace flycuda
