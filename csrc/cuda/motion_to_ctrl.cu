// flycuda: motion_to_ctrl and spline_to_ctrl — the CUDA launchers. The kernel and
// its launch plan are csrc/kernels/motion_to_ctrl.cuh (the same source runs on the
// emulated grid in CI).
#include "checks.h"
#include "common.h"
#include "cuda/launch.h"
#include "kernels/advance_step.cuh"
#include "kernels/motion_to_ctrl.cuh"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

// Launches either op's kernel (inputs already checked) as the plan says: fused
// with the advance when the counter carries the hidden ticket (new_step_counter),
// else followed by a one-thread advance on the same stream. act_ids' values are
// checked once per tensor version, never during capture.
template <typename Frames>
void launch(const char* op, const Frames frames, at::Tensor& step, at::Tensor& ctrl,
            const at::Tensor& act_ids, const c10::optional<at::Tensor>& offsets,
            double frames_per_step, FrameMode fm, int64_t advance) {
  const c10::cuda::CUDAGuard guard(ctrl.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  if (!cuda::capturing(stream)) {
    check_index_values(op, "act_ids", act_ids, ctrl.size(1), "nu = ctrl.size(1)", true);
  }
  const int64_t W = ctrl.size(0), D = frames.D;
  const kernels::MotionToCtrlPlan plan = kernels::plan_motion_to_ctrl(W, D, advance, counter_has_ticket(step));
  int64_t* counter = step.data_ptr<int64_t>();
  if (plan.run_kernel) {
    unsigned int* ticket = plan.fused ? kernels::counter_ticket(counter) : nullptr;
    const at::ScalarType offset_type = offsets.has_value() ? offsets->scalar_type() : at::kFloat;
    AT_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "motion_to_ctrl_cuda", [&] {
      AT_DISPATCH_FLOATING_TYPES(offset_type, "motion_to_ctrl_cuda", [&] {
        const auto go = [&](auto idx_tag) {
          using idx_t = decltype(idx_tag);
          kernels::motion_to_ctrl_kernel<idx_t, Frames, index_t, scalar_t>
              <<<static_cast<unsigned int>(plan.blocks), plan.threads, 0, stream>>>(
                  frames, counter, ticket, ctrl.data_ptr<float>(), act_ids.data_ptr<index_t>(),
                  offsets.has_value() ? offsets->data_ptr<scalar_t>() : nullptr, static_cast<idx_t>(W),
                  static_cast<idx_t>(D), ctrl.size(1), ctrl.stride(0), ctrl.stride(1), frames_per_step,
                  fm == FrameMode::Loop, plan.fused ? advance : 0);
        };
        if (plan.index32) go(int32_t{0});
        else go(int64_t{0});
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  if (plan.advance_kernel) {
    kernels::advance_step_kernel<<<1, 1, 0, stream>>>(counter, advance);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

void motion_to_ctrl_cuda(const at::Tensor& motion,   // [M, T, D]
                         at::Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                         at::Tensor& ctrl,           // [W, nu]
                         const at::Tensor& act_ids,  // [D]
                         const c10::optional<at::Tensor>& offsets,  // [W]
                         double frames_per_step, c10::string_view mode,
                         int64_t advance) {
  const FrameMode fm = check_motion_to_ctrl(motion, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance,
                                            /*check_values=*/false);
  const LinearFrames frames{motion.data_ptr<float>(), motion.size(0), motion.size(1), motion.size(2)};
  launch("motion_to_ctrl", frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

void spline_to_ctrl_cuda(const at::Tensor& coeffs,   // [M, T, 4, D]
                         at::Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                         at::Tensor& ctrl,           // [W, nu]
                         const at::Tensor& act_ids,  // [D]
                         const c10::optional<at::Tensor>& offsets,  // [W]
                         double frames_per_step, c10::string_view mode,
                         int64_t advance) {
  const FrameMode fm = check_spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance,
                                            /*check_values=*/false);
  const SplineFrames frames{coeffs.data_ptr<double>(), coeffs.size(0), coeffs.size(1), coeffs.size(3)};
  launch("spline_to_ctrl", frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("motion_to_ctrl", &motion_to_ctrl_cuda);
  m.impl("spline_to_ctrl", &spline_to_ctrl_cuda);
}

}  // namespace flycuda
