// flycuda: brain_step — argument checks, the launch plan and the CPU impl. What the op computes:
// csrc/kernels/brain_step.cuh. The CUDA kernels and the emulator run a thread per (brain, neuron);
// the CPU twin propagates a brain a task (plain adds: the same integer sums), then runs the same
// brain_neuron over chunks of neurons, its spikes logged in (brain, neuron) order.
#include "brain_step.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common.h"

namespace flycuda {
namespace {

constexpr const char* kOpName = "brain_step";

}  // namespace

kernels::BrainPlan check_brain_step(const BrainArgs& a) {
  const Tensor& v = a.v;
  CHECK_DTYPE(v, kDouble);
  FLYCUDA_CHECK(v.dim() == 2, "argument 'v' must be a 2-D tensor [B, N], got shape ", sizes_of(v));
  const int64_t B = v.size(0), N = v.size(1);
  expect(kOpName, v, "v", kDouble, {B, N}, v, "v");
  expect(kOpName, a.g, "g", kDouble, {B, N}, v, "v");
  expect(kOpName, a.last, "last", kInt, {B, N}, v, "v");
  expect(kOpName, a.acc, "acc", kInt, {B, N}, v, "v");
  FLYCUDA_CHECK_VALUE(a.delay >= 1 && a.delay < 4096, "argument 'delay' must be in [1, 4096) steps, got ", a.delay);
  FLYCUDA_CHECK_VALUE(a.refractory >= 0 && a.refractory < (int64_t{1} << 30),
                      "argument 'refractory' must be in [0, 2^30) steps, got ", a.refractory);
  expect(kOpName, a.ring, "ring", kByte, {a.delay + 1, B, N}, v, "v");
  expect(kOpName, a.log, "log", kLong, {-1}, v, "v");
  expect(kOpName, a.log_count, "log_count", kLong, {1}, v, "v");
  expect(kOpName, a.rate, "rate", kDouble, {B, N}, v, "v");
  expect(kOpName, a.silence, "silence", kByte, {B, N}, v, "v");
  expect(kOpName, a.seeds, "seeds", kLong, {B}, v, "v");
  expect(kOpName, a.step, "step", kLong, {1}, v, "v");
  expect(kOpName, a.rowptr, "rowptr", kInt, {N + 1}, v, "v");
  expect(kOpName, a.post, "post", kInt, {-1}, v, "v");
  const int64_t E = a.post.size(0);
  expect(kOpName, a.count, "count", kInt, {E}, v, "v");
  FLYCUDA_CHECK(B * N < (int64_t{1} << 31), "B * N = ", B, " * ", N, " must be < 2^31 (32-bit log entries)");
  FLYCUDA_CHECK(E <= INT32_MAX, "E = ", E, " must be < 2^31 (int32 synapse offsets)");
  FLYCUDA_CHECK_VALUE(a.consts.size() == static_cast<size_t>(kernels::kBrainConsts), "argument 'consts' must hold ",
                      kernels::kBrainConsts, " numbers, got ", a.consts.size());
  for (double c : a.consts) FLYCUDA_CHECK_VALUE(std::isfinite(c), "argument 'consts' must be finite, got ", c);
  FLYCUDA_CHECK_VALUE(a.consts[9] > 0.0, "argument 'consts' must end with dt > 0, got ", a.consts[9]);
  check_disjoint(kOpName,
                          {{"rate", &a.rate}, {"silence", &a.silence}, {"seeds", &a.seeds}, {"step", &a.step},
                           {"rowptr", &a.rowptr}, {"post", &a.post}, {"count", &a.count}},
                          {{"v", &a.v}, {"g", &a.g}, {"last", &a.last}, {"acc", &a.acc}, {"ring", &a.ring},
                           {"log", &a.log}, {"log_count", &a.log_count}});
  // The connectivity's values: checked by the wrapper (flycuda/ops/brain.py) once per tensor version on
  // every device, not here on every call: at FlyWire's scale (15 M synapses, a step every 0.1 ms) the scan
  // would cost more than the step (measured: 0.9 ms a step at 10,000 neurons and 1 M synapses). The
  // kernels are safe against any values: a target out of range is skipped, a row read within [0, E).
  kernels::BrainPlan p;
  p.B = B, p.N = N, p.E = E, p.delay = a.delay, p.R = a.delay + 1, p.refractory = a.refractory;
  p.log_capacity = a.log.size(0);
  const std::vector<double>& c = a.consts;
  p.v_rest = c[0], p.v_reset = c[1], p.v_th = c[2], p.decay_g = c[3], p.g_to_v = c[4], p.v_const = c[5];
  p.decay_v = c[6], p.w_syn = c[7], p.w_poi = c[8], p.dt = c[9];
  return p;
}

namespace {

// Brain b's synaptic input of step n: the flags of step n - delay (cleared), each unsilenced spike's row
// added to acc (plain adds: the same integer sums as the kernel's atomics).
void brain_propagate(uint8_t* ring, int32_t* acc, const uint8_t* silence, const int32_t* rowptr, const int32_t* post,
                     const int32_t* count, const kernels::BrainPlan& p, int64_t n, int64_t b) {
  const int64_t base = b * p.N;
  uint8_t* flags = ring + p.slot(n - p.delay) * p.threads() + base;
  for (int64_t j = 0; j < p.N; ++j) {
    if (flags[j] == 0) continue;
    flags[j] = 0;
    if (silence[base + j] != 0) continue;
    const int32_t lo = std::max(rowptr[j], 0), hi = static_cast<int32_t>(std::min<int64_t>(rowptr[j + 1], p.E));
    for (int32_t e = lo; e < hi; ++e) {
      if (post[e] >= 0 && post[e] < p.N) acc[base + post[e]] += count[e];
    }
  }
}

// Neurons [begin, end) of the batch (idx = b N + i) at step n: brain_neuron each, their spikes flagged
// and, as log entries, appended to `spikes` in idx order.
void brain_neurons(double* v, double* g, int32_t* last, int32_t* acc, uint8_t* ring, const double* rate,
                   const int64_t* seeds, const kernels::BrainPlan& p, int64_t n, int64_t begin, int64_t end,
                   std::vector<int64_t>& spikes) {
  uint8_t* now = ring + p.slot(n) * p.threads();
  for (int64_t idx = begin; idx < end; ++idx) {
    const int64_t b = idx / p.N;
    if (kernels::brain_neuron(v, g, last, acc, rate, seeds, p, n, b, idx - b * p.N)) {
      now[idx] = 1;
      spikes.push_back(kernels::brain_log_entry(n, idx));
    }
  }
}

void brain_step_cpu(Tensor& v, Tensor& g, Tensor& last, Tensor& acc, Tensor& ring, Tensor& log, Tensor& log_count,
                    const Tensor& rate, const Tensor& silence, const Tensor& seeds, const Tensor& step,
                    const Tensor& rowptr, const Tensor& post, const Tensor& count, const std::vector<double>& consts,
                    int64_t refractory, int64_t delay) {  // shapes: BrainArgs
  const BrainArgs a{v, g, last, acc, ring, log, log_count, rate, silence, seeds, step, rowptr, post, count, consts,
                    refractory, delay};
  const kernels::BrainPlan p = check_brain_step(a);
  if (p.threads() == 0) return;
  const int64_t n = dptr<int64_t>(step)[0];
  double *pv = dptr<double>(v), *pg = dptr<double>(g);
  int32_t *pl = dptr<int32_t>(last), *pa = dptr<int32_t>(acc);
  uint8_t* pr = dptr<uint8_t>(ring);
  const double* prate = dptr<double>(rate);
  const uint8_t* ps = dptr<uint8_t>(silence);
  const int64_t* pseeds = dptr<int64_t>(seeds);
  const int32_t *prow = dptr<int32_t>(rowptr), *ppost = dptr<int32_t>(post), *pcount = dptr<int32_t>(count);
  torch::stable::parallel_for(0, p.B, 1, [&](int64_t begin, int64_t end) {  // a brain a task
    for (int64_t b = begin; b < end; ++b) brain_propagate(pr, pa, ps, prow, ppost, pcount, p, n, b);
  });
  // The neurons in fixed chunks (one brain or many: both cores busy), each chunk's spikes in order.
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (p.threads() + kChunk - 1) / kChunk;
  std::vector<std::vector<int64_t>> spikes(static_cast<size_t>(chunks));
  torch::stable::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      brain_neurons(pv, pg, pl, pa, pr, prate, pseeds, p, n, c * kChunk, std::min(p.threads(), (c + 1) * kChunk),
                    spikes[static_cast<size_t>(c)]);
    }
  });
  int64_t* plog = dptr<int64_t>(log);
  int64_t& k = dptr<int64_t>(log_count)[0];
  for (const auto& brain : spikes) {
    for (int64_t entry : brain) {
      if (k >= 0 && k < p.log_capacity) plog[k] = entry;
      ++k;
    }
  }
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("brain_step", TORCH_BOX(&brain_step_cpu)); }

}  // namespace flycuda
