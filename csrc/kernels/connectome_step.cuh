// flycuda: connectome_step — one Euler step of flyvis's connectome-constrained network (issue 40)
// for a batch of eyes, and the launch plan. nvcc (csrc/cuda/connectome_step.cu), the host compiler
// (the CPU twin, csrc/connectome_step.cpp) and the emulator compile this one file. No ATen.
//
// One thread per (b, n) in chunks of 32 eyes: warp w takes node n = w % N of chunk c = w / N, lane
// l eye b = 32 c + l (lanes past B idle). A warp reads one row of the network once (every lane the
// same edge: a broadcast) and, with the voltages node-major, its 32 eyes' sources side by side;
// the warps of a block take adjacent nodes of one chunk, which share most of their sources (L1),
// and a chunk's voltages (32 x N) stay in L2 while the grid sweeps its nodes:
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

constexpr int kConnectomeThreads = 256;  // (b, n) pairs per block

struct ConnectomePlan {
  int64_t B = 0, N = 0, E = 0;   // batch (eyes), nodes, edges
  int64_t C = 1;                 // stimulus columns (input node n reads column n % C)
  int64_t input_nodes = 0;       // nodes [0, input_nodes) get the stimulus
  float dt = 0.0f;
  int64_t v_s0 = 0, v_s1 = 0;    // v [B, N]
  int64_t x_s0 = 0, x_s1 = 0;    // stimulus [B, C]
  int64_t out_s0 = 0, out_s1 = 0;  // out [B, N]
  FLYCUDA_HOST_DEVICE int64_t chunks() const { return (B + 31) / 32; }  // of 32 eyes
  FLYCUDA_HOST_DEVICE int64_t threads() const { return B > 0 ? chunks() * 32 * N : 0; }
};

FLYCUDA_HOST_DEVICE inline float connectome_relu(float x) { return x < 0.0f ? 0.0f : x; }  // NaN stays NaN

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

// Node n of batch entry b: its synapses summed in row order, then the Euler step (the kernel's
// thread; the CPU twin runs the same sums for a range of b at once, term for term).
FLYCUDA_HOST_DEVICE inline void connectome_node(const float* v, const float* stimulus, const int32_t* rowptr,
                                                const int32_t* src, const float* weight, const float* bias,
                                                const float* tau, float* out, const ConnectomePlan& p, int64_t b,
                                                int64_t n) {
  const float* vb = v + b * p.v_s0;
  const int64_t hi = connectome_row_hi(rowptr, p, n);
  float s = 0.0f;
  for (int64_t e = connectome_row_lo(rowptr, n); e < hi; ++e) {
    const int64_t j = src[e];
    const float pre = (j >= 0 && j < p.N) ? connectome_relu(vb[j * p.v_s1]) : NAN;
    s = s + weight[e] * pre;
  }
  out[b * p.out_s0 + n * p.out_s1] = connectome_update(v, stimulus, bias, tau, p, b, n, s);
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel and its launch: nvcc and the emulator

__global__ void connectome_step_kernel(const float* __restrict__ v, const float* __restrict__ stimulus,
                                       const int32_t* __restrict__ rowptr, const int32_t* __restrict__ src,
                                       const float* __restrict__ weight, const float* __restrict__ bias,
                                       const float* __restrict__ tau, float* __restrict__ out,
                                       const ConnectomePlan p) {
  // t < chunks * 32 * N < 2^31 (the checks): 32-bit division.
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.threads()) return;
  const int32_t t32 = static_cast<int32_t>(t), N32 = static_cast<int32_t>(p.N);
  const int32_t warp = t32 >> 5, b = ((warp / N32) << 5) | (t32 & 31);
  if (b >= p.B) return;
  connectome_node(v, stimulus, rowptr, src, weight, bias, tau, out, p, b, warp % N32);
}

// The launch (platform.h, "launch templates"): one thread per (b, n), B padded to whole chunks.
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
