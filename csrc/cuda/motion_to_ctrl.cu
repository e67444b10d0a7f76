// flycuda: motion_to_ctrl and spline_to_ctrl — the CUDA launchers. The kernel, its
// launch plan and its launch are csrc/kernels/motion_to_ctrl.cuh (the same source runs
// on the emulated grid in CI).
#include "motion_to_ctrl.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

// Launches either op's kernel (inputs already checked) as the plan says: fused
// with the advance when the counter carries the hidden ticket (new_step_counter),
// else followed by a one-thread advance on the same stream. act_ids' values are
// the Python wrapper's to check (once per tensor version; the kernel skips bad ones).
template <typename Frames>
void launch(const Frames frames, Tensor& step, Tensor& ctrl,
            const Tensor& act_ids, const std::optional<Tensor>& offsets,
            double frames_per_step, FrameMode fm, int64_t advance) {
  const torch::stable::accelerator::DeviceGuard guard(ctrl.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  const int64_t W = ctrl.size(0), D = frames.D;
  const kernels::MotionToCtrlPlan plan = kernels::plan_motion_to_ctrl(W, D, advance, counter_has_ticket(step));
  const ScalarType offset_type = offsets.has_value() ? offsets->scalar_type() : kFloat;
  FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "motion_to_ctrl_cuda", [&] {
    FLYCUDA_DISPATCH_FLOATING_TYPES(offset_type, "motion_to_ctrl_cuda", [&] {
      kernels::launch_motion_to_ctrl(cuda::Launcher{stream}, frames, dptr<int64_t>(step), dptr<float>(ctrl),
                                     dptr<index_t>(act_ids), offsets.has_value() ? dptr<scalar_t>(*offsets) : nullptr,
                                     W, ctrl.size(1), ctrl.stride(0), ctrl.stride(1), frames_per_step,
                                     fm == FrameMode::Loop, advance, plan);
    });
  });
}

void motion_to_ctrl_cuda(const Tensor& motion,   // [M, T, D]
                         Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                         Tensor& ctrl,           // [W, nu]
                         const Tensor& act_ids,  // [D]
                         const std::optional<Tensor>& offsets,  // [W]
                         double frames_per_step, std::string_view mode,
                         int64_t advance) {
  const FrameMode fm = check_motion_to_ctrl(motion, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance);
  const LinearFrames frames{dptr<float>(motion), motion.size(0), motion.size(1), motion.size(2)};
  launch(frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

void spline_to_ctrl_cuda(const Tensor& coeffs,   // [M, T, 4, D]
                         Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                         Tensor& ctrl,           // [W, nu]
                         const Tensor& act_ids,  // [D]
                         const std::optional<Tensor>& offsets,  // [W]
                         double frames_per_step, std::string_view mode,
                         int64_t advance) {
  const FrameMode fm = check_spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance);
  const SplineFrames frames{dptr<double>(coeffs), coeffs.size(0), coeffs.size(1), coeffs.size(3)};
  launch(frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("motion_to_ctrl", TORCH_BOX(&motion_to_ctrl_cuda));
  m.impl("spline_to_ctrl", TORCH_BOX(&spline_to_ctrl_cuda));
}

}  // namespace flycuda
