// flycuda: odor_intensity — every world's odor at its sensors (issue 41), and the launch plan.
// nvcc (csrc/cuda/odor_intensity.cu), the host compiler (the CPU twin, csrc/odor_intensity.cpp)
// and the emulator compile this one file. No ATen.
//
// One thread per output element (w, k, s), sensors fastest (the CPU twin: one world per iteration):
//   out[w, k, s] = float32( sum_n peaks[w, n, k] * f(sensors[w, s] - sources[w, n]) )
// in float64, the sources added in order (FlyGym 1.x's get_olfaction sums them so), with
//   power:               f(r) = |r| ** -exponent        (the full 3-D distance; 1.x's default,
//                                                          exponent 2; a sensor on a source: inf;
//                                                          1 / (d d) for exponent 2 and 1 / d for 1, as
//                                                          torch's pow computes them, pow otherwise)
//   advection_diffusion: f(r) = exp(log_c0 + (r.u) / (2 D) + log(k0e(kappa |r|)) - kappa |r|)
//                        in the floor plane (r and the wind u in x and y), kappa =
//                        sqrt(|u|^2 / (4 D^2) + decay / D): NeLy-EPFL/cobar-2026's steady plume
//                        (src/miniproject/arena/banana.py, compute_log_concentration), in its log
//                        form, log_c0 = log(1 / (2 pi D)).
// k0e is Cephes' (scaled K0: exp(x) K0(x)), the Chebyshev series torch's
// special.scaled_modified_bessel_k0 evaluates too (ATen/native/Math.h), so the reference
// (flycuda.reference.odor) and the kernel compute the same series.
// Every input is read through its strides (a stride 0 broadcasts: one set of sources, or of
// peaks, for every world); the reference is flycuda.reference.odor.odor_intensity.
#pragma once

#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kOdorThreads = 128;  // output elements per block
constexpr int kOdorPower = 0, kOdorAdvectionDiffusion = 1;  // OdorPlan::field (FIELDS' order)

struct OdorPlan {
  int64_t W = 0, n = 0, k = 0, s = 0;  // worlds, sources, odor dimensions, sensors
  int field = kOdorPower;
  double exponent = 2.0;               // power
  double diffusivity = 1.0, decay = 1.0, log_c0 = 0.0;  // advection_diffusion (log_c0 = log(1 / (2 pi D)))
  bool has_wind = false;
  int64_t src_s0 = 0, src_s1 = 0, src_s2 = 0;   // sources [W, n, 3]
  int64_t peak_s0 = 0, peak_s1 = 0, peak_s2 = 0;  // peaks [W, n, k] (s0 = 0: [n, k] for every world)
  int64_t sen_s0 = 0, sen_s1 = 0, sen_s2 = 0;   // sensors [W, s, 3]
  int64_t wind_s0 = 0, wind_s1 = 0;             // wind [W, 2]
  int64_t out_s0 = 0, out_s1 = 0, out_s2 = 0;   // out [W, k, s]
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * k * s; }
};

// Cephes' Chebyshev series sum_i c_i T_i(x / 2), as chbevl (the same recurrence and order).
template <int N>
FLYCUDA_HOST_DEVICE inline double odor_chbevl(double x, const double (&c)[N]) {
  double b0 = c[0], b1 = 0.0, b2 = 0.0;
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int i = 1; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = x * b1 - b2 + c[i];
  }
  return 0.5 * (b0 - b2);
}

// Cephes' k0e: exp(x) K0(x), x >= 0 (0: inf; negative: NaN).
FLYCUDA_HOST_DEVICE inline double odor_k0e(double x) {
  const double a[10] = {1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
                        1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
                        1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
                        -5.35327393233902768720e-01};
  const double b[25] = {5.30043377268626276149e-18,  -1.64758043015242134646e-17, 5.21039150503902756861e-17,
                        -1.67823109680541210385e-16, 5.51205597852431940784e-16,  -1.84859337734377901440e-15,
                        6.34007647740507060557e-15,  -2.22751332699166985548e-14, 8.03289077536357521100e-14,
                        -2.98009692317273043925e-13, 1.14034058820847496303e-12,  -4.51459788337394416547e-12,
                        1.85594911495471785253e-11,  -7.95748924447710747776e-11, 3.57739728140030116597e-10,
                        -1.69753450938905987466e-09, 8.57403401741422608519e-09,  -4.66048989768794782956e-08,
                        2.76681363944501510342e-07,  -1.83175552271911948767e-06, 1.39498137188764993662e-05,
                        -1.28495495816278026384e-04, 1.56988388573005337491e-03,  -3.14481013119645005427e-02,
                        2.44030308206595545468e+00};
  // Cephes' i0 series for |x| <= 8 (only x <= 2 is needed here): i0(x) = exp(x) chbevl(x / 2 - 2, i0a).
  const double i0a[30] = {-4.41534164647933937950e-18, 3.33079451882223809783e-17,  -2.43127984654795469359e-16,
                          1.71539128555513303061e-15,  -1.16853328779934516808e-14, 7.67618549860493561688e-14,
                          -4.85644678311192946090e-13, 2.95505266312963983461e-12,  -1.72682629144155570723e-11,
                          9.67580903537323691224e-11,  -5.18979560163526290666e-10, 2.65982372468238665035e-09,
                          -1.30002500998624804212e-08, 6.04699502254191894932e-08,  -2.67079385394061173391e-07,
                          1.11738753912010371815e-06,  -4.41673835845875056359e-06, 1.64484480707288970893e-05,
                          -5.75419501008210370398e-05, 1.88502885095841655729e-04,  -5.76375574538582365885e-04,
                          1.63947561694133579842e-03,  -4.32430999505057594430e-03, 1.05464603945949983183e-02,
                          -2.37374148058994688156e-02, 4.93052842396707084878e-02,  -9.49010970480476444210e-02,
                          1.71620901522208775349e-01,  -3.04682672343198398683e-01, 6.76795274409476084995e-01};
  if (x == 0.0) return INFINITY;
  if (!(x > 0.0)) return NAN;  // negative or NaN
  if (x <= 2.0) {
    const double i0 = exp(x) * odor_chbevl(x / 2.0 - 2.0, i0a);
    return (odor_chbevl(x * x - 2.0, a) - log(0.5 * x) * i0) * exp(x);
  }
  return odor_chbevl(8.0 / x - 2.0, b) / sqrt(x);
}

// The field's formula, fixed per call: the power law's three (as torch's pow: 1 / (x x) for
// exponent 2, 1 / x for 1, pow otherwise) and the advection-diffusion field.
enum OdorForm { kOdorInvSquare, kOdorInv, kOdorPow, kOdorPlume };

FLYCUDA_HOST_DEVICE inline int odor_form(const OdorPlan& p) {
  if (p.field != kOdorPower) return kOdorPlume;
  return p.exponent == 2.0 ? kOdorInvSquare : p.exponent == 1.0 ? kOdorInv : kOdorPow;
}

// The field of a unit source at offset (rx, ry, rz) from it, in a world with wind (ux, uy).
template <int Form>
FLYCUDA_HOST_DEVICE inline double odor_field_as(double rx, double ry, double rz, double ux, double uy,
                                                const OdorPlan& p) {
  if constexpr (Form == kOdorPlume) {
    const double D = p.diffusivity;
    const double kappa = sqrt((ux * ux + uy * uy) / (4.0 * D * D) + p.decay / D);
    const double kr = kappa * sqrt(rx * rx + ry * ry);
    return exp(p.log_c0 + (rx * ux + ry * uy) / (2.0 * D) + log(odor_k0e(kr)) - kr);
  } else {
    const double d = sqrt(rx * rx + ry * ry + rz * rz);
    if constexpr (Form == kOdorInvSquare) return 1.0 / (d * d);
    if constexpr (Form == kOdorInv) return 1.0 / d;
    return pow(d, -p.exponent);
  }
}

// The same, the formula chosen at run time (the kernel's threads).
FLYCUDA_HOST_DEVICE inline double odor_field(double rx, double ry, double rz, double ux, double uy,
                                             const OdorPlan& p) {
  switch (odor_form(p)) {
    case kOdorInvSquare: return odor_field_as<kOdorInvSquare>(rx, ry, rz, ux, uy, p);
    case kOdorInv: return odor_field_as<kOdorInv>(rx, ry, rz, ux, uy, p);
    case kOdorPow: return odor_field_as<kOdorPow>(rx, ry, rz, ux, uy, p);
    default: return odor_field_as<kOdorPlume>(rx, ry, rz, ux, uy, p);
  }
}

// Sensor ss of world w and that world's wind: what the field needs besides a source.
struct OdorSensor {
  double x, y, z, ux, uy;
};

FLYCUDA_HOST_DEVICE inline OdorSensor odor_sensor(const float* sensors, const float* wind, const OdorPlan& p,
                                                  int64_t w, int64_t ss) {
  const float* sen = sensors + w * p.sen_s0 + ss * p.sen_s1;
  const double ux = p.has_wind ? static_cast<double>(wind[w * p.wind_s0]) : 0.0;
  const double uy = p.has_wind ? static_cast<double>(wind[w * p.wind_s0 + p.wind_s1]) : 0.0;
  return {sen[0], sen[p.sen_s2], sen[2 * p.sen_s2], ux, uy};
}

// Source i of world w's field at a sensor (unit peak); Form -1: chosen at run time.
template <int Form = -1>
FLYCUDA_HOST_DEVICE inline double odor_source_field(const float* sources, const OdorSensor& at, const OdorPlan& p,
                                                    int64_t w, int64_t i) {
  const float* src = sources + w * p.src_s0 + i * p.src_s1;
  const double rx = at.x - static_cast<double>(src[0]), ry = at.y - static_cast<double>(src[p.src_s2]);
  const double rz = at.z - static_cast<double>(src[2 * p.src_s2]);
  if constexpr (Form < 0) return odor_field(rx, ry, rz, at.ux, at.uy, p);
  else return odor_field_as<Form>(rx, ry, rz, at.ux, at.uy, p);
}

// Source i's peak in odor dimension kk of world w.
FLYCUDA_HOST_DEVICE inline double odor_peak(const float* peaks, const OdorPlan& p, int64_t w, int64_t i, int64_t kk) {
  return static_cast<double>(peaks[w * p.peak_s0 + i * p.peak_s1 + kk * p.peak_s2]);
}

// Output element (w, kk, ss): one sum over the sources, in order (the kernel's thread). The CPU
// twin evaluates each source's field once for every kk and sums the same terms in the same order.
FLYCUDA_HOST_DEVICE inline void odor_element(const float* sources, const float* peaks, const float* sensors,
                                             const float* wind, float* out, const OdorPlan& p, int64_t w, int64_t kk,
                                             int64_t ss) {
  const OdorSensor at = odor_sensor(sensors, wind, p, w, ss);
  double acc = 0.0;
  for (int64_t i = 0; i < p.n; ++i) acc = acc + odor_peak(peaks, p, w, i, kk) * odor_source_field(sources, at, p, w, i);
  out[w * p.out_s0 + kk * p.out_s1 + ss * p.out_s2] = static_cast<float>(acc);
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernel and its launch: nvcc and the emulator

__global__ void odor_intensity_kernel(
    const float* __restrict__ sources, const float* __restrict__ peaks, const float* __restrict__ sensors,
    const float* __restrict__ wind, float* __restrict__ out, const OdorPlan p) {
  // t = (w * k + kk) * s + ss < 2^31 (the checks): 32-bit divisions, sensors fastest.
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.threads()) return;
  const int32_t t32 = static_cast<int32_t>(t), s32 = static_cast<int32_t>(p.s), k32 = static_cast<int32_t>(p.k);
  const int32_t q = t32 / s32;
  odor_element(sources, peaks, sensors, wind, out, p, q / k32, q % k32, t32 % s32);
}

// The launch (platform.h, "launch templates"): one thread per output element.
template <class Launcher>
void launch_odor_intensity(Launcher&& launch, const float* sources,  // [W, n, 3], strided
                           const float* peaks,                       // [W, n, k], strided
                           const float* sensors,                     // [W, s, 3], strided
                           const float* wind,                        // [W, 2] or null
                           float* out,                               // [W, k, s], strided
                           const OdorPlan& p) {
  if (p.threads() <= 0) return;
  const unsigned int blocks = static_cast<unsigned int>((p.threads() + kOdorThreads - 1) / kOdorThreads);
  launch(odor_intensity_kernel, dim3(blocks), dim3(kOdorThreads), 0, sources, peaks, sensors, wind, out, p);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
