// flycuda: motion_to_ctrl and spline_to_ctrl — the CUDA launchers. The kernel is
// csrc/kernels/motion_to_ctrl.cuh
// (the same source runs on the emulated grid in CI).
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

// Launches either op's kernel (inputs already checked): fused with the advance
// when the counter holds its ticket ([2]), else followed by a one-thread advance
// on the same stream. act_ids' values are checked once per tensor version,
// never during capture.
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
  const bool fused = advance != 0 && step.numel() == 2;
  if (W * D == 0 && !fused) {
    if (advance != 0) kernels::advance_step_kernel<<<1, 1, 0, stream>>>(step.data_ptr<int64_t>(), advance);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const int64_t blocks = kernels::motion_to_ctrl_blocks(W, D);
  TORCH_CHECK(blocks <= INT32_MAX, "flycuda.", op, ": W * D = ", W * D, " is too large");
  const at::ScalarType offset_type = offsets.has_value() ? offsets->scalar_type() : at::kFloat;
  AT_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "motion_to_ctrl_cuda", [&] {
    AT_DISPATCH_FLOATING_TYPES(offset_type, "motion_to_ctrl_cuda", [&] {
      kernels::motion_to_ctrl_kernel<Frames, index_t, scalar_t>
          <<<static_cast<unsigned int>(blocks), kernels::kMotionToCtrlThreads, 0, stream>>>(
              frames, step.data_ptr<int64_t>(), ctrl.data_ptr<float>(),
              act_ids.data_ptr<index_t>(),
              offsets.has_value() ? offsets->data_ptr<scalar_t>() : nullptr, W, D, ctrl.size(1),
              ctrl.stride(0), ctrl.stride(1), frames_per_step, fm == FrameMode::Loop,
              fused ? advance : 0);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (advance != 0 && !fused) {
    kernels::advance_step_kernel<<<1, 1, 0, stream>>>(step.data_ptr<int64_t>(), advance);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

void motion_to_ctrl_cuda(const at::Tensor& motion,   // [M, T, D]
                         at::Tensor& step,           // [1] or [2]
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
                         at::Tensor& step,           // [1] or [2]
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
