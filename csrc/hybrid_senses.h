// flycuda: hybrid_senses (the sensory inputs of FlyGym's hybrid walking controllers, read from
// MuJoCo Warp's Data) — the argument checks, shared by the CPU impl (hybrid_senses.cpp) and the
// CUDA launcher (cuda/hybrid_senses.cu) so that both reject exactly the same inputs before
// touching any output. The kernels and their launch plan: kernels/hybrid_senses.cuh.
#pragma once

#include "common.h"
#include "kernels/hybrid_senses.cuh"

namespace flycuda {

// `contacts` holds MuJoCo Warp's contact arrays in this order (flycuda.ops.launch_plan.CONTACT_FIELDS).
enum ContactField : int {
  kContactGeom,        // [slots, 2] int32
  kContactWorldid,     // [slots] int32
  kContactFrame,       // [slots, 3, 3] float32: rows normal, tangent 1, tangent 2
  kContactFriction,    // [slots, 5] float32
  kContactDim,         // [slots] int32
  kContactEfcAddress,  // [slots, k] int32
  kContactAdhesion,    // [slots] float32
  kContactEfcForce,    // [W, njmax] float32 (Data.efc.force)
  kContactNacon,       // [1] int32: the contacts in use
  kContactFields
};

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct SensesArgs {
  const Tensor& xpos;          // [W, nbody, 3] float32 (Data.xpos)
  const Tensor& xmat;          // [W, nbody, 3, 3] float32 (Data.xmat)
  const Tensor& body_ids;      // [7] int32/int64: the thorax, then each leg's tarsus5 (LF LM LH RF RM RH)
  const TensorList& contacts;  // ContactField's order
  const Tensor& geom_segment;  // [ngeom] int32: leg * 3 + link for the 18 leg segments, -2 ground, else -1
  int64_t cone;                // MuJoCo's opt.cone: 0 pyramidal, 1 elliptic
  Tensor& thorax_z;            // [W] float64
  Tensor& tarsus5_z;           // [W, 6] float64
  Tensor& stumbling_forces;    // [W, 6, 3, 3] float64: the ground's force on tibia, tarsus1, tarsus2
  Tensor& heading;             // [W, 3] float64: the thorax's x axis
};

// Validates every argument (on the CPU also body_ids' values, in [0, nbody)); the plan.
kernels::SensesPlan check_hybrid_senses(const SensesArgs& a);

}  // namespace flycuda
