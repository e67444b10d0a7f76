// flycuda: brain_step — one 0.1 ms step of the FlyWire whole-brain leaky integrate-and-fire model
// (Shiu et al. 2024, philshiu/Drosophila_brain_model model.py) for B brains over one shared
// connectivity, and its launch plan. nvcc (csrc/cuda/brain_step.cu), the host compiler (the CPU
// twin's per-neuron helpers, csrc/brain_step.cpp) and the emulator compile this one file. No ATen.
//
// Brian2's schedule, one step n (t = n dt), for brain b and neuron i (idx = b N + i):
//   1. groups:     nr = n - last >= ref (ref = 0 for a neuron with Poisson input, else the
//                  refractory steps); if nr: g' = decay_g g, v' = v_const + ((g_to_v g) + (decay_v v))
//                  (Brian2's exact "linear" update, its constants computed as Brian2 computes them:
//                  flycuda.brain.model; every operation one float64 rounding, no FMA);
//   2. thresholds: spike = nr and v > v_th; last = n;
//   3. synapses:   if nr: g += acc w_syn, acc the signed synapse counts of the spikes of step
//                  n - delay (brain_propagate_kernel, launched first: integer sums, so the order of
//                  the atomics never changes a bit); v += w_poi for a Poisson event (u < rate dt, u
//                  uniform from a counter-based stream of (seed[b], n, i)). A refractory neuron's
//                  inputs are dropped, as Brian2's synaptic code drops them (v and g are "unless
//                  refractory": it masks the targets with not_refractory);
//   4. resets:     spike: v = v_reset, g = 0.
// Spikes of step n are flags in ring slot n % R (R = delay + 1), read and cleared by the propagation
// of step n + delay, and appended to the log as (n << 32) | idx (order: the atomics'; sort to compare).
// A neuron at rest (nr, v == v_rest, g == 0, no input, no event) keeps its state bit for bit
// (v_rest is a fixed point of the update in float64: flycuda.brain.model checks it), so it is skipped:
// reads only, no write. The reference: flycuda.reference.brain.brain_step.
#pragma once

#include "platform.h"

#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kBrainThreads = 256;  // threads per block, both kernels: a thread per (brain, neuron)
constexpr int kBrainConsts = 10;    // BrainPlan's doubles, in the schema's `consts` order

struct BrainPlan {
  int64_t B = 0, N = 0, E = 0;  // brains, neurons, synapses (rows of the presynaptic CSR)
  int64_t R = 2;                // ring slots: delay + 1
  int64_t delay = 1;            // synaptic delay (steps, >= 1)
  int64_t refractory = 0;       // refractory steps of a neuron without Poisson input
  int64_t log_capacity = 0;     // spike log entries
  double v_rest = 0, v_reset = 0, v_th = 0;          // V
  double decay_g = 0, g_to_v = 0, v_const = 0, decay_v = 0;  // the linear update's constants
  double w_syn = 0, w_poi = 0;                       // V per synapse, V per Poisson event
  double dt = 0;                                     // s
  FLYCUDA_HOST_DEVICE int64_t threads() const { return B * N; }
  FLYCUDA_HOST_DEVICE int64_t slot(int64_t step) const { return ((step % R) + R) % R; }
};

// splitmix64's finalizer (a bijection of 64-bit words).
FLYCUDA_HOST_DEVICE inline uint64_t brain_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Neuron i's uniform draw in [0, 1) at step n of the stream `seed`: counter-based (no state), so a
// brain's trial is the same on every device and from any step.
FLYCUDA_HOST_DEVICE inline double brain_uniform(uint64_t seed, int64_t step, int64_t neuron) {
  const uint64_t key = (static_cast<uint64_t>(step) << 32) | static_cast<uint32_t>(neuron);
  const uint64_t x = brain_mix(brain_mix(seed) + (key + 1) * 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

// Step 1-4 above for neuron idx = b N + i; the synaptic input `in` already summed. Returns whether
// it spiked; writes only what changed (a neuron at rest writes nothing).
FLYCUDA_HOST_DEVICE inline bool brain_neuron(double* v, double* g, int32_t* last, int32_t* acc, const double* rate,
                                             const int64_t* seeds, const BrainPlan& p, int64_t step, int64_t b,
                                             int64_t i) {
  const int64_t idx = b * p.N + i;
  const double r = rate[idx];
  const int32_t in = acc[idx];
  double vi = v[idx], gi = g[idx];
  const bool nr = step - static_cast<int64_t>(last[idx]) >= (r > 0.0 ? 0 : p.refractory);
  const bool event = r > 0.0 && brain_uniform(static_cast<uint64_t>(seeds[b]), step, i) < r * p.dt;
  if (nr && gi == 0.0 && vi == p.v_rest && in == 0 && !event) return false;  // at rest: stays so
  if (nr) {
    const double g1 = p.decay_g * gi;
    vi = p.v_const + ((p.g_to_v * gi) + (p.decay_v * vi));
    gi = g1;
  }
  const bool spike = nr && vi > p.v_th;
  // Brian2 applies an input to an "(unless refractory)" variable only where not_refractory holds
  // (its synaptic code masks the targets); a refractory neuron's inputs are dropped.
  if (in != 0) {
    if (nr) gi = gi + static_cast<double>(in) * p.w_syn;
    acc[idx] = 0;
  }
  if (event && nr) vi = vi + p.w_poi;
  if (spike) {
    vi = p.v_reset;
    gi = 0.0;
    last[idx] = static_cast<int32_t>(step);
  }
  v[idx] = vi;
  g[idx] = gi;
  return spike;
}

// The log entry of a spike of neuron idx at step n.
FLYCUDA_HOST_DEVICE inline int64_t brain_log_entry(int64_t step, int64_t idx) {
  return static_cast<int64_t>((static_cast<uint64_t>(step) << 32) | static_cast<uint32_t>(idx));
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernels and their launch: nvcc and the emulator

// Step n's synaptic input: a block per kBrainThreads (brain, presynaptic neuron j) pairs. Each thread
// reads its flag of step n - delay and clears it; the block lists its spikes that are not silenced in
// shared memory (a shared atomic: the list's order is the atomics', which no sum can show); then the
// whole block walks each listed row together, a synapse a thread, coalesced, adding the counts to their
// targets' acc (int32 atomics: the same sum in any order). A row of thousands of synapses (a hub) is
// thousands / kBrainThreads steps of the block, not thousands of one thread's. A target outside [0, N)
// is skipped; a row is read within [0, E).
__global__ void brain_propagate_kernel(uint8_t* __restrict__ ring, int32_t* __restrict__ acc,
                                       const uint8_t* __restrict__ silence, const int64_t* __restrict__ step,
                                       const int32_t* __restrict__ rowptr, const int32_t* __restrict__ post,
                                       const int32_t* __restrict__ count, const BrainPlan p) {
  FLYCUDA_SHARED(int32_t, spiked, kBrainThreads + 1);  // [0]: how many; then the block's spikes (flat t)
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x;
  const int64_t t = first + threadIdx.x;
  if (threadIdx.x == 0) spiked[0] = 0;
  __syncthreads();
  if (t < p.threads()) {
    uint8_t* flag = ring + p.slot(step[0] - p.delay) * p.threads() + t;
    if (*flag != 0) {
      *flag = 0;
      if (silence[t] == 0) spiked[1 + atomicAdd(&spiked[0], 1)] = static_cast<int32_t>(t - first);
    }
  }
  __syncthreads();
  const int32_t rows = spiked[0], N = static_cast<int32_t>(p.N);
  for (int32_t r = 0; r < rows; ++r) {  // block-uniform
    const int64_t src = first + spiked[1 + r];
    const int64_t b = src / p.N, j = src - b * p.N;
    int32_t* target = acc + b * p.N;
    const int32_t lo = rowptr[j] < 0 ? 0 : rowptr[j];
    const int32_t hi = rowptr[j + 1] > p.E ? static_cast<int32_t>(p.E) : rowptr[j + 1];
    for (int32_t e = lo + static_cast<int32_t>(threadIdx.x); e < hi; e += static_cast<int32_t>(blockDim.x)) {
      const int32_t k = post[e], c = count[e];  // both loads issued before the branch (e is within [0, E))
      if (static_cast<uint32_t>(k) < static_cast<uint32_t>(N)) atomicAdd(target + k, c);
    }
  }
}

// Step n's neurons: a thread per (brain, neuron); a spike sets its ring flag and takes a log entry
// (one atomic; entries past the capacity are counted, not written).
__global__ void brain_neurons_kernel(double* __restrict__ v, double* __restrict__ g, int32_t* __restrict__ last,
                                     int32_t* __restrict__ acc, uint8_t* __restrict__ ring,
                                     int64_t* __restrict__ log, unsigned long long* __restrict__ log_count,
                                     const double* __restrict__ rate, const int64_t* __restrict__ seeds,
                                     const int64_t* __restrict__ step, const BrainPlan p) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.threads()) return;
  const int64_t n = step[0];
  const int64_t b = t / p.N, i = t - b * p.N;
  if (!brain_neuron(v, g, last, acc, rate, seeds, p, n, b, i)) return;
  ring[p.slot(n) * p.threads() + t] = 1;
  const unsigned long long k = atomicAdd(log_count, 1ULL);
  if (k < static_cast<unsigned long long>(p.log_capacity)) log[k] = brain_log_entry(n, t);
}

// The launch (platform.h, "launch templates"): the propagation, then the neurons, on one stream.
template <class Launcher>
void launch_brain_step(Launcher&& launch, double* v, double* g, int32_t* last, int32_t* acc, uint8_t* ring,
                       int64_t* log, unsigned long long* log_count, const double* rate, const uint8_t* silence,
                       const int64_t* seeds, const int64_t* step, const int32_t* rowptr, const int32_t* post,
                       const int32_t* count, const BrainPlan& p) {
  if (p.threads() <= 0) return;
  const unsigned int blocks = static_cast<unsigned int>((p.threads() + kBrainThreads - 1) / kBrainThreads);
  launch(brain_propagate_kernel, dim3(blocks), dim3(kBrainThreads), 0, ring, acc, silence, step, rowptr, post, count,
         p);
  launch(brain_neurons_kernel, dim3(blocks), dim3(kBrainThreads), 0, v, g, last, acc, ring, log, log_count, rate,
         seeds, step, p);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
