// flycuda: connectome_step (one step of flyvis's connectome-constrained network for a batch of
// eyes, issue 40) — the argument checks, shared by the CPU impl (connectome_step.cpp) and the
// CUDA launcher (cuda/connectome_step.cu) so that both refuse exactly the same inputs before
// touching the output. The kernel and its launch plan: kernels/connectome_step.cuh.
#pragma once

#include "common.h"
#include "kernels/connectome_step.cuh"

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher.
struct ConnectomeArgs {
  const Tensor& v;         // [B, N] float32, any strides: the voltages now
  const Tensor& stimulus;  // [B, C] float32, any strides: the photoreceptors' input
  const Tensor& rowptr;    // [N + 1] int32, contiguous: each node's incoming edges (CSR)
  const Tensor& src;       // [E] int32, contiguous: each edge's source node
  const Tensor& weight;    // [E] float32, contiguous: each edge's weight
  const Tensor& bias;      // [N] float32, contiguous: each node's resting potential
  const Tensor& tau;       // [N] float32, contiguous: each node's time constant (s)
  Tensor& out;             // [B, N] float32, any strides, no overlap: the voltages after dt
  double dt;               // s, finite and > 0
  int64_t input_nodes;     // nodes [0, input_nodes) read stimulus[b, n % C]; a multiple of C, <= N
};

// Validates every argument (on the CPU, the maps' values too); the plan.
kernels::ConnectomePlan check_connectome_step(const ConnectomeArgs& a);

}  // namespace flycuda
