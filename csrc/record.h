// flycuda: the record family (record_qpos, record_chunk) — the argument checks, shared by
// the CPU impls (record.cpp) and the CUDA launcher (cuda/record.cu) so that both reject
// exactly the same inputs before touching any output.
#pragma once

#include "advance_step.h"
#include "common.h"
#include "kernels/record.cuh"

#include <cstdint>

namespace flycuda {

// Each validates every argument and returns the launch plan (kernels/record.cuh) that
// the CPU twin, the CUDA launcher and the emulator all run; on the CPU also the column
// ids' range (checks_values_here).
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

}  // namespace flycuda
