// flycuda: odor_plume — a replayed odor plume at every world's sensors (issue 41), and the launch
// plan. nvcc (csrc/cuda/odor_plume.cu), the host compiler (the CPU twin, csrc/odor_plume.cpp) and
// the emulator compile this one file. No ATen.
//
// One thread per (world, sensor), sensors fastest:
//   out[w, s] = float32( lerp_t( P(t0), P(t1), wt ) )
// where P(t) interpolates frame t of the grid [T, X, Y(, Z)] (contiguous; node (i, j, l) at
// origin + (i, j, l) * spacing) at the sensor's x, y (, z): nested lerps a + w (b - a) in float64,
// x first, then y, then z. Along an axis of n nodes the coordinate u = (p - origin) / spacing is
// inside when 0 <= u <= n - 1 (i0 = min(floor(u), n - 2), i1 = min(i0 + 1, n - 1)); a sensor
// outside the grid, or a non-finite time, reads NaN. Frame f = time[w] * fps: clamped to
// [0, T - 1], or looped (t0 = fmod(floor(f), T), made >= 0; t1 = t0 + 1 mod T). The reference is
// flycuda.reference.plume.odor_plume, the same operations in the same order.
#pragma once

#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kPlumeThreads = 128;  // (world, sensor) pairs per block
constexpr int kPlumeClamp = 0, kPlumeLoop = 1;  // PlumePlan::time_mode (TIME_MODES' order)
constexpr int kPlumeMaxDims = 3;

struct PlumePlan {
  int64_t W = 0, s = 0;                  // worlds, sensors
  int64_t T = 1;                         // frames
  int dims = 2;                          // 2: [T, X, Y]; 3: [T, X, Y, Z]
  int64_t n[kPlumeMaxDims] = {1, 1, 1};  // nodes per spatial axis
  int64_t stride[kPlumeMaxDims + 1] = {0, 0, 0, 0};  // the grid's element strides: t, x, y, z
  double origin[kPlumeMaxDims] = {0, 0, 0}, spacing[kPlumeMaxDims] = {1, 1, 1};
  double fps = 1.0;
  int time_mode = kPlumeClamp;
  int64_t sen_s0 = 0, sen_s1 = 0, sen_s2 = 0;  // sensors [W, s, 3]
  int64_t time_s0 = 0;                         // time [W]
  int64_t out_s0 = 0, out_s1 = 0;              // out [W, s]
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * s; }
};

FLYCUDA_HOST_DEVICE inline double plume_lerp(double a, double b, double w) { return a + w * (b - a); }

// Frame t of the grid at nodes i[] (lower) and i + 1 (upper) with weights w[], x then y then z.
FLYCUDA_HOST_DEVICE inline double plume_frame(const float* grid, const PlumePlan& p, int64_t t, const int64_t* i0,
                                              const int64_t* i1, const double* w) {
  const float* g = grid + t * p.stride[0];
  const auto at = [&](int64_t x, int64_t y, int64_t z) {
    return static_cast<double>(g[x * p.stride[1] + y * p.stride[2] + z * p.stride[3]]);
  };
  const int64_t z0 = p.dims == 3 ? i0[2] : 0, z1 = p.dims == 3 ? i1[2] : 0;
  const double v00 = plume_lerp(at(i0[0], i0[1], z0), at(i1[0], i0[1], z0), w[0]);
  const double v10 = plume_lerp(at(i0[0], i1[1], z0), at(i1[0], i1[1], z0), w[0]);
  const double lo = plume_lerp(v00, v10, w[1]);
  if (p.dims != 3) return lo;
  const double v01 = plume_lerp(at(i0[0], i0[1], z1), at(i1[0], i0[1], z1), w[0]);
  const double v11 = plume_lerp(at(i0[0], i1[1], z1), at(i1[0], i1[1], z1), w[0]);
  return plume_lerp(lo, plume_lerp(v01, v11, w[1]), w[2]);
}

// Element (w, ss): the plume at world w's sensor ss at its time.
FLYCUDA_HOST_DEVICE inline void plume_element(const float* grid, const float* sensors, const float* time, float* out,
                                              const PlumePlan& p, int64_t w, int64_t ss) {
  const float* sen = sensors + w * p.sen_s0 + ss * p.sen_s1;
  int64_t i0[kPlumeMaxDims] = {0, 0, 0}, i1[kPlumeMaxDims] = {0, 0, 0};
  double wt[kPlumeMaxDims] = {0, 0, 0};
  bool inside = true;
  // A fixed trip count (the arrays stay in registers: no stack frame, tests/csrc/test_ptxas.py).
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int d = 0; d < kPlumeMaxDims; ++d) {
    if (d >= p.dims) continue;
    const double u = (static_cast<double>(sen[d * p.sen_s2]) - p.origin[d]) / p.spacing[d] + 0.0;  // -0 -> +0
    const int64_t n = p.n[d];
    inside = inside && u >= 0.0 && u <= static_cast<double>(n - 1);  // false outside, or for NaN
    const double lo = floor(inside ? u : 0.0);
    const double top = static_cast<double>(n >= 2 ? n - 2 : 0);
    const double f0 = lo < top ? lo : top;
    i0[d] = static_cast<int64_t>(f0);
    i1[d] = i0[d] + 1 < n ? i0[d] + 1 : n - 1;
    wt[d] = u - f0;
  }
  double f = static_cast<double>(time[w * p.time_s0]) * p.fps + 0.0;  // -0 -> +0
  float* o = out + w * p.out_s0 + ss * p.out_s1;
  if (!inside || !(f - f == 0.0)) {  // outside the grid, or a non-finite time
    *o = NAN;
    return;
  }
  const double T = static_cast<double>(p.T);
  double t0, t1, w_t;
  if (p.time_mode == kPlumeClamp) {
    f = f < 0.0 ? 0.0 : (f > T - 1.0 ? T - 1.0 : f);
    const double lo = floor(f), top = p.T >= 2 ? T - 2.0 : 0.0;
    t0 = lo < top ? lo : top;
    w_t = f - t0;
    t1 = t0 + 1.0 < T ? t0 + 1.0 : T - 1.0;
  } else {
    const double lo = floor(f);
    w_t = f - lo;
    t0 = fmod(lo, T);  // exact for a whole lo (a huge f is one): in (-T, T)
    if (t0 < 0.0) t0 += T;
    t0 = t0 < T - 1.0 ? t0 : T - 1.0;  // a guard: the frame read stays in the grid
    t1 = t0 + 1.0 >= T ? 0.0 : t0 + 1.0;
  }
  const double a = plume_frame(grid, p, static_cast<int64_t>(t0), i0, i1, wt);
  const double b = plume_frame(grid, p, static_cast<int64_t>(t1), i0, i1, wt);
  *o = static_cast<float>(plume_lerp(a, b, w_t));
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel and its launch: nvcc and the emulator

__global__ void odor_plume_kernel(const float* __restrict__ grid, const float* __restrict__ sensors,
                                  const float* __restrict__ time, float* __restrict__ out, const PlumePlan p) {
  // t = w * s + ss < 2^31 (the checks): 32-bit divisions.
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.threads()) return;
  const int32_t t32 = static_cast<int32_t>(t), s32 = static_cast<int32_t>(p.s);
  plume_element(grid, sensors, time, out, p, t32 / s32, t32 % s32);
}

// The launch (platform.h, "launch templates"): one thread per (world, sensor).
template <class Launcher>
void launch_odor_plume(Launcher&& launch, const float* grid,  // [T, X, Y(, Z)]
                       const float* sensors,                  // [W, s, 3], strided
                       const float* time,                     // [W], strided
                       float* out,                            // [W, s], strided
                       const PlumePlan& p) {
  if (p.threads() <= 0) return;
  const unsigned int blocks = static_cast<unsigned int>((p.threads() + kPlumeThreads - 1) / kPlumeThreads);
  launch(odor_plume_kernel, dim3(blocks), dim3(kPlumeThreads), 0, grid, sensors, time, out, p);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
