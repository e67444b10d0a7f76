// flycuda: motion_to_ctrl and spline_to_ctrl — the device code, compiled by nvcc
// (cuda/motion_to_ctrl.cu) and, on the emulated grid, by the host compiler (emu/).
// One kernel serves both ops: `Frames` is LinearFrames (motion_to_ctrl: float32
// frames, linear blend) or SplineFrames (spline_to_ctrl: float64 cubic pieces);
// see ../motion_to_ctrl.h.
//
// One thread per (world w, DOF d), flattened as idx = w * D + d, kThreads a
// block. Consecutive threads read consecutive floats of one frame row and
// write one ctrl row, so a warp touches one or two rows of each array.
//
// Fused advance (advance > 0) in ONE launch, with no state outside the counter:
// the counter is int64 [2] = {step, ticket}. Every thread reads step first;
// then each block, after __syncthreads, takes a ticket from counter[1]; the
// block that takes the last ticket (every other block has finished reading)
// writes step + advance and returns the ticket to 0. Launches on different
// counters share nothing, so they may overlap on any streams. (A [1] counter
// has no ticket: the launcher then adds a second, one-thread launch.)
//
// A ticket is tagged with the step its launch read (high 32 bits; count in the
// low 32), and a ticket with another tag counts as 0: a ticket left non-zero by
// a user's write to the counter (step += 1, fill_, copy_) is ignored instead of
// making blocks read an advanced step or the counter stop advancing.
#pragma once

#include "../motion_to_ctrl.h"
#include "platform.h"

#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kMotionToCtrlThreads = 256;

// Blocks of a motion_to_ctrl launch: at least one, so that an advance happens.
inline int64_t motion_to_ctrl_blocks(int64_t W, int64_t D) {
  const int64_t n = W * D;
  return n > 0 ? (n + kMotionToCtrlThreads - 1) / kMotionToCtrlThreads : 1;
}

template <typename Frames, typename index_t, typename offset_t>
__global__ void motion_to_ctrl_kernel(const Frames frames,                  // [M, T, (4,) D]
                                      int64_t* counter,                     // [1] or [2]
                                      float* __restrict__ ctrl,             // [W, nu]
                                      const index_t* __restrict__ act_ids,  // [D]
                                      const offset_t* __restrict__ offsets, // [W] or null
                                      int64_t W, int64_t D, int64_t nu, int64_t ctrl_s0, int64_t ctrl_s1,
                                      double frames_per_step, bool loop,
                                      int64_t advance) {  // fused: needs counter[1]
  const int64_t s = counter[0];  // read by every thread before any advance
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < W * D) {
    const int64_t w = idx / D;
    const int64_t d = idx - w * D;
    const double offset = offsets ? static_cast<double>(offsets[w]) : 0.0;
    const FrameSample fs = sample_frame(offset, s, frames_per_step, frames.T, loop);
    const int64_t c = static_cast<int64_t>(act_ids[d]);
    if (c >= 0 && c < nu) {  // ids are checked on the host (once), except in capture
      ctrl[w * ctrl_s0 + c * ctrl_s1] = frames.at(w, fs, d);
    }
  }
  if (advance != 0) {
    __syncthreads();  // every thread of this block has read the counter
    if (threadIdx.x == 0) {
      unsigned long long* ticket = reinterpret_cast<unsigned long long*>(counter + 1);
      const unsigned long long tag = static_cast<unsigned long long>(static_cast<uint32_t>(s)) << 32;
      __threadfence();
      unsigned long long seen = 0ull, taken = 0ull;
      for (;;) {  // taken = this launch's count so far; count + 1, tagged
        taken = (seen >> 32) == (tag >> 32) ? (seen & 0xffffffffull) : 0ull;
        const unsigned long long prev = atomicCAS(ticket, seen, tag | (taken + 1ull));
        if (prev == seen) break;
        seen = prev;
      }
      if (taken == gridDim.x - 1ull) {  // the last block: every block has read step
        __threadfence();
        counter[0] = s + advance;
        atomicExch(ticket, 0ull);
      }
    }
  }
}

}  // namespace kernels
}  // namespace flycuda
