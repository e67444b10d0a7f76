// flycuda: advance_step — argument checks, the counter's ticket test and the CPU impl
// (counter[0] += n).
#include "advance_step.h"

#include "common.h"

namespace flycuda {

bool counter_has_ticket(const Tensor& step) {
  return kernels::counter_has_ticket(step.numel(), step.storage_offset(), storage_nbytes(step));
}

void check_advance_step(const Tensor& step) {
  constexpr const char* kOpName = "advance_step";
  // step: int64 [1] or [2] (element 0 is the step).
  CHECK_COUNTER(step);
}

namespace {

void advance_step_cpu(Tensor& step,  // [1] or [2]
                      int64_t n) {
  check_advance_step(step);
  dptr<int64_t>(step)[0] += n;
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("advance_step", TORCH_BOX(&advance_step_cpu)); }

}  // namespace flycuda
