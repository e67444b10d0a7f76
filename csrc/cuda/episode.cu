// flycuda: the episode family — the CUDA launchers (kernels, plans and launches:
// csrc/kernels/episode.cuh; checks: csrc/episode.h). Every launch reads its
// inputs on the device and copies nothing to the host while a graph is captured,
// so a whole environment step can be captured once and replayed. Index values
// (act_ids, columns) are the Python wrappers' to check on CUDA (once per tensor
// version, flycuda/ops/_values.py); the kernels skip out-of-range ones.
#include "episode.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

namespace k = kernels;

void motion_at_cuda(const Tensor& frames,        // [M, T, D] f32 or [M, T, 4, D] f64
                    const Tensor& world_steps,   // [W] int64
                    Tensor& out,                 // [W, D] f32
                    const std::optional<Tensor>& offsets,  // [W] f32/f64
                    double frames_per_step, std::string_view frame_mode) {
  const k::MotionAtPlan p = check_motion_at(frames, world_steps, out, offsets, frames_per_step, frame_mode);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  const cuda::Launcher launch{cuda::stream_for_launch()};
  const auto go = [&](const auto& fr) {
    FLYCUDA_DISPATCH_FLOATING_TYPES(offsets.has_value() ? offsets->scalar_type() : kFloat, "motion_at_cuda", [&] {
      k::launch_motion_at(launch, fr, dptr<int64_t>(world_steps),
                          offsets.has_value() ? dptr<scalar_t>(*offsets) : nullptr, dptr<float>(out), p);
    });
  };
  if (frames.scalar_type() == kDouble) {
    go(SplineFrames{dptr<double>(frames), frames.size(0), frames.size(1), frames.size(3)});
  } else {
    go(LinearFrames{dptr<float>(frames), frames.size(0), frames.size(1), frames.size(2)});
  }
}

void scatter_actions_cuda(const Tensor& actions,     // [W, A] f32
                          const Tensor& act_ids,     // [A] int32/int64
                          const Tensor& action_map,  // [4, A] f32
                          Tensor& ctrl) {            // [W, nu] f32
  const torch::stable::accelerator::DeviceGuard guard(ctrl.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  const k::ScatterPlan p = check_scatter_actions(actions, act_ids, action_map, ctrl);
  FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "scatter_actions_cuda", [&] {
    k::launch_scatter_actions(cuda::Launcher{stream}, dptr<float>(actions), dptr<index_t>(act_ids),
                              dptr<float>(action_map), dptr<float>(ctrl), p);
  });
}

void gather_columns_cuda(const TensorList& sources,  // [W, N_k] f32 each
                         const Tensor& columns,      // [O, 2] int32
                         Tensor& out) {              // [W, O] f32
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  const k::GatherPlan p = check_gather_columns(sources, columns, out);
  k::launch_gather_columns(cuda::Launcher{stream}, dptr<int32_t>(columns), dptr<float>(out), p);
}

void episode_step_cuda(Tensor& world_steps,       // [W] int64
                       const Tensor& qpos,        // [W, nq] f32
                       const Tensor& qvel,        // [W, nv] f32
                       Tensor& terminated,        // [W] bool
                       Tensor& truncated,         // [W] bool
                       int64_t root_adr, double min_height, double max_height, double min_up,
                       int64_t max_steps) {
  const k::EpisodePlan p = check_episode_step(world_steps, qpos, qvel, terminated, truncated, root_adr, min_height,
                                              max_height, min_up, max_steps);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(world_steps.get_device_index());
  k::launch_episode_step(cuda::Launcher{cuda::stream_for_launch()}, dptr<int64_t>(world_steps), dptr<float>(qpos),
                         dptr<float>(qvel), dptr<bool>(terminated), dptr<bool>(truncated), p);
}

void reset_worlds_cuda(const Tensor& done, const Tensor& init_qpos, const Tensor& init_qvel,
                       const Tensor& init_frames, const Tensor& qpos_noise, const Tensor& qvel_noise,
                       int64_t seed, Tensor& qpos, Tensor& qvel, Tensor& world_steps, Tensor& episodes,
                       Tensor& offsets) {  // shapes: ResetArgs (episode.h)
  const ResetArgs a{done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise, seed,
                    qpos, qvel, world_steps, episodes, offsets};
  const k::ResetPlan p = check_reset_worlds(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(done.get_device_index());
  k::launch_reset_worlds(cuda::Launcher{cuda::stream_for_launch()}, dptr<bool>(done), dptr<float>(init_qpos),
                         dptr<float>(init_qvel), dptr<double>(init_frames), dptr<float>(qpos_noise),
                         dptr<float>(qvel_noise), dptr<float>(qpos), dptr<float>(qvel), dptr<int64_t>(world_steps),
                         dptr<int64_t>(episodes), dptr<double>(offsets), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("motion_at", TORCH_BOX(&motion_at_cuda));
  m.impl("scatter_actions", TORCH_BOX(&scatter_actions_cuda));
  m.impl("gather_columns", TORCH_BOX(&gather_columns_cuda));
  m.impl("episode_step", TORCH_BOX(&episode_step_cuda));
  m.impl("reset_worlds", TORCH_BOX(&reset_worlds_cuda));
}

}  // namespace flycuda
