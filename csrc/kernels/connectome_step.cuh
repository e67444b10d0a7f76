// flycuda: connectome_step — one Euler step of flyvis's connectome-constrained network (issue 40)
// for a batch of eyes, and the launch plan. nvcc (csrc/cuda/connectome_step.cu), the host compiler
// (the CPU twin, csrc/connectome_step.cpp) and the emulator compile this one file. No ATen.
//
// A warp per (node n, chunk of kConnectomeChunk = 256 eyes): warp w takes node n = w % N of chunk
// c = w / N, lane l the eyes b = 256 c + 32 k + l, k < kConnectomeEyes = 8 (eyes past B idle). The
// warp reads row n once (every lane the same edge: a broadcast, its index math warp-uniform) and
// each edge's term for its 8 eyes per lane: with the voltages node-major (eye stride 1) and a whole
// chunk, the 8 sources are immediate offsets from one address, 32 lanes side by side (coalesced);
// otherwise (strided voltages, the last partial chunk) the eyes' offsets are hoisted out of the row
// and eyes past B read eye B - 1 (never written). 32-bit offsets throughout (the checks keep every
// element of v below 2^31). The warps of a block take adjacent nodes of one chunk, which share most
// of their sources (L1), and a chunk's voltages stay in L2 while the grid sweeps its nodes:
//   s = sum over the edges e of row n, in order, of weight[e] * relu(v[b, src[e]])     (from +0)
//   a = ((-v[b, n] + bias[n]) + s) + x,  x = 0 + stimulus[b, n % C] for n < input_nodes, else 0
//   out[b, n] = v[b, n] + ((1 / max(tau[n], dt)) * a) * dt
// every operation a float32 rounding (the build's --fmad=false), in flyvis 1.2.0's order
// (network/dynamics.py, PPNeuronIGRSynapses; network.py, Network._next_state): its CPU
// scatter_add_ sums each node's inputs in edge order, which the rows keep (a stable sort of the
// edges by target: flycuda.vision.connectome). relu(NaN) is NaN, as torch's. A source outside
// [0, N) reads NaN and a row is read only within [0, E): corrupted maps are never a memory error.
// The reference is flycuda.reference.connectome.connectome_step.
#pragma once

#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kConnectomeThreads = 256;  // threads per block: 8 warps, 8 nodes of one chunk
constexpr int kConnectomeEyes = 8;       // eyes per lane
constexpr int kConnectomeChunk = 32 * kConnectomeEyes;  // eyes per warp (one node)
static_assert(kConnectomeEyes == 8, "connectome_step_kernel dispatches 1, 2, 4 or 8 eyes a lane");

struct ConnectomePlan {
  int64_t B = 0, N = 0, E = 0;   // batch (eyes), nodes, edges
  int64_t C = 1;                 // stimulus columns (input node n reads column n % C)
  int64_t input_nodes = 0;       // nodes [0, input_nodes) get the stimulus
  float dt = 0.0f;
  int64_t v_s0 = 0, v_s1 = 0;    // v [B, N]
  int64_t x_s0 = 0, x_s1 = 0;    // stimulus [B, C]
  int64_t out_s0 = 0, out_s1 = 0;  // out [B, N]
  FLYCUDA_HOST_DEVICE int64_t chunks() const { return (B + kConnectomeChunk - 1) / kConnectomeChunk; }
  FLYCUDA_HOST_DEVICE int64_t threads() const { return B > 0 ? chunks() * 32 * N : 0; }
};

FLYCUDA_HOST_DEVICE inline float connectome_relu(float x) {  // NaN stays NaN (torch's relu)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float y;  // one FMNMX.NAN (max.NaN: a NaN operand gives NaN; -0.0 gives +0.0, which adds as -0.0 does)
  asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(y) : "f"(x));
  return y;
#else
  return x < 0.0f ? 0.0f : x;
#endif
}

// Row n's edges within [0, E) (a corrupted rowptr is never a memory error).
FLYCUDA_HOST_DEVICE inline int64_t connectome_row_lo(const int32_t* rowptr, int64_t n) {
  return rowptr[n] < 0 ? 0 : rowptr[n];
}
FLYCUDA_HOST_DEVICE inline int64_t connectome_row_hi(const int32_t* rowptr, const ConnectomePlan& p, int64_t n) {
  return rowptr[n + 1] > p.E ? p.E : rowptr[n + 1];
}

// The input of node n of batch entry b, once the sum s of its synapses is known: the Euler step.
FLYCUDA_HOST_DEVICE inline float connectome_update(const float* v, const float* stimulus, const float* bias,
                                                  const float* tau, const ConnectomePlan& p, int64_t b, int64_t n,
                                                  float s) {
  // n < 2^31 and C < 2^31 (the checks): a 32-bit remainder
  const int64_t column = static_cast<int32_t>(n) % static_cast<int32_t>(p.C);
  const float x = n < p.input_nodes ? 0.0f + stimulus[b * p.x_s0 + column * p.x_s1] : 0.0f;
  const float vn = v[b * p.v_s0 + n * p.v_s1];
  const float a = ((-vn + bias[n]) + s) + x;
  const float t = tau[n];
  const float inv = 1.0f / ((t != t || t > p.dt) ? t : p.dt);  // torch.max(tau, dt): NaN propagates
  return vn + (inv * a) * p.dt;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel and its launch: nvcc and the emulator

// The sums of row [lo, hi) for a lane's first K eyes, in edge order: each term w * relu(v[b, j])
// added to its eye's sum from +0 (the CPU twin's sums, term for term). kUnit: eye stride 1 and every
// eye of the lane in [0, B), eye k at b0 + 32 k (immediate offsets from one address); else the eyes'
// offsets hoisted out of the row, eyes past B reading eye B - 1 (never written).
template <bool kUnit, int K>
__device__ __forceinline__ void connectome_sums(const float* __restrict__ v, const int32_t* __restrict__ src,
                                                const float* __restrict__ weight, const ConnectomePlan& p,
                                                int32_t b0, int32_t lo, int32_t hi, float (&s)[kConnectomeEyes]) {
  const int32_t N = static_cast<int32_t>(p.N);
  const uint32_t s1 = static_cast<uint32_t>(p.v_s1);
  uint32_t eye[K];  // the general path's offsets (every offset of v is below 2^31: the checks)
  if (!kUnit) {
    const int32_t last = static_cast<int32_t>(p.B) - 1;
FLYCUDA_UNROLL
    for (int k = 0; k < K; ++k) eye[k] = static_cast<uint32_t>(b0 + 32 * k < last ? b0 + 32 * k : last) *
                                         static_cast<uint32_t>(p.v_s0);
  }
  const float* __restrict__ base = kUnit ? v + b0 : v;
  for (int32_t e = lo; e < hi; ++e) {
    // A source outside [0, N) reads row 0 with a NaN weight: its terms are NaN, as the CPU twin's
    // (NaN times anything); no branch.
    const int32_t j = src[e];
    const bool ok = static_cast<uint32_t>(j) < static_cast<uint32_t>(N);
    const float w = ok ? weight[e] : NAN;
    const uint32_t row = ok ? static_cast<uint32_t>(j) * s1 : 0u;
    const float* __restrict__ r = base + row;  // kUnit: the lane's eyes at immediate offsets from here
FLYCUDA_UNROLL
    for (int k = 0; k < K; ++k) s[k] = s[k] + w * connectome_relu(kUnit ? r[32 * k] : base[row + eye[k]]);
  }
}

__global__ void connectome_step_kernel(const float* __restrict__ v, const float* __restrict__ stimulus,
                                       const int32_t* __restrict__ rowptr, const int32_t* __restrict__ src,
                                       const float* __restrict__ weight, const float* __restrict__ bias,
                                       const float* __restrict__ tau, float* __restrict__ out,
                                       const ConnectomePlan p) {
  // t < chunks * 32 * N < 2^31 and B < 2^31 - 256 (the checks): 32-bit indices.
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.threads()) return;
  const int32_t t32 = static_cast<int32_t>(t), N32 = static_cast<int32_t>(p.N);
  const int32_t warp = t32 >> 5, chunk = warp / N32, n = warp % N32;
  const int32_t b0 = chunk * kConnectomeChunk + (t32 & 31);
  if (b0 >= p.B) return;  // a lane with no eye
  const int32_t lo = static_cast<int32_t>(connectome_row_lo(rowptr, n));
  const int32_t hi = static_cast<int32_t>(connectome_row_hi(rowptr, p, n));
  float s[kConnectomeEyes];
FLYCUDA_UNROLL
  for (int k = 0; k < kConnectomeEyes; ++k) s[k] = 0.0f;
  // The chunk's eyes (warp-uniform): a whole chunk, else as few eyes a lane as cover its m eyes.
  const int32_t m = static_cast<int32_t>(p.B) - chunk * kConnectomeChunk;
  if (p.v_s0 == 1 && m >= kConnectomeChunk) {
    connectome_sums<true, 8>(v, src, weight, p, b0, lo, hi, s);
  } else if (m <= 32) {
    connectome_sums<false, 1>(v, src, weight, p, b0, lo, hi, s);
  } else if (m <= 64) {
    connectome_sums<false, 2>(v, src, weight, p, b0, lo, hi, s);
  } else if (m <= 128) {
    connectome_sums<false, 4>(v, src, weight, p, b0, lo, hi, s);
  } else {
    connectome_sums<false, 8>(v, src, weight, p, b0, lo, hi, s);
  }
FLYCUDA_UNROLL
  for (int k = 0; k < kConnectomeEyes; ++k) {  // eyes past the K summed are past B: never written
    const int32_t b = b0 + 32 * k;
    if (b < p.B) out[b * p.out_s0 + n * p.out_s1] = connectome_update(v, stimulus, bias, tau, p, b, n, s[k]);
  }
}

// The launch (platform.h, "launch templates"): a warp per (node, chunk of 256 eyes).
template <class Launcher>
void launch_connectome_step(Launcher&& launch, const float* v,  // [B, N], strided
                            const float* stimulus,              // [B, C], strided
                            const int32_t* rowptr,              // [N + 1]
                            const int32_t* src,                 // [E]
                            const float* weight,                // [E]
                            const float* bias,                  // [N]
                            const float* tau,                   // [N]
                            float* out,                         // [B, N], strided
                            const ConnectomePlan& p) {
  if (p.threads() <= 0) return;
  const unsigned int blocks = static_cast<unsigned int>((p.threads() + kConnectomeThreads - 1) / kConnectomeThreads);
  launch(connectome_step_kernel, dim3(blocks), dim3(kConnectomeThreads), 0, v, stimulus, rowptr, src, weight, bias,
         tau, out, p);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
