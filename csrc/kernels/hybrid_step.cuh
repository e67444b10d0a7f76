// flycuda: hybrid_step — FlyGym's walking controllers (flygym_demo.complex_terrain's
// CPGController, HybridController and HybridTurningController) for every world, one thread
// per leg, and the launch plan. Three compilers read this file, as every family's: nvcc
// (csrc/cuda/hybrid_step.cu), the host compiler for the CPU twin (csrc/hybrid_step.cpp: the
// per-leg function in a loop, world by world) and the emulator (FLYCUDA_EMU: everything). No ATen.
// A leg's step needs the other legs' phases and magnitudes before the step, and nothing else of
// theirs: each lane reads them, the block meets at a barrier, then each lane writes its own leg
// (the coupling sum keeps its order, so the bits stay one thread per world's).
//
// One step of world w, in FlyGym's order (flycuda/control/hybrid.py tells it in words,
// flycuda/reference/walking.py computes it in torch):
//   (turning) drives -> each side's oscillator amplitudes |d| and frequency signs;
//   (rules) the leg to retract (tarsus5 farthest below the thorax), persistence counters,
//           stumbling legs (ground force along the heading below a threshold);
//   one Euler step of the six coupled oscillators (from the state before the step);
//   (rules) per leg the retraction and stumbling corrections;
//   the angles: the preprogrammed step (FlyGym's periodic cubic spline, evaluated as scipy
//   evaluates it) at the new phase and magnitude, plus the correction times the phase gain
//   times the leg's correction vector; adhesion on outside the (extended) swing;
//   ctrl[w, act_ids[7 leg + m]] = float32(angle), ctrl[w, act_ids[42 + leg]] = adhesion.
// Every float64 operation is rounded on its own (the _rn intrinsics on the device, the host
// built without contraction), so the CPU twin, the emulator and the GPU compute FlyGym's
// operations in FlyGym's order; sin is the platform's (glibc on the host, CUDA's on the
// device: they may differ in the last bit), and so is the stumbling rule's dot product's
// order (NumPy's BLAS's): see stumbles().
#pragma once

#include "motion_to_ctrl.cuh"  // FLYCUDA_DMUL / DADD / DSUB
#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kLegs = 6;
constexpr int kHybridThreads = 96;   // a thread per leg: 16 worlds per block
static_assert(kHybridThreads % kLegs == 0, "a world's six legs must share a block (its barrier)");
constexpr int kLegDofs = 7;          // a leg's angles, in FlyGym's step-data order
constexpr int kKnots = 45;           // the splines' knots, 0 .. 2 pi
constexpr int kPieces = kKnots - 1;
constexpr int kGainPoints = 5;
constexpr int kHybridColumns = kLegs * kLegDofs + kLegs;  // act_ids: 42 angles, then 6 adhesion actuators
constexpr int kStateRows = 5;        // state [W, 5, 6] float64: the rows below
constexpr int kStatePhase = 0, kStateMagnitude = 1, kStateRetraction = 2, kStateStumbling = 3, kStateNet = 4;

// The params tensor, float64 [kParCount] (flycuda.ops.hybrid_params writes it; the offsets
// are mirrored in flycuda/ops/launch_plan.py and held equal by tests/csrc/test_launch_plan.py).
constexpr int64_t kParKnots = 0;                                              // [45]
constexpr int64_t kParCoeffs = kParKnots + kKnots;                            // [6, 4, 44, 7]: scipy's c per leg
constexpr int64_t kParNeutral = kParCoeffs + kLegs * 4 * kPieces * kLegDofs;  // [6, 7]
constexpr int64_t kParAdhesionEnd = kParNeutral + kLegs * kLegDofs;           // [6]: swing end (+ extension)
constexpr int64_t kParGainPoints = kParAdhesionEnd + kLegs;                   // [6, 5]
constexpr int64_t kParGainValues = kParGainPoints + kLegs * kGainPoints;      // [5]
constexpr int64_t kParVectors = kParGainValues + kGainPoints;                 // [6, 7]: correction vectors
constexpr int64_t kParFreqs = kParVectors + kLegs * kLegDofs;                 // [6]: intrinsic frequencies (Hz)
constexpr int64_t kParAmps = kParFreqs + kLegs;                               // [6]: intrinsic amplitudes
constexpr int64_t kParConvergence = kParAmps + kLegs;                         // [6]
constexpr int64_t kParWeights = kParConvergence + kLegs;                      // [6, 6]: row i, what i feels from j
constexpr int64_t kParBiases = kParWeights + kLegs * kLegs;                   // [6, 6]
constexpr int64_t kParScalars = kParBiases + kLegs * kLegs;                   // the scalars below
constexpr int kScTimestep = 0, kScStumbleForce = 1, kScRetractHeight = 2, kScRetractUp = 3, kScRetractDown = 4,
              kScStumbleUp = 5, kScStumbleDown = 6, kScMaxCorrection = 7, kScPersistSteps = 8, kScPersistFrom = 9,
              kScRules = 10, kScAdhesion = 11, kScTurning = 12, kScCount = 13;
constexpr int64_t kParCount = kParScalars + kScCount;

// Each world's output row: a leg's slot m reads its angle kDofOrder[m] (FlyGym's default
// locomotion order: coxa yaw, pitch, roll, femur pitch, roll, tibia, tarsus1).
FLYCUDA_HOST_DEVICE inline int dof_order(int m) { return m == 0 ? 2 : (m <= 2 ? m - 1 : m); }

struct HybridPlan {
  int64_t W = 0, nu = 0;
  int64_t ctrl_s0 = 0, ctrl_s1 = 0;  // ctrl [W, nu], any strides
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * kLegs; }  // a thread per leg
};

// Leg l's outputs into world w's ctrl row: its seven angles in FlyGym's default order (slot m
// reads angle dof_order(m)), then its adhesion (1/0); ids outside [0, nu) are skipped.
template <typename index_t>
FLYCUDA_HOST_DEVICE inline void write_leg(const index_t* act_ids, float* ctrl, const HybridPlan& p, int64_t w, int l,
                                          const double* angles, bool adhesion) {
  for (int m = 0; m < kLegDofs; ++m) {
    const int64_t c = static_cast<int64_t>(act_ids[l * kLegDofs + m]);
    if (c >= 0 && c < p.nu) ctrl[w * p.ctrl_s0 + c * p.ctrl_s1] = static_cast<float>(angles[dof_order(m)]);
  }
  const int64_t c = static_cast<int64_t>(act_ids[kLegs * kLegDofs + l]);
  if (c >= 0 && c < p.nu) ctrl[w * p.ctrl_s0 + c * p.ctrl_s1] = adhesion ? 1.0f : 0.0f;
}

// a % b as Python and NumPy compute it for floats (C's fmod, then b's sign; a zero is +0.0).
FLYCUDA_HOST_DEVICE inline double py_mod(double a, double b) {
  double m = fmod(a, b);
  if (m != 0.0) {
    if ((b < 0.0) != (m < 0.0)) m = FLYCUDA_DADD(m, b);
  } else {
    m = b < 0.0 ? -0.0 : 0.0;
  }
  return m;
}

// A leg's seven angles at `phase`, scaled by `magnitude` around the neutral pose:
// neutral + magnitude * (psi(phase) - neutral), psi evaluated as scipy's PPoly evaluates
// FlyGym's periodic spline (x[0] + (phase - x[0]) % period; the interval; the power sum).
FLYCUDA_HOST_DEVICE inline void step_angles(const double* par, int leg, double phase, double magnitude,
                                            double* out) {
  const double* x = par + kParKnots;
  const double xv = FLYCUDA_DADD(x[0], py_mod(FLYCUDA_DSUB(phase, x[0]), FLYCUDA_DSUB(x[kPieces], x[0])));
  int i = 0, hi = kPieces;  // x[i] <= xv < x[hi] by bisection; xv == 2 pi (the closed end): the last piece
  while (hi - i > 1) {
    const int mid = (i + hi) / 2;
    if (x[mid] <= xv) i = mid; else hi = mid;
  }
  const double s = FLYCUDA_DSUB(xv, x[i]);
  const double s2 = FLYCUDA_DMUL(s, s), s3 = FLYCUDA_DMUL(FLYCUDA_DMUL(s, s), s);
  const double* c = par + kParCoeffs + static_cast<int64_t>(leg) * 4 * kPieces * kLegDofs + i * kLegDofs;
  const double* neutral = par + kParNeutral + leg * kLegDofs;
  constexpr int kPower = kPieces * kLegDofs;  // c[p][i][k] is c[p * kPower + k] here
  for (int k = 0; k < kLegDofs; ++k) {
    double v = FLYCUDA_DADD(c[3 * kPower + k], 0.0);
    v = FLYCUDA_DADD(v, FLYCUDA_DMUL(c[2 * kPower + k], s));
    v = FLYCUDA_DADD(v, FLYCUDA_DMUL(c[kPower + k], s2));
    v = FLYCUDA_DADD(v, FLYCUDA_DMUL(c[k], s3));
    out[k] = FLYCUDA_DADD(neutral[k], FLYCUDA_DMUL(magnitude, FLYCUDA_DSUB(v, neutral[k])));
  }
}

// np.interp(x, points, values) with FlyGym's five phase-gain points of `leg`, as NumPy
// computes it for one x in [0, 2 pi].
FLYCUDA_HOST_DEVICE inline double phase_gain(const double* par, int leg, double x) {
  const double* xp = par + kParGainPoints + leg * kGainPoints;
  const double* fp = par + kParGainValues;
  if (!(x >= xp[0])) return x != x ? x : fp[0];
  if (x >= xp[kGainPoints - 1]) return fp[kGainPoints - 1];
  int j = 0;
  while (j + 1 < kGainPoints - 1 && xp[j + 1] <= x) ++j;
  if (xp[j] == x) return fp[j];
  const double slope = FLYCUDA_DSUB(fp[j + 1], fp[j]) / FLYCUDA_DSUB(xp[j + 1], xp[j]);
  return FLYCUDA_DADD(FLYCUDA_DMUL(slope, FLYCUDA_DSUB(x, xp[j])), fp[j]);
}

// The leg whose tarsus5 is farthest below the thorax if it is more than `height` below the
// third farthest, else -1 (also when a height is NaN: NumPy's argsort puts NaN last, and FlyGym's
// comparison with it fails). Of equal farthest legs the last (FlyGym's own choice among exact
// ties is its unstable sort's).
template <typename sense_t>
FLYCUDA_HOST_DEVICE inline int retraction_leg(const sense_t* thorax_z, const sense_t* tarsus5_z, double height,
                                              int64_t w) {
  const double tz = static_cast<double>(thorax_z[w]);
  double first = -INFINITY, second = -INFINITY, third = -INFINITY;  // the three largest, descending
  int chosen = 0;
  for (int l = 0; l < kLegs; ++l) {
    const double b = FLYCUDA_DSUB(tz, static_cast<double>(tarsus5_z[w * kLegs + l]));
    if (b != b) return -1;
    if (b >= first) chosen = l;
    if (b > first) {
      third = second, second = first, first = b;
    } else if (b > second) {
      third = second, second = b;
    } else if (b > third) {
      third = b;
    }
  }
  return first > FLYCUDA_DADD(third, height) ? chosen : -1;
}

// Does leg l stumble: a ground force on its tibia, tarsus1 or tarsus2 whose component along
// the heading is below `threshold`? (FlyGym takes the component with np.dot, whose summation
// is its BLAS's: the order here, ((f0 h0 + f1 h1) + f2 h2), can differ in the last bit, which
// decides differently only for a force within an ulp of the threshold.)
template <typename sense_t>
FLYCUDA_HOST_DEVICE inline bool stumbles(const sense_t* forces, const sense_t* heading, double threshold, int64_t w,
                                         int l) {
  const double h0 = static_cast<double>(heading[w * 3]), h1 = static_cast<double>(heading[w * 3 + 1]);
  const double h2 = static_cast<double>(heading[w * 3 + 2]);
  bool any = false;
  for (int s = 0; s < 3; ++s) {
    const sense_t* f = forces + ((w * kLegs + l) * 3 + s) * 3;
    const double along = FLYCUDA_DADD(FLYCUDA_DADD(FLYCUDA_DMUL(static_cast<double>(f[0]), h0),
                                                   FLYCUDA_DMUL(static_cast<double>(f[1]), h1)),
                                      FLYCUDA_DMUL(static_cast<double>(f[2]), h2));
    any = any || along < threshold;
  }
  return any;
}

// Leg i's oscillator after one Euler step (phase th, magnitude r), towards amplitude `amp` at
// frequency `freq`, its derivatives from every leg's state before the step (th0, r0: the six
// phases and magnitudes); the coupling summed from +0.0 over j = 0 .. 5 in order.
FLYCUDA_HOST_DEVICE inline void oscillate_leg(const double* par, int i, double freq, double amp, const double* th0,
                                              const double* r0, double& th, double& r) {
  const double dt = par[kParScalars + kScTimestep];
  const double two_pi = 6.283185307179586;  // 2 * np.pi
  double coupling = 0.0;  // NumPy's sum: from +0.0, j = 0 .. 5 in order
  for (int j = 0; j < kLegs; ++j) {
    const double wij = par[kParWeights + i * kLegs + j], phi = par[kParBiases + i * kLegs + j];
    const double t = FLYCUDA_DMUL(FLYCUDA_DMUL(r0[j], wij), sin(FLYCUDA_DSUB(FLYCUDA_DSUB(th0[j], th0[i]), phi)));
    coupling = FLYCUDA_DADD(coupling, t);
  }
  const double dth = FLYCUDA_DADD(FLYCUDA_DMUL(two_pi, freq), coupling);
  const double dr = FLYCUDA_DMUL(par[kParConvergence + i], FLYCUDA_DSUB(amp, r0[i]));
  th = FLYCUDA_DADD(th0[i], FLYCUDA_DMUL(dth, dt));
  r = FLYCUDA_DADD(r0[i], FLYCUDA_DMUL(dr, dt));
}

// Leg l's persistence counter after this step's rules (`sel`: the leg to retract, or -1).
FLYCUDA_HOST_DEVICE inline int64_t persist(const double* sc, const double* st, int64_t cnt, int sel, int l) {
  if (l == sel && st[kStateRetraction * kLegs + l] > sc[kScPersistFrom]) cnt = 1;
  if (cnt > 0) cnt += 1;
  return static_cast<double>(cnt) > sc[kScPersistSteps] ? 0 : cnt;
}

// Leg l's retraction and stumbling corrections after this step (updated in its state rows), and
// the net correction: the retraction's if any, else the stumbling's.
template <typename sense_t>
FLYCUDA_HOST_DEVICE inline double corrections(const sense_t* forces, const sense_t* heading, const double* sc,
                                              double* st, bool retract, int64_t w, int l) {
  double rc = st[kStateRetraction * kLegs + l], sg = st[kStateStumbling * kLegs + l];
  if (retract) {
    rc = FLYCUDA_DADD(rc, sc[kScRetractUp]);
  } else {
    const double v = FLYCUDA_DSUB(rc, sc[kScRetractDown]);
    rc = v > 0.0 ? v : 0.0;
  }
  if (stumbles(forces, heading, sc[kScStumbleForce], w, l)) {
    sg = FLYCUDA_DADD(sg, sc[kScStumbleUp]);
  } else {
    const double v = FLYCUDA_DSUB(sg, sc[kScStumbleDown]);
    sg = v > 0.0 ? v : 0.0;
  }
  double net = sg;
  if (rc > 0.0) {
    net = rc;
    sg = 0.0;
  }
  st[kStateRetraction * kLegs + l] = rc;
  st[kStateStumbling * kLegs + l] = sg;
  return net;
}

// Leg l of world w: its whole step (see the file's head), given every leg's phase and magnitude
// before it (th0, r0: read before any leg of the world writes its own). The legs of a world are
// independent but for th0 and r0, so the six run in any order, or at once. drive [W, 2],
// thorax_z [W], tarsus5_z [W, 6], forces [W, 6, 3, 3], heading [W, 3]: contiguous, of one floating
// type; par float64 [kParCount]; state float64 [W, 5, 6] and persistence int64 [W, 6],
// contiguous, updated (leg l's columns only); act_ids [48]; ctrl [W, nu] any strides (ids
// outside [0, nu) are skipped).
template <typename sense_t, typename index_t>
FLYCUDA_HOST_DEVICE inline void hybrid_leg(const sense_t* drive, const sense_t* thorax_z, const sense_t* tarsus5_z,
                                           const sense_t* forces, const sense_t* heading, const double* par,
                                           double* state, int64_t* persistence, const index_t* act_ids, float* ctrl,
                                           const HybridPlan& p, int64_t w, int l, const double* th0,
                                           const double* r0) {
  const double* sc = par + kParScalars;
  const bool rules = sc[kScRules] != 0.0;
  double* st = state + w * kStateRows * kLegs;
  double freq = par[kParFreqs + l], amp = par[kParAmps + l];
  if (sc[kScTurning] != 0.0) {  // the turning controller: its side's drive (left legs: drive 0)
    const double d = static_cast<double>(drive[w * 2 + l / 3]);
    amp = fabs(d);
    freq = FLYCUDA_DMUL(freq, d >= 0.0 ? 1.0 : -1.0);
  }
  double net = 0.0, th, r;
  if (rules) {
    const int sel = retraction_leg(thorax_z, tarsus5_z, sc[kScRetractHeight], w);
    const int64_t cnt = persist(sc, st, persistence[w * kLegs + l], sel, l);
    persistence[w * kLegs + l] = cnt;
    net = corrections(forces, heading, sc, st, l == sel || cnt > 0, w, l);
  }
  oscillate_leg(par, l, freq, amp, th0, r0, th, r);
  double angles[kLegDofs];
  step_angles(par, l, th, r, angles);
  const double two_pi = 6.283185307179586;
  const double reduced = py_mod(th, two_pi);
  if (rules) {
    const double m = sc[kScMaxCorrection];
    net = net < 0.0 ? 0.0 : (net > m ? m : net);  // np.clip: NaN stays NaN
    net = FLYCUDA_DMUL(net, phase_gain(par, l, reduced));
    for (int k = 0; k < kLegDofs; ++k) {
      angles[k] = FLYCUDA_DADD(angles[k], FLYCUDA_DMUL(net, par[kParVectors + l * kLegDofs + k]));
    }
  }
  st[kStateNet * kLegs + l] = net;
  st[kStatePhase * kLegs + l] = th;
  st[kStateMagnitude * kLegs + l] = r;
  const bool adhesion = sc[kScAdhesion] != 0.0 && !(reduced > 0.0 && reduced < par[kParAdhesionEnd + l]);
  write_leg(act_ids, ctrl, p, w, l, angles, adhesion);
}

// World w's phases and magnitudes before its step, into th0 and r0.
FLYCUDA_HOST_DEVICE inline void read_oscillators(const double* state, int64_t w, double* th0, double* r0) {
  const double* st = state + w * kStateRows * kLegs;
  for (int j = 0; j < kLegs; ++j) {
    th0[j] = st[kStatePhase * kLegs + j];
    r0[j] = st[kStateMagnitude * kLegs + j];
  }
}

// World w's step, its legs one after another (the CPU twin; the kernel runs them a lane each).
template <typename sense_t, typename index_t>
FLYCUDA_HOST_DEVICE inline void hybrid_one(const sense_t* drive, const sense_t* thorax_z, const sense_t* tarsus5_z,
                                           const sense_t* forces, const sense_t* heading, const double* par,
                                           double* state, int64_t* persistence, const index_t* act_ids, float* ctrl,
                                           const HybridPlan& p, int64_t w) {
  double th0[kLegs], r0[kLegs];
  read_oscillators(state, w, th0, r0);
  for (int l = 0; l < kLegs; ++l) {
    hybrid_leg(drive, thorax_z, tarsus5_z, forces, heading, par, state, persistence, act_ids, ctrl, p, w, l, th0, r0);
  }
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

template <typename sense_t, typename index_t>
__global__ void hybrid_step_kernel(const sense_t* __restrict__ drive, const sense_t* __restrict__ thorax_z,
                                   const sense_t* __restrict__ tarsus5_z, const sense_t* __restrict__ forces,
                                   const sense_t* __restrict__ heading, const double* __restrict__ par,
                                   double* __restrict__ state, int64_t* __restrict__ persistence,
                                   const index_t* __restrict__ act_ids, float* __restrict__ ctrl, const HybridPlan p) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t w = t / kLegs;  // a world's six legs: six adjacent lanes of one block
  const int l = static_cast<int>(t - w * kLegs);
  const bool live = w < p.W;
  double th0[kLegs], r0[kLegs];
  if (live) read_oscillators(state, w, th0, r0);
  __syncthreads();  // every leg of the block's worlds has read the phases before any leg writes its own
  if (live) hybrid_leg(drive, thorax_z, tarsus5_z, forces, heading, par, state, persistence, act_ids, ctrl, p, w, l,
                       th0, r0);
}

// The launch (platform.h, "launch templates"): a thread per leg, kHybridThreads (16 worlds) a
// block; none without worlds.
template <class Launcher, typename sense_t, typename index_t>
void launch_hybrid_step(Launcher&& launch, const sense_t* drive,  // [W, 2]
                        const sense_t* thorax_z,                  // [W]
                        const sense_t* tarsus5_z,                 // [W, 6]
                        const sense_t* forces,                    // [W, 6, 3, 3]
                        const sense_t* heading,                   // [W, 3]
                        const double* par,                        // [kParCount]
                        double* state,                            // [W, 5, 6]
                        int64_t* persistence,                     // [W, 6]
                        const index_t* act_ids,                   // [48]
                        float* ctrl,                              // [W, nu]
                        const HybridPlan& p) {
  if (p.W > 0) {
    const unsigned int blocks = static_cast<unsigned int>((p.threads() + kHybridThreads - 1) / kHybridThreads);
    launch(hybrid_step_kernel<sense_t, index_t>, dim3(blocks), dim3(kHybridThreads), 0, drive, thorax_z, tarsus5_z,
           forces, heading, par, state, persistence, act_ids, ctrl, p);
  }
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
