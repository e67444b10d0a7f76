// flycuda: advance_step — the step counter's layout, read by every op that takes the
// counter, and its device code (one thread adds n to the counter, so the counter never
// leaves the device and the launch is graph-capturable). The counter and the fused
// advance: docs/design.md, "The step counter".
#pragma once

#include "platform.h"

#include <cstdint>

namespace flycuda {
namespace kernels {

// --- the step counter: int64 [1] = {step}, or [2] = {step, reserved} -------------------
//
// A [2] from new_step_counter also carries a hidden ticket beyond the view, which lets
// motion_to_ctrl fuse its advance into its own launch (kernels/motion_to_ctrl.cuh).

constexpr int64_t kCounterBytes = 20;  // storage of a new_step_counter: step, reserved (int64), ticket (uint32)
constexpr int64_t kTicketByte = 16;    // where the ticket starts

// Does a counter (an int64 [numel] view at `storage_offset` of a storage of
// `storage_bytes` bytes) carry the hidden ticket? Exactly the layout
// new_step_counter makes.
FLYCUDA_HOST_DEVICE inline bool counter_has_ticket(int64_t numel, int64_t storage_offset,
                                                   int64_t storage_bytes) {
  return numel == 2 && storage_offset == 0 && storage_bytes == kCounterBytes;
}

// The ticket of a counter that has one.
FLYCUDA_HOST_DEVICE inline unsigned int* counter_ticket(int64_t* counter) {
  return reinterpret_cast<unsigned int*>(reinterpret_cast<unsigned char*>(counter) + kTicketByte);
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel and its launch: nvcc and the emulator

static __global__ void advance_step_kernel(int64_t* counter,  // [1] or [2]: counter[0] is the step
                                           int64_t n) {
  counter[0] += n;
}

// The launch (platform.h, "launch templates"): one thread. static, as its kernel is: each
// translation unit that launches it has its own (no specialization shared across units).
template <class Launcher>
static void launch_advance_step(Launcher&& launch,
                         int64_t* counter,  // [1] or [2]
                         int64_t n) {
  launch(advance_step_kernel, dim3(1), dim3(1), 0, counter, n);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
