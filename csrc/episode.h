// flycuda: the episode family's argument checks (csrc/episode.cpp), shared by the CPU
// impls and the CUDA launchers (csrc/cuda/episode.cu) so that both reject exactly the
// same inputs before touching any output. Each returns the launch plan of
// csrc/kernels/episode.cuh that the CPU twin, the CUDA launcher and the emulator run.
#pragma once

#include "common.h"
#include <cstdint>

#include "kernels/episode.cuh"

namespace flycuda {

// On the CPU the checks also read index values (act_ids, columns: checks_values_here);
// the kernels skip out-of-range ids, never write out of bounds.

kernels::MotionAtPlan check_motion_at(const Tensor& frames,        // [M, T, D] f32 or [M, T, 4, D] f64
                                      const Tensor& world_steps,   // [W] int64
                                      const Tensor& out,           // [W, D] f32
                                      const std::optional<Tensor>& offsets,  // [W] f32/f64
                                      double frames_per_step, std::string_view frame_mode);

kernels::ScatterPlan check_scatter_actions(const Tensor& actions,     // [W, A] f32
                                           const Tensor& act_ids,     // [A] int32/int64
                                           const Tensor& action_map,  // [4, A] f32
                                           const Tensor& ctrl);       // [W, nu] f32

kernels::GatherPlan check_gather_columns(const TensorList& sources,       // [W, N_k] f32 each
                                         const Tensor& columns,    // [O, 2] int32
                                         const Tensor& out);       // [W, O] f32

kernels::EpisodePlan check_episode_step(const Tensor& world_steps,  // [W] int64
                                        const Tensor& qpos,         // [W, nq] f32
                                        const Tensor& qvel,         // [W, nv] f32
                                        const Tensor& terminated,   // [W] bool
                                        const Tensor& truncated,    // [W] bool
                                        int64_t root_adr, double min_height, double max_height,
                                        double min_up, int64_t max_steps);

// The inputs and outputs of reset_worlds, named once for the checks, the CPU impl and
// the CUDA launcher.
struct ResetArgs {
  const Tensor& done;         // [W] bool
  const Tensor& init_qpos;    // [K, nq] f32
  const Tensor& init_qvel;    // [K, nv] f32
  const Tensor& init_frames;  // [K] f64
  const Tensor& qpos_noise;   // [nq] f32
  const Tensor& qvel_noise;   // [nv] f32
  int64_t seed;
  Tensor& qpos;               // [W, nq] f32
  Tensor& qvel;               // [W, nv] f32
  Tensor& world_steps;        // [W] int64
  Tensor& episodes;           // [W] int64
  Tensor& offsets;            // [W] f64
};

kernels::ResetPlan check_reset_worlds(const ResetArgs& a);

}  // namespace flycuda
