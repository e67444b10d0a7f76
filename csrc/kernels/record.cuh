// flycuda: the record family (record_qpos, record_chunk) — the device code and
// its launch plan, compiled by nvcc (cuda/record.cu), by the host compiler
// for the CPU twin (record.cpp: RecordPlan and record_base only) and on the
// emulated grid (emu/).
//
// Both ops gather columns of a [W, N] source (a zero-copy view of MuJoCo Warp's
// Data: qpos, qvel, xpos, sensordata, ...) at the device step counter s:
//
//   if s >= 0, s % every == 0 and k = s / every < limit:
//     out[(k / C) % B, w, k % C, d] = src[w, cols[d]]     for all w, d
//
// record_qpos writes one history [W, R, D] (B = 1, C = R, limit = R);
// record_chunk writes a ring of B chunks of C rows [B, W, C, D] (no limit), so
// a recording streams out chunk by chunk from memory that does not grow with
// the run. One thread per (world w, column d), idx = w * D + d (32-bit: the
// host checks W * D < 2^31). Every thread reads the counter and returns at once
// when the step is not recorded, so the launch is graph-capturable.
#pragma once

#include "platform.h"

#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kRecordThreads = 256;

// The launch plan and memory layout of one record launch, built once on the
// host (record.cpp: make_record_plan) for the CPU twin, the CUDA launcher
// and the emulator alike. Strides are in elements.
struct RecordPlan {
  int64_t W = 0, D = 0, N = 0;   // worlds, recorded columns, source columns
  int64_t every = 1;             // record when s % every == 0 ...
  int64_t limit = 0;             // ... and k = s / every < limit
  int64_t B = 1, C = 1;          // a ring of B chunks of C rows
  int64_t src_s0 = 0, src_s1 = 0;                        // src [W, N]
  int64_t out_sb = 0, out_sw = 0, out_sr = 0, out_sd = 0;  // out [B, W, C, D]

  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * D; }
  int64_t blocks() const { return (threads() + kRecordThreads - 1) / kRecordThreads; }
};

// The element offset of row (w = 0, d = 0) that step s records into, or -1
// when s records nothing.
FLYCUDA_HOST_DEVICE inline int64_t record_base(const RecordPlan& p, int64_t s) {
  if (s < 0 || s % p.every != 0) return -1;
  const int64_t k = s / p.every;
  if (k >= p.limit) return -1;
  return ((k / p.C) % p.B) * p.out_sb + (k % p.C) * p.out_sr;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel itself: nvcc and the emulator
template <typename index_t>
__global__ void record_kernel(const float* __restrict__ src,      // [W, N]
                              const index_t* __restrict__ cols,   // [D]
                              float* __restrict__ out,            // [B, W, C, D]
                              const int64_t* __restrict__ step,   // [1] or [2]
                              const RecordPlan p) {
  const int64_t base = record_base(p, step[0]);
  if (base < 0) return;
  // Compared unsigned, then narrowed: the host keeps threads() <= INT32_MAX, and the last
  // block's indices past it never become negative ints.
  const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= static_cast<unsigned int>(p.threads())) return;
  const int idx = static_cast<int>(t);
  const int D = static_cast<int>(p.D);
  const int w = idx / D;
  const int d = idx - w * D;
  const int64_t a = static_cast<int64_t>(cols[d]);
  if (a < 0 || a >= p.N) return;  // cols are checked on the host (once), except in capture
  out[base + w * p.out_sw + d * p.out_sd] = src[w * p.src_s0 + a * p.src_s1];
}

// The launch (platform.h, "launch templates"): one thread per (w, d); none when
// nothing can be recorded.
template <class Launcher, typename index_t>
void launch_record(Launcher&& launch,
                   const float* src,      // [W, N]
                   const index_t* cols,   // [D]
                   float* out,            // [B, W, C, D]
                   const int64_t* step,   // [1] or [2]
                   const RecordPlan& p) {
  if (p.threads() == 0 || p.limit == 0) return;
  launch(record_kernel<index_t>, dim3(static_cast<unsigned int>(p.blocks())), dim3(kRecordThreads), 0, src, cols, out,
         step, p);
}
#endif

}  // namespace kernels
}  // namespace flycuda
