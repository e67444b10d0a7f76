// flycuda: brain_step (the FlyWire whole-brain LIF model for B brains, issue 55) — the argument
// checks, shared by the CPU impl (brain_step.cpp) and the CUDA launcher (cuda/brain_step.cu) so that
// both refuse exactly the same inputs before touching any state. The kernels and their launch plan:
// kernels/brain_step.cuh.
#pragma once

#include <vector>

#include "common.h"
#include "kernels/brain_step.cuh"

namespace flycuda {

// The op's arguments, named once for the checks, the CPU impl and the CUDA launcher. Every tensor
// contiguous, on v's device; B brains of N neurons, E synapses.
struct BrainArgs {
  Tensor& v;                    // [B, N] float64 (V): membrane potentials, updated
  Tensor& g;                    // [B, N] float64 (V): synaptic conductances, updated
  Tensor& last;                 // [B, N] int32: each neuron's last spike step
  Tensor& acc;                  // [B, N] int32: synaptic input of the step (0 between steps)
  Tensor& ring;                 // [delay + 1, B, N] uint8: spike flags of the last delay + 1 steps
  Tensor& log;                  // [L] int64: spikes, (step << 32) | (b N + i)
  Tensor& log_count;            // [1] int64: spikes so far (entries past L are counted, not written)
  const Tensor& rate;           // [B, N] float64 (Hz): Poisson input (> 0: no refractory period)
  const Tensor& silence;        // [B, N] uint8: != 0: the neuron's synapses carry nothing
  const Tensor& seeds;          // [B] int64: each brain's stream
  const Tensor& step;           // [1] int64: the step n (the caller advances it)
  const Tensor& rowptr;         // [N + 1] int32: each presynaptic neuron's synapses (CSR)
  const Tensor& post;           // [E] int32: each synapse's target, in [0, N)
  const Tensor& count;          // [E] int32: each synapse's signed count (FlyWire's "Excitatory x Connectivity")
  const std::vector<double>& consts;  // kBrainConsts: v_rest, v_reset, v_th, decay_g, g_to_v, v_const,
                                      // decay_v, w_syn, w_poi, dt (flycuda.brain.model.Model.consts)
  int64_t refractory;           // steps, >= 0
  int64_t delay;                // steps, >= 1
};

// Validates every argument but the connectivity's values (the wrapper checks those once per tensor
// version; the kernels are safe against any); the plan.
kernels::BrainPlan check_brain_step(const BrainArgs& a);

}  // namespace flycuda
