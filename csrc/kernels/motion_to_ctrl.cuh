// flycuda: motion_to_ctrl and spline_to_ctrl — all of their device code, and
// their launch plan. Three compilers read this file:
//   - nvcc (csrc/cuda/motion_to_ctrl.cu): the kernel, the frame sampling, the plan;
//   - the host compiler for the CPU twin (csrc/motion_to_ctrl.cpp): the frame
//     sampling and the plan only (no __global__ code outside nvcc and the emulator);
//   - the host compiler on the emulated grid (FLYCUDA_EMU, csrc/emu/): everything.
// No ATen here. flycuda/reference/grid.py mirrors the kernel, flycuda/ops/launch_plan.py
// the plan's constants (a test holds the two equal).
//
// One kernel serves both ops: `Frames` is LinearFrames (motion_to_ctrl: float32
// frames, linear blend) or SplineFrames (spline_to_ctrl: float64 cubic pieces).
// One thread per (world w, DOF d), flattened as idx = w * D + d, kMotionToCtrlThreads
// a block. Consecutive threads read consecutive values of one frame row and write
// one ctrl row, so a warp touches one or two rows of each array.
//
// The step counter (its layout: advance_step.cuh) and the fused advance (advance > 0):
// docs/design.md, "The step counter".
#pragma once

#include "advance_step.cuh"  // the step counter's layout, the unfused advance
#include "platform.h"

#include <climits>
#include <cmath>
#include <cstdint>

namespace flycuda {

// --- frame sampling: shared line for line by the CPU twin and the kernel -------------
//
// Device code uses the _rn intrinsics so that nvcc cannot contract a*b+c into an
// FMA; host code is built with -ffp-contract=off for the same reason: the CUDA op
// then rounds exactly like the CPU op and the reference.

#if defined(FLYCUDA_DEVICE_PATH)
#define FLYCUDA_DMUL(a, b) __dmul_rn((a), (b))
#define FLYCUDA_DADD(a, b) __dadd_rn((a), (b))
#define FLYCUDA_DSUB(a, b) __dsub_rn((a), (b))
#define FLYCUDA_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define FLYCUDA_DMUL(a, b) ((a) * (b))
#define FLYCUDA_DADD(a, b) ((a) + (b))
#define FLYCUDA_DSUB(a, b) ((a) - (b))
#define FLYCUDA_DDIV(a, b) ((a) / (b))
#endif

struct FrameSample {
  int64_t i0;  // first frame
  int64_t i1;  // next frame (blended in with weight `a`)
  double a;    // blend weight in [0, 1)
};

// Frame position f = offset + step * frames_per_step (float64), mapped into
// the recording of T frames: clamped to [0, T-1], or wrapped modulo T (frame
// T-1 then blends into frame 0). A non-finite position reads frame 0.
FLYCUDA_HOST_DEVICE inline FrameSample sample_frame(double offset, int64_t step,
                                                    double frames_per_step,
                                                    int64_t T, bool loop) {
  double f = FLYCUDA_DADD(offset, FLYCUDA_DMUL(static_cast<double>(step), frames_per_step));
  const double last = static_cast<double>(T - 1);
  if (loop) {
    const double Td = static_cast<double>(T);
    f = fmod(f, Td);  // exact; sign of f
    if (f < 0.0) f = FLYCUDA_DADD(f, Td);
    if (f >= Td) f = FLYCUDA_DSUB(f, Td);
  } else {
    f = f < 0.0 ? 0.0 : (f > last ? last : f);
  }
  if (!(f >= 0.0 && f <= last + 1.0)) f = 0.0;  // NaN (or inf in loop mode)
  const double fl = floor(f);
  FrameSample s;
  s.i0 = static_cast<int64_t>(fl);
  if (s.i0 > T - 1) s.i0 = T - 1;
  s.a = FLYCUDA_DSUB(f, fl);
  s.i1 = s.i0 + 1;
  if (s.i1 >= T) s.i1 = loop ? 0 : T - 1;
  return s;
}

// Linear blend in float64, rounded once to float32. a == 0 is an exact copy.
FLYCUDA_HOST_DEVICE inline float blend(float x0, float x1, double a) {
  if (a == 0.0) return x0;
  const double d0 = static_cast<double>(x0);
  return static_cast<float>(
      FLYCUDA_DADD(d0, FLYCUDA_DMUL(a, FLYCUDA_DSUB(static_cast<double>(x1), d0))));
}

// Cubic piece c0 + a (c1 + a (c2 + a c3)) in float64 (Horner), rounded once to
// float32. a == 0 is an exact copy of c0 (the recorded frame).
FLYCUDA_HOST_DEVICE inline float cubic(double c0, double c1, double c2, double c3, double a) {
  if (a == 0.0) return static_cast<float>(c0);
  const double v = FLYCUDA_DADD(c2, FLYCUDA_DMUL(a, c3));
  const double w = FLYCUDA_DADD(c1, FLYCUDA_DMUL(a, v));
  return static_cast<float>(FLYCUDA_DADD(c0, FLYCUDA_DMUL(a, w)));
}

// What a world's target is made from, the one difference between the two ops.
// motion_to_ctrl: recorded frames, float32 [M, T, D], blended linearly.
struct LinearFrames {
  const float* motion;
  int64_t M, T, D;
  FLYCUDA_HOST_DEVICE float at(int64_t w, const FrameSample& s, int64_t d) const {
    const float* rec = motion + (M == 1 ? 0 : w) * T * D;
    return blend(rec[s.i0 * D + d], rec[s.i1 * D + d], s.a);
  }
};

// spline_to_ctrl: per-frame cubic pieces, float64 [M, T, 4, D] (flycuda/ops/spline.py);
// piece i0 evaluated at a (piece T-1 is the loop's wrap piece).
struct SplineFrames {
  const double* coeffs;
  int64_t M, T, D;
  FLYCUDA_HOST_DEVICE float at(int64_t w, const FrameSample& s, int64_t d) const {
    const double* c = coeffs + (((M == 1 ? 0 : w) * T + s.i0) * 4) * D + d;
    return cubic(c[0], c[D], c[2 * D], c[3 * D], s.a);
  }
};

namespace kernels {

// --- the launch plan: read by the .cu launcher, the CPU twin and the emulator driver ---

constexpr int kMotionToCtrlThreads = 256;

struct MotionToCtrlPlan {
  int64_t blocks;        // of the main kernel (at least 1 when it runs)
  int threads;           // per block
  bool run_kernel;       // W * D > 0, or a fused advance (one block of idle threads)
  bool fused;            // the advance happens inside the kernel (ticket)
  bool advance_kernel;   // a one-thread advance_step launch follows on the same stream
  bool index32;          // 32-bit index math: blocks * threads <= INT32_MAX
  bool too_large;        // blocks > INT32_MAX: refused by both impls
};

FLYCUDA_HOST_DEVICE inline MotionToCtrlPlan plan_motion_to_ctrl(int64_t W, int64_t D, int64_t advance,
                                                                bool has_ticket) {
  MotionToCtrlPlan p;
  const int64_t n = W * D;
  p.threads = kMotionToCtrlThreads;
  p.blocks = n > 0 ? (n + kMotionToCtrlThreads - 1) / kMotionToCtrlThreads : 1;
  p.fused = advance != 0 && has_ticket;
  p.run_kernel = n > 0 || p.fused;
  p.advance_kernel = advance != 0 && !p.fused;
  p.index32 = p.blocks * kMotionToCtrlThreads <= INT32_MAX;
  p.too_large = p.blocks > INT32_MAX;
  return p;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

// idx_t: int32_t when the plan says index32 (32-bit division per thread), else int64_t.
template <typename idx_t, typename Frames, typename index_t, typename offset_t>
__global__ void motion_to_ctrl_kernel(const Frames frames,                  // [M, T, (4,) D]
                                      int64_t* counter,                     // [1] or [2]: counter[0] is the step
                                      unsigned int* ticket,                 // the hidden ticket (fused), or null
                                      float* __restrict__ ctrl,             // [W, nu]
                                      const index_t* __restrict__ act_ids,  // [D]
                                      const offset_t* __restrict__ offsets, // [W] or null
                                      idx_t W, idx_t D, int64_t nu, int64_t ctrl_s0, int64_t ctrl_s1,
                                      double frames_per_step, bool loop,
                                      int64_t advance) {  // with a ticket only: 0 otherwise
  const int64_t s = counter[0];  // read by every thread before any advance
  const idx_t idx = static_cast<idx_t>(blockIdx.x) * static_cast<idx_t>(blockDim.x) +
                    static_cast<idx_t>(threadIdx.x);
  if (idx < W * D) {
    const idx_t w = idx / D;
    const idx_t d = idx - w * D;
    const double offset = offsets ? static_cast<double>(offsets[w]) : 0.0;
    const FrameSample fs = sample_frame(offset, s, frames_per_step, frames.T, loop);
    const int64_t c = static_cast<int64_t>(act_ids[d]);
    if (c >= 0 && c < nu) {  // ids are checked on the host (once), except in capture
      ctrl[static_cast<int64_t>(w) * ctrl_s0 + c * ctrl_s1] = frames.at(w, fs, d);
    }
  }
  if (advance != 0) {
    __syncthreads();  // every thread of this block has read the counter
    if (threadIdx.x == 0) {
      __threadfence();  // this block's reads before its ticket
      const unsigned int last = gridDim.x - 1u;
      if (atomicInc(ticket, last) == last) {  // wraps the ticket to 0 by itself
        __threadfence();  // every other block's ticket (and so its reads) before the write
        counter[0] = s + advance;
      }
    }
  }
}

// The launch of either op (platform.h, "launch templates"), as the plan says: the kernel
// (32- or 64-bit index math), fused with the advance when the counter carries the hidden
// ticket (new_step_counter), and/or a one-thread advance after it on the same stream.
template <class Launcher, typename Frames, typename index_t, typename offset_t>
void launch_motion_to_ctrl(Launcher&& launch, const Frames& frames,  // [M, T, (4,) D]
                           int64_t* counter,                         // [1] or [2] (+ ticket)
                           float* ctrl,                              // [W, nu], strides (ctrl_s0, ctrl_s1)
                           const index_t* act_ids,                   // [D]
                           const offset_t* offsets,                  // [W] or null
                           int64_t W, int64_t nu, int64_t ctrl_s0, int64_t ctrl_s1, double frames_per_step,
                           bool loop, int64_t advance, const MotionToCtrlPlan& plan) {
  if (plan.run_kernel) {
    const dim3 grid(static_cast<unsigned int>(plan.blocks)), block(plan.threads);
    unsigned int* ticket = plan.fused ? counter_ticket(counter) : nullptr;
    const int64_t fused_advance = plan.fused ? advance : 0;  // the kernel's advance: with a ticket only
    const auto go = [&](auto idx_tag) {
      using idx_t = decltype(idx_tag);
      launch(motion_to_ctrl_kernel<idx_t, Frames, index_t, offset_t>, grid, block, 0, frames, counter, ticket, ctrl,
             act_ids, offsets, static_cast<idx_t>(W), static_cast<idx_t>(frames.D), nu, ctrl_s0, ctrl_s1,
             frames_per_step, loop, fused_advance);
    };
    if (plan.index32) go(int32_t{0});
    else go(int64_t{0});
  }
  if (plan.advance_kernel) launch_advance_step(launch, counter, advance);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
