// flycuda: rule_step (FlyGym's rule-based walking controller for every world) — the argument
// checks, shared by the CPU impl (rule_step.cpp) and the CUDA launcher (cuda/rule_step.cu) so
// that both reject exactly the same inputs before touching any output. The kernel and its
// launch plan: kernels/rule_step.cuh.
#pragma once

#include "common.h"
#include "kernels/rule_step.cuh"

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct RuleArgs {
  const Tensor& params;   // [kParCount] float64 (flycuda.ops.hybrid_params: the steps, no swing extension)
  const Tensor& rules;    // [kRuleCount] float64 (flycuda.ops.rule_params): weights, margin, phase increment
  Tensor& state;          // [W, 5, 6] float64: phases, stepping (0/1), the three rules' scores
  Tensor& rng;            // [W, 626] int64: each world's MT19937 key, its position, the steps taken
  const Tensor& act_ids;  // [48] int32/int64: ctrl columns of the 42 angles, then the 6 adhesions
  Tensor& ctrl;           // [W, nu] float32, any strides
};

// Validates every argument; on the CPU also act_ids' values (in [0, nu), no repeats).
kernels::RulePlan check_rule_step(const RuleArgs& a);

}  // namespace flycuda
