// flycuda: frame sampling math shared, line for line, by the CPU and CUDA
// impls of motion_to_ctrl and spline_to_ctrl (and mirrored by flycuda/reference).
//
// Device code uses the _rn intrinsics so that nvcc cannot contract a*b+c into
// an FMA; host code is built with -ffp-contract=off for the same reason: the
// CUDA op then rounds exactly like the CPU op and the reference.
#pragma once

#include "kernels/platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {

#if defined(FLYCUDA_DEVICE_PATH)
#define FLYCUDA_DMUL(a, b) __dmul_rn((a), (b))
#define FLYCUDA_DADD(a, b) __dadd_rn((a), (b))
#define FLYCUDA_DSUB(a, b) __dsub_rn((a), (b))
#else
#define FLYCUDA_DMUL(a, b) ((a) * (b))
#define FLYCUDA_DADD(a, b) ((a) + (b))
#define FLYCUDA_DSUB(a, b) ((a) - (b))
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

// spline_to_ctrl: per-frame cubic pieces, float64 [M, T, 4, D] (flycuda/spline.py);
// piece i0 evaluated at a (piece T-1 is the loop's wrap piece).
struct SplineFrames {
  const double* coeffs;
  int64_t M, T, D;
  FLYCUDA_HOST_DEVICE float at(int64_t w, const FrameSample& s, int64_t d) const {
    const double* c = coeffs + (((M == 1 ? 0 : w) * T + s.i0) * 4) * D + d;
    return cubic(c[0], c[D], c[2 * D], c[3 * D], s.a);
  }
};

}  // namespace flycuda
