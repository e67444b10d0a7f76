// flycuda: the episode family — the CUDA launchers (kernels and plans:
// csrc/kernels/episode.cuh; checks: csrc/episode.cpp). Every launch reads its
// inputs on the device and copies nothing to the host while a graph is captured,
// so a whole environment step can be captured once and replayed.
#include "common.h"
#include "cuda/launch.h"
#include "episode.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

namespace k = kernels;

inline unsigned int grid_for(int64_t threads) { return static_cast<unsigned int>(k::episode_blocks(threads)); }

void motion_at_cuda(const at::Tensor& frames, const at::Tensor& world_steps, at::Tensor& out,
                    const c10::optional<at::Tensor>& offsets, double frames_per_step, c10::string_view frame_mode) {
  const k::MotionAtPlan p = check_motion_at(frames, world_steps, out, offsets, frames_per_step, frame_mode);
  if (p.threads() == 0) return;
  const c10::cuda::CUDAGuard guard(out.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  const auto launch = [&](const auto& fr) {
    using Frames = std::decay_t<decltype(fr)>;
    AT_DISPATCH_FLOATING_TYPES(offsets.has_value() ? offsets->scalar_type() : at::kFloat, "motion_at_cuda", [&] {
      k::motion_at_kernel<Frames, scalar_t><<<grid_for(p.threads()), k::kEpisodeThreads, 0, stream>>>(
          fr, world_steps.data_ptr<int64_t>(), offsets.has_value() ? offsets->data_ptr<scalar_t>() : nullptr,
          out.data_ptr<float>(), p);
    });
  };
  if (frames.scalar_type() == at::kDouble) {
    launch(SplineFrames{frames.data_ptr<double>(), frames.size(0), frames.size(1), frames.size(3)});
  } else {
    launch(LinearFrames{frames.data_ptr<float>(), frames.size(0), frames.size(1), frames.size(2)});
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void scatter_actions_cuda(const at::Tensor& actions, const at::Tensor& act_ids, const at::Tensor& action_map,
                          at::Tensor& ctrl) {
  const c10::cuda::CUDAGuard guard(ctrl.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  const k::ScatterPlan p = check_scatter_actions(actions, act_ids, action_map, ctrl, !cuda::capturing(stream));
  if (p.threads() == 0) return;
  AT_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "scatter_actions_cuda", [&] {
    k::scatter_actions_kernel<index_t><<<grid_for(p.threads()), k::kEpisodeThreads, 0, stream>>>(
        actions.data_ptr<float>(), act_ids.data_ptr<index_t>(), action_map.data_ptr<float>(), ctrl.data_ptr<float>(),
        p);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void gather_columns_cuda(at::TensorList sources, const at::Tensor& columns, at::Tensor& out) {
  const c10::cuda::CUDAGuard guard(out.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  const k::GatherPlan p = check_gather_columns(sources, columns, out, !cuda::capturing(stream));
  if (p.threads() == 0) return;
  k::gather_columns_kernel<<<grid_for(p.threads()), k::kEpisodeThreads, 0, stream>>>(columns.data_ptr<int32_t>(),
                                                                                      out.data_ptr<float>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void episode_step_cuda(at::Tensor& world_steps, const at::Tensor& qpos, const at::Tensor& qvel, at::Tensor& terminated,
                       at::Tensor& truncated, int64_t root_adr, double min_height, double max_height, double min_up,
                       int64_t max_steps) {
  const k::EpisodePlan p = check_episode_step(world_steps, qpos, qvel, terminated, truncated, root_adr, min_height,
                                              max_height, min_up, max_steps);
  if (p.threads() == 0) return;
  const c10::cuda::CUDAGuard guard(world_steps.device());
  k::episode_step_kernel<<<grid_for(p.threads()), k::kEpisodeThreads, 0, cuda::stream_for_launch()>>>(
      world_steps.data_ptr<int64_t>(), qpos.data_ptr<float>(), qvel.data_ptr<float>(), terminated.data_ptr<bool>(),
      truncated.data_ptr<bool>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void reset_worlds_cuda(const at::Tensor& done, const at::Tensor& init_qpos, const at::Tensor& init_qvel,
                       const at::Tensor& init_frames, const at::Tensor& qpos_noise, const at::Tensor& qvel_noise,
                       int64_t seed, at::Tensor& qpos, at::Tensor& qvel, at::Tensor& world_steps, at::Tensor& episodes,
                       at::Tensor& offsets) {
  const ResetArgs a{done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise, seed,
                    qpos, qvel, world_steps, episodes, offsets};
  const k::ResetPlan p = check_reset_worlds(a);
  if (p.threads() == 0) return;
  const c10::cuda::CUDAGuard guard(done.device());
  k::reset_worlds_kernel<<<grid_for(p.threads()), k::kEpisodeThreads, 0, cuda::stream_for_launch()>>>(
      done.data_ptr<bool>(), init_qpos.data_ptr<float>(), init_qvel.data_ptr<float>(), init_frames.data_ptr<double>(),
      qpos_noise.data_ptr<float>(), qvel_noise.data_ptr<float>(), qpos.data_ptr<float>(), qvel.data_ptr<float>(),
      world_steps.data_ptr<int64_t>(), episodes.data_ptr<int64_t>(), offsets.data_ptr<double>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("motion_at", &motion_at_cuda);
  m.impl("scatter_actions", &scatter_actions_cuda);
  m.impl("gather_columns", &gather_columns_cuda);
  m.impl("episode_step", &episode_step_cuda);
  m.impl("reset_worlds", &reset_worlds_cuda);
}

}  // namespace flycuda
