// flycuda: advance_step — the step counter's host side, for every op that reads the
// counter: its check (CHECK_COUNTER) and whether it carries the fused advance's hidden
// ticket. Its layout: kernels/advance_step.cuh; docs/design.md, "The step counter".
#pragma once

#include "common.h"
#include "kernels/advance_step.cuh"

// The step counter: int64 [1] = {step}, or [2] = {step, reserved}. A [2] from
// new_step_counter also carries a hidden ticket beyond the view (its storage is
// kernels::kCounterBytes long) that lets motion_to_ctrl fuse its advance into one
// launch.
#define CHECK_COUNTER(x)                                                     \
  FLYCUDA_CHECK((x).scalar_type() == ::flycuda::kLong && (x).dim() == 1 &&            \
                    ((x).size(0) == 1 || (x).size(0) == 2) && (x).is_contiguous(), \
                "argument '" #x "' must be a contiguous int64 step counter of shape " \
                "[1] or [2] (see flycuda.new_step_counter), got ", (x).scalar_type(), \
                " of shape ", ::flycuda::sizes_of(x))

namespace flycuda {

// Does a step counter carry the fused advance's hidden ticket: an int64 [2] view at
// offset 0 of a storage of kernels::kCounterBytes bytes (what new_step_counter makes)?
bool counter_has_ticket(const Tensor& step);  // [1] or [2]

void check_advance_step(const Tensor& step);  // [1] or [2]

}  // namespace flycuda
