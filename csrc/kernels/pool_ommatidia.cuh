// flycuda: pool_ommatidia — the device code and its launch plan, compiled by
// nvcc (cuda/pool_ommatidia.cu), by the host compiler for the CPU twin
// (pool_ommatidia.cpp: PoolPlan and pool_one, the same kernel body) and on the
// emulated grid (emu/).
//
// FlyGym's compound eye (flygym/vision/retina.py, Retina._pool_fisheye_image):
// for one eye image, ommatidium o of type t (0 yellow, 1 pale) reads RGB channel
// t + 1 of every fisheye-corrected pixel of its footprint and
//
//   vals[o, t] = sum over its pixels, in raster order, of  float64(u8) / n_o
//   readout    = float32(vals / 255)          (vals[o, 1 - t] = 0)
//
// with n_o the footprint's size in FlyGym's id map (out-of-bounds fisheye pixels
// count in n_o but add nothing). Here the footprint is a CSR map shared by every
// image (flycuda/vision/retina.py builds it):
//
//   pixels   uint8 [S, E, P, 3]: the colors of the P raw pixels the map reads
//   readouts[s, e, o, column[o]]     = float32(acc / 255.0),
//   readouts[s, e, o, 1 - column[o]] = 0,
//   acc = 0.0; for j in [ptr[o], ptr[o+1]): acc += float64(pixels[s, e, omm_pixels[j],
//         channel[o]]) / float64(count[o])
//
// in float64, in the map's order: FlyGym's operations in FlyGym's order, so the
// float64 sum is FlyGym's bit for bit and the one rounding to float32 is
// get_ommatidia_readouts' np.array(..., dtype=np.float32). One thread per
// (image s * E + e, ommatidium o), o fastest (a warp pools neighbouring ommatidia
// of one image: its pixel reads stay in one image's cache lines). 32-bit thread
// index (the host checks S * E * O < 2^31); an image's pixels start at a 64-bit
// offset, P * 3 < 2^31 inside it.
#pragma once

#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kPoolThreads = 128;

// The launch plan and memory layout of one pool_ommatidia launch, built once on
// the host (pool_ommatidia.cpp: check_pool_ommatidia) for the CPU twin, the
// CUDA launcher and the emulator alike. Strides in elements; pixels and the map
// are contiguous.
struct PoolPlan {
  int64_t S = 0, E = 0;   // worlds (or selected worlds), eyes
  int64_t P = 0;          // raw pixels listed per image
  int64_t O = 0;          // ommatidia per eye
  int64_t nnz = 0;        // map entries (omm_pixels.size(0))
  int64_t out_s0 = 0, out_s1 = 0, out_s2 = 0, out_s3 = 0;  // readouts [S, E, O, 2]
  FLYCUDA_HOST_DEVICE int64_t threads() const { return S * E * O; }
  FLYCUDA_HOST_DEVICE int64_t blocks() const { return (threads() + kPoolThreads - 1) / kPoolThreads; }
};

// The map arrays (int32, contiguous): CSR ommatidium -> entries, and per ommatidium
// its RGB channel, its output column and its divisor.
struct PoolMap {
  const int32_t* __restrict__ ptr;      // [O + 1]
  const int32_t* __restrict__ pixels;   // [nnz], indices into the P listed pixels
  const int32_t* __restrict__ channel;  // [O], 0..2
  const int32_t* __restrict__ column;   // [O], 0..1
  const int32_t* __restrict__ count;    // [O], >= 1
};

// float64(x) / n correctly rounded, for x in [0, 255] and 1 <= n < 2^31, given
// inv = 1.0 / n (correctly rounded). The host divides. The device path (nvcc, the
// emulator) takes one Markstein correction instead of a division per term: 8
// registers fewer (ptxas), and the same bits. Proof: with z = x / n,
// q = RN(x * inv) lies within 1.5 ulp(z) of z, so r = x - n * q is exact (a multiple
// of ulp(q) below 2^53 of them) and q + r * inv = z + (z - q) * d with
// n * inv = 1 + d, |d| <= 2^-53: within 1.5 * 2^-53 ulp(z) of z. A rounding
// boundary (a midpoint) lies at least ulp(z) / (2n) from z (x and n * m are
// multiples of ulp(z) / 2; z itself is never a midpoint: x has 8 bits), which is
// farther for n < 2^51, so RN(q + r * inv) = RN(z). tests/csrc/test_emu.py checks every
// x against x / n for n in 1..65536 and a sweep of larger n.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT double exact_quotient(double x, double n, double inv) {
#if defined(FLYCUDA_DEVICE_PATH)
  const double q = x * inv;
  return fma(fma(-q, n, x), inv, q);
#else
  (void)inv;
  return x / n;
#endif
}

// The kernel body: readout of ommatidium o in image `image` (= s * E + e). Map
// values that escaped the host's checks (written during a capture) are clamped or
// skipped, never read or written out of bounds.
FLYCUDA_HOST_DEVICE inline void pool_one(const PoolPlan& p, const uint8_t* __restrict__ pixels, const PoolMap& m,
                                         float* __restrict__ out, int64_t image, int32_t o) {
  const uint8_t* img = pixels + image * (p.P * 3);
  const int32_t c = m.channel[o];
  const int32_t nnz = static_cast<int32_t>(p.nnz), P = static_cast<int32_t>(p.P);
  int32_t b = m.ptr[o], e = m.ptr[o + 1];
  b = b < 0 ? 0 : (b > nnz ? nnz : b);
  e = e < b ? b : (e > nnz ? nnz : e);
  if (c < 0 || c > 2) e = b;
  const double n = static_cast<double>(m.count[o]);
  const double inv = 1.0 / n;
  double acc = 0.0;
  for (int32_t j = b; j < e; ++j) {
    const int32_t q = m.pixels[j];
    if (q >= 0 && q < P) acc += exact_quotient(static_cast<double>(img[q * 3 + c]), n, inv);
  }
  const int32_t k = m.column[o];
  if (k != 0 && k != 1) return;
  const int64_t s = image / p.E;
  float* dst = out + s * p.out_s0 + (image - s * p.E) * p.out_s1 + o * p.out_s2;
  dst[k * p.out_s3] = static_cast<float>(acc / 255.0);
  dst[(1 - k) * p.out_s3] = 0.0f;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel itself: nvcc and the emulator
__global__ void pool_ommatidia_kernel(const uint8_t* __restrict__ pixels,  // [S, E, P, 3]
                                      const PoolMap m,                     // the map (see PoolMap)
                                      float* __restrict__ out,             // [S, E, O, 2]
                                      const PoolPlan p) {
  // Compared unsigned, then narrowed (as record_kernel): threads() <= INT32_MAX on the host.
  const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= static_cast<unsigned int>(p.threads())) return;
  const int idx = static_cast<int>(t);
  const int O = static_cast<int>(p.O);
  const int image = idx / O;
  pool_one(p, pixels, m, out, image, idx - image * O);
}

// The launch (platform.h, "launch templates"): one thread per (image, ommatidium).
template <class Launcher>
void launch_pool_ommatidia(Launcher&& launch,
                           const uint8_t* pixels,  // [S, E, P, 3]
                           const PoolMap& m,       // the map (see PoolMap)
                           float* out,             // [S, E, O, 2]
                           const PoolPlan& p) {
  if (p.threads() == 0) return;
  launch(pool_ommatidia_kernel, dim3(static_cast<unsigned int>(p.blocks())), dim3(kPoolThreads), 0, pixels, m, out,
         p);
}
#endif

}  // namespace kernels
}  // namespace flycuda
