// flycuda: hybrid_step (FlyGym's walking controllers for every world) — the argument checks,
// shared by the CPU impl (hybrid_step.cpp) and the CUDA launcher (cuda/hybrid_step.cu) so
// that both reject exactly the same inputs before touching any output. The kernel and its
// launch plan: kernels/hybrid_step.cuh.
#pragma once

#include "common.h"
#include "kernels/hybrid_step.cuh"

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct HybridArgs {
  const Tensor& drive;             // [W, 2] float32/float64 (left, right)
  const Tensor& thorax_z;          // [W]        the sensory inputs: drive's dtype, contiguous
  const Tensor& tarsus5_z;         // [W, 6]
  const Tensor& stumbling_forces;  // [W, 6, 3, 3]
  const Tensor& heading;           // [W, 3]
  const Tensor& params;            // [kParCount] float64 (flycuda.ops.hybrid_params)
  Tensor& state;                   // [W, 5, 6] float64: phases, magnitudes, retraction, stumbling, net
  Tensor& persistence;             // [W, 6] int64
  const Tensor& act_ids;           // [48] int32/int64: ctrl columns of the 42 angles, then the 6 adhesions
  Tensor& ctrl;                    // [W, nu] float32, any strides
};

// Validates every argument; on the CPU also act_ids' values (in [0, nu), no repeats).
kernels::HybridPlan check_hybrid_step(const HybridArgs& a);

// The checks the walking-controller ops (hybrid_step, rule_step, hybrid_senses) make, their
// messages prefixed with `op`'s name.
namespace walking {
using ::flycuda::check_disjoint;  // (common.h)
using ::flycuda::Named;
inline void expect(const char* op, const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape,
                   const Tensor& ref, const char* ref_name = "ctrl") {
  ::flycuda::expect(op, t, name, dt, std::move(shape), ref, ref_name);
}
// ctrl float32 [W, nu] without overlapping memory, act_ids [48] on its device, no output sharing
// memory with an input or another output, W < 2^31, and on the CPU act_ids' values; the plan.
kernels::HybridPlan check_ctrl(const char* op, const Tensor& act_ids, const Tensor& ctrl,
                               std::initializer_list<Named> inputs, std::initializer_list<Named> outputs);
// ctrl float32 [W, nu] (the first check: every shape is read from it).
void check_ctrl_shape(const char* op, const Tensor& ctrl);
}  // namespace walking

}  // namespace flycuda
