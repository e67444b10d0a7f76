// flycuda: rule_step — FlyGym's rule-based walking controller (flygym_demo.complex_terrain's
// RuleBasedController: Walknet's leg-coordination rules over the preprogrammed steps) for
// every world, one thread per leg, and the launch plan. nvcc (csrc/cuda/rule_step.cu), the
// host compiler (the CPU twin, csrc/rule_step.cpp) and the emulator compile this one file.
// A step is three parts with a barrier between them: the leg chosen (one lane a world: its
// stream), each leg's phase, each leg's scores (from its neighbours' new phases) and angles.
//
// One step of world w, in FlyGym's order (flycuda/control/rules.py tells it in words,
// flycuda/reference/walking.py computes it with NumPy's own RandomState):
//   the leg to start stepping: on the world's first step a random non-hind leg; later a
//   random one of the legs not stepping whose combined score (rule1 + rule2) + rule3 is > 0
//   and within `margin` (relative) of the best; none if there is no such leg. The draws are
//   NumPy's RandomState.choice on the world's own MT19937 stream, word for word;
//   the stepping legs' phases advance by 2 pi dt / T; a completed step (phase >= 2 pi)
//   returns to phase 0 and stops;
//   the three rules' scores, from the new phases (each leg's swing end is params' adhesion end:
//   params from hybrid_params with swing_extension=0, as RuleBasedController builds them) (rule 1: a swinging leg suppresses the leg
//   in front; rules 2 and 3: a leg in stance excites its neighbours, early and late);
//   the angles: the preprogrammed step at the phase (magnitude 1); adhesion off during the swing;
//   ctrl[w, act_ids[7 leg + m]] = float32(angle), ctrl[w, act_ids[42 + leg]] = adhesion.
// Every float64 operation is rounded on its own (the _rn intrinsics on the device, the host
// built without contraction): the CPU twin, the emulator and the GPU give FlyGym's bits.
#pragma once

#include "hybrid_step.cuh"  // step_angles, py_mod, write_leg, the params layout (kPar*), kLegs, HybridPlan
#include "platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kRuleThreads = 96;   // a thread per leg: 16 worlds per block
static_assert(kRuleThreads % kLegs == 0, "a world's six legs must share a block (its barrier)");
constexpr int kRuleRows = 5;       // state [W, 5, 6] float64: the rows below
constexpr int kRulePhase = 0, kRuleStepping = 1, kRuleScore1 = 2, kRuleScore2 = 3, kRuleScore3 = 4;
constexpr int kMtWords = 624;               // MT19937's key
constexpr int kRngCols = kMtWords + 2;      // rng [W, 626] int64: the key (uint32 values), its position, steps taken
constexpr int kRngPos = kMtWords, kRngSteps = kMtWords + 1;
// The rules tensor, float64 [kRuleCount] (flycuda.ops.rule_params; mirrored in launch_plan.RULE_CONSTANTS).
constexpr int kRuleW1 = 0, kRuleW2Ipsi = 1, kRuleW2Contra = 2, kRuleW3Ipsi = 3, kRuleW3Contra = 4, kRuleMargin = 5,
              kRuleIncrement = 6, kRuleCount = 7;

// FlyGym's rules graph (construct_rules_graph), legs in LEGS' order (lf lm lh rf rm rh): each
// source leg's targets in the graph's order, -1 padded. Rule 1's targets are assigned
// (a swinging source sets -10, else 0); rules 2 and 3 accumulate, source by source.
FLYCUDA_HOST_DEVICE inline int rule_target(int rule, int source, int k) {
  // rule1: lm->lf, lh->lm, rm->rf, rh->rm
  constexpr int8_t r1[kLegs][2] = {{-1, -1}, {0, -1}, {1, -1}, {-1, -1}, {3, -1}, {4, -1}};
  // rule2: lf->rf; lm->rm,lf; lh->rh,lm; rf->lf; rm->lm,rf; rh->lh,rm
  constexpr int8_t r2[kLegs][2] = {{3, -1}, {4, 0}, {5, 1}, {0, -1}, {1, 3}, {2, 4}};
  // rule3: lf->rf,lm; lm->rm,lh; lh->rh; rf->lf,rm; rm->lm,rh; rh->lh
  constexpr int8_t r3[kLegs][2] = {{3, 1}, {4, 2}, {5, -1}, {0, 4}, {1, 5}, {2, -1}};
  return rule == 1 ? r1[source][k] : (rule == 2 ? r2[source][k] : r3[source][k]);
}

// NumPy's MT19937 (numpy/random/src/mt19937): the key regenerated once its 624 words are used.
FLYCUDA_HOST_DEVICE inline void mt_twist(int64_t* key) {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  constexpr int kM = 397;
  for (int i = 0; i < kMtWords; ++i) {
    const uint32_t y = (static_cast<uint32_t>(key[i]) & kUpper) |
                       (static_cast<uint32_t>(key[(i + 1) % kMtWords]) & kLower);
    const uint32_t v = static_cast<uint32_t>(key[(i + kM) % kMtWords]) ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
    key[i] = static_cast<int64_t>(v);
  }
}

// The stream's next 32-bit word (NumPy's mt19937_next32: the key's next word, tempered). A
// position outside [0, 624) (a negative one reads as huge) regenerates the key: never a read
// outside the world's row.
FLYCUDA_HOST_DEVICE inline uint32_t mt_next(int64_t* rng) {
  uint64_t pos = static_cast<uint64_t>(rng[kRngPos]);
  if (pos >= static_cast<uint64_t>(kMtWords)) {
    mt_twist(rng);
    pos = 0;
  }
  uint32_t y = static_cast<uint32_t>(rng[pos]);
  rng[kRngPos] = static_cast<int64_t>(pos + 1);
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

// The index RandomState.choice(k items) returns (its legacy randint(0, k)): one item, no
// draw; else draws masked to the next power of two less one until one is < k.
FLYCUDA_HOST_DEVICE inline int choice_index(int64_t* rng, int k) {
  if (k <= 1) return 0;
  const uint32_t top = static_cast<uint32_t>(k - 1);
  uint32_t mask = top;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  uint32_t v = mt_next(rng) & mask;
  while (v > top) v = mt_next(rng) & mask;
  return static_cast<int>(v);
}

using RulePlan = HybridPlan;  // a thread per leg, ctrl [W, nu] with any strides

// The leg that starts stepping this step, or -1 (FlyGym's step(), its first lines).
FLYCUDA_HOST_DEVICE inline int rule_stepping_leg(const double* rules, const double* st, int64_t* rng) {
  int eligible[kLegs], k = 0;
  if (rng[kRngSteps] == 0) {  // the first step: one of the non-hind legs (always a draw)
    const int first[4] = {0, 1, 3, 4};
    return first[choice_index(rng, 4)];
  }
  double s[kLegs];
  for (int l = 0; l < kLegs; ++l) {
    s[l] = FLYCUDA_DADD(FLYCUDA_DADD(st[kRuleScore1 * kLegs + l], st[kRuleScore2 * kLegs + l]),
                        st[kRuleScore3 * kLegs + l]);
  }
  double best = s[0];  // NumPy's max: a NaN anywhere wins
  for (int l = 1; l < kLegs; ++l) {
    if (best != best) break;
    if (s[l] != s[l] || s[l] > best) best = s[l];
  }
  const double lowered = FLYCUDA_DSUB(best, FLYCUDA_DMUL(fabs(best), rules[kRuleMargin]));
  const double thr = lowered > 0.0 ? lowered : 0.0;  // Python's max(0, x)
  for (int l = 0; l < kLegs; ++l) {
    if (s[l] >= thr && s[l] > 0.0 && st[kRuleStepping * kLegs + l] == 0.0) eligible[k++] = l;
  }
  return k == 0 ? -1 : eligible[choice_index(rng, k)];
}

// World w's first part of a step: the leg to start stepping (drawn on the world's stream), marked
// stepping, and the stream's step count. Reads every leg's scores and stepping flags: it runs
// before any leg's own part.
FLYCUDA_HOST_DEVICE inline void rule_choose(const double* rules, double* state, int64_t* rngs, int64_t w) {
  double* st = state + w * kRuleRows * kLegs;
  int64_t* rng = rngs + w * kRngCols;
  const int sel = rule_stepping_leg(rules, st, rng);
  if (sel >= 0) st[kRuleStepping * kLegs + sel] = 1.0;
  rng[kRngSteps] += 1;
}

// Leg l's phase: advanced while it steps; a completed step returns to 0 and stops.
FLYCUDA_HOST_DEVICE inline void rule_advance(const double* rules, double* state, int64_t w, int l) {
  double* st = state + w * kRuleRows * kLegs;
  const double two_pi = 6.283185307179586;
  double* ph = st + kRulePhase * kLegs;
  if (st[kRuleStepping * kLegs + l] != 0.0) ph[l] = FLYCUDA_DADD(ph[l], rules[kRuleIncrement]);
  if (ph[l] >= two_pi) {
    ph[l] = 0.0;
    st[kRuleStepping * kLegs + l] = 0.0;
  }
}

// Leg l's three scores from every leg's new phase (FlyGym's sources in order: rule 1 assigned,
// rules 2 and 3 accumulated from +0.0), then its angles and adhesion into ctrl. Reads the other
// legs' phases: it runs after every leg's rule_advance.
template <typename index_t>
FLYCUDA_HOST_DEVICE inline void rule_leg(const double* par, const double* rules, double* state,
                                         const index_t* act_ids, float* ctrl, const RulePlan& p, int64_t w, int l) {
  double* st = state + w * kRuleRows * kLegs;
  const double* ph = st + kRulePhase * kLegs;
  const double two_pi = 6.283185307179586;
  double r1 = 0.0, r2 = 0.0, r3 = 0.0;
  for (int src = 0; src < kLegs; ++src) {
    const double swing_end = par[kParAdhesionEnd + src];
    const bool swinging = 0.0 < ph[src] && ph[src] < swing_end;
    const double progress = FLYCUDA_DSUB(ph[src], swing_end);
    const double ratio = FLYCUDA_DDIV(progress > 0.0 ? progress : 0.0, FLYCUDA_DSUB(two_pi, swing_end));
    for (int k = 0; k < 2; ++k) {
      const bool ipsi = (src < 3) == (l < 3);
      if (rule_target(1, src, k) == l) r1 = swinging ? rules[kRuleW1] : 0.0;
      if (ratio != 0.0 && rule_target(2, src, k) == l) {
        r2 = FLYCUDA_DADD(r2, FLYCUDA_DMUL(rules[ipsi ? kRuleW2Ipsi : kRuleW2Contra], FLYCUDA_DSUB(1.0, ratio)));
      }
      if (ratio != 0.0 && rule_target(3, src, k) == l) {
        r3 = FLYCUDA_DADD(r3, FLYCUDA_DMUL(rules[ipsi ? kRuleW3Ipsi : kRuleW3Contra], ratio));
      }
    }
  }
  st[kRuleScore1 * kLegs + l] = r1;
  st[kRuleScore2 * kLegs + l] = r2;
  st[kRuleScore3 * kLegs + l] = r3;
  double angles[kLegDofs];
  step_angles(par, l, ph[l], 1.0, angles);
  const double reduced = py_mod(ph[l], two_pi);
  write_leg(act_ids, ctrl, p, w, l, angles, !(reduced > 0.0 && reduced < par[kParAdhesionEnd + l]));
}

// One step of world w (the file's header says what it does), its legs one after another (the CPU
// twin; the kernel runs them a lane each, meeting at a barrier between the parts).
template <typename index_t>
FLYCUDA_HOST_DEVICE inline void rule_one(const double* par, const double* rules, double* state, int64_t* rngs,
                                         const index_t* act_ids, float* ctrl, const RulePlan& p, int64_t w) {
  rule_choose(rules, state, rngs, w);
  for (int l = 0; l < kLegs; ++l) rule_advance(rules, state, w, l);
  for (int l = 0; l < kLegs; ++l) rule_leg(par, rules, state, act_ids, ctrl, p, w, l);
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

template <typename index_t>
__global__ void rule_step_kernel(const double* __restrict__ par, const double* __restrict__ rules,
                                 double* __restrict__ state, int64_t* __restrict__ rng,
                                 const index_t* __restrict__ act_ids, float* __restrict__ ctrl, const RulePlan p) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t w = t / kLegs;  // a world's six legs: six adjacent lanes of one block
  const int l = static_cast<int>(t - w * kLegs);
  const bool live = w < p.W;
  if (live && l == 0) rule_choose(rules, state, rng, w);
  __syncthreads();  // the leg chosen is marked stepping (and every score read) before the legs go on
  if (live) rule_advance(rules, state, w, l);
  __syncthreads();  // every leg's new phase is written before any leg reads its neighbours'
  if (live) rule_leg(par, rules, state, act_ids, ctrl, p, w, l);
}

// The launch (platform.h, "launch templates"): a thread per leg, kRuleThreads (16 worlds) a block.
template <class Launcher, typename index_t>
void launch_rule_step(Launcher&& launch, const double* par,  // [kParCount] (hybrid_params, no extension)
                      const double* rules,                   // [kRuleCount]
                      double* state,                         // [W, 5, 6]
                      int64_t* rng,                          // [W, 626]
                      const index_t* act_ids,                // [48]
                      float* ctrl,                           // [W, nu]
                      const RulePlan& p) {
  if (p.W > 0) {
    const unsigned int blocks = static_cast<unsigned int>((p.threads() + kRuleThreads - 1) / kRuleThreads);
    launch(rule_step_kernel<index_t>, dim3(blocks), dim3(kRuleThreads), 0, par, rules, state, rng, act_ids, ctrl, p);
  }
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
