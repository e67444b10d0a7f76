// flycuda: motion_to_ctrl and spline_to_ctrl — argument checks and the CPU impls.
//
// motion_to_ctrl: ctrl[w, act_ids[d]] = blend(motion[m, i0, d], motion[m, i1, d], a)
// spline_to_ctrl: ctrl[w, act_ids[d]] = cubic(coeffs[m, i0, 0..3, d], a)
//   for all w, d, where (i0, i1, a) = sample_frame(offsets[w], step[0],
//   frames_per_step, T, loop) and m = 0 if M == 1 else w. Then step[0] += advance.
// Frame sampling and the launch plan: csrc/kernels/motion_to_ctrl.cuh (shared with
// the CUDA kernel and the emulator).
#include "motion_to_ctrl.h"

#include "common.h"

#include <cmath>

namespace flycuda {

namespace {

// ctrl: [W, nu] float32, any strides (a view of MuJoCo Warp's Data.ctrl).
void check_ctrl(const char* kOpName, const Tensor& ctrl) {
  CHECK_DTYPE(ctrl, kFloat);
  CHECK_DIM(ctrl, 2);
  CHECK_NO_OVERLAP(ctrl);
}

// The recording's leading dims: M == 1 or M == W, T >= 1.
void check_recording(const char* kOpName, const char* name, const Tensor& rec, int64_t W) {
  FLYCUDA_CHECK(rec.size(0) == 1 || rec.size(0) == W, "argument '", name,
                "' must have size 1 or W = ctrl.size(0) = ", W, " in dim 0, got shape ",
                sizes_of(rec));
  FLYCUDA_CHECK(rec.size(1) >= 1, "argument '", name,
                "' must hold at least one frame (dim 1), got shape ", sizes_of(rec));
}

// Every argument but the recording, the same for both ops.
FrameMode check_the_rest(const char* kOpName, int64_t D, const Tensor& step,
                         const Tensor& ctrl, const Tensor& act_ids,
                         const std::optional<Tensor>& offsets_opt, double frames_per_step,
                         std::string_view mode, int64_t advance) {
  // act_ids: [D] int32/int64.
  CHECK_SAME_DEVICE(act_ids, ctrl);
  CHECK_INDEX_DTYPE(act_ids);
  CHECK_DIM(act_ids, 1);
  CHECK_SIZE(act_ids, 0, D);
  CHECK_CONTIGUOUS(act_ids);
  // step: int64 [1] or [2] on the same device (new_step_counter's [2] carries the
  // fused advance's hidden ticket).
  CHECK_SAME_DEVICE(step, ctrl);
  CHECK_COUNTER(step);
  // The launch plan (the same on CPU and CUDA): both refuse what CUDA cannot launch.
  const kernels::MotionToCtrlPlan plan =
      kernels::plan_motion_to_ctrl(ctrl.size(0), D, advance, counter_has_ticket(step));
  FLYCUDA_CHECK(!plan.too_large, "W * D = ", ctrl.size(0), " * ", D, " = ", ctrl.size(0) * D,
                " needs ", plan.blocks, " blocks of ", plan.threads, " threads, more than a grid holds (",
                INT32_MAX, ")");
  // offsets: [W] float32/float64.
  if (offsets_opt.has_value()) {
    const Tensor& offsets = *offsets_opt;
    CHECK_SAME_DEVICE(offsets, ctrl);
    FLYCUDA_CHECK(offsets.scalar_type() == kFloat || offsets.scalar_type() == kDouble,
                  "argument 'offsets' must have dtype Float or Double, got ",
                  offsets.scalar_type());
    CHECK_DIM(offsets, 1);
    CHECK_SIZE(offsets, 0, ctrl.size(0));
    CHECK_CONTIGUOUS(offsets);
    CHECK_NOT_ALIASED(ctrl, offsets);
    CHECK_NOT_ALIASED(step, offsets);
  }
  CHECK_NOT_ALIASED(ctrl, act_ids);
  CHECK_NOT_ALIASED(ctrl, step);
  CHECK_NOT_ALIASED(step, act_ids);
  FLYCUDA_CHECK_VALUE(std::isfinite(frames_per_step),
                      "argument 'frames_per_step' must be finite, got ", frames_per_step);
  FLYCUDA_CHECK_VALUE(mode == "clamp" || mode == "loop",
                      "argument 'mode' must be 'clamp' or 'loop', got '", mode, "'");
  FLYCUDA_CHECK_VALUE(advance >= 0, "argument 'advance' must be >= 0, got ", advance);
  if (checks_values_here(ctrl)) {
    check_index_values(kOpName, "act_ids", HostValues(act_ids), ctrl.size(1), "nu = ctrl.size(1)", true);
  }
  return mode == "loop" ? FrameMode::Loop : FrameMode::Clamp;
}

}  // namespace

FrameMode check_motion_to_ctrl(const Tensor& motion, const Tensor& step,
                               const Tensor& ctrl, const Tensor& act_ids,
                               const std::optional<Tensor>& offsets,
                               double frames_per_step, std::string_view mode,
                               int64_t advance) {
  constexpr const char* kOpName = "motion_to_ctrl";
  check_ctrl(kOpName, ctrl);
  // motion: [M, T, D] float32, contiguous, M == 1 or M == W.
  CHECK_SAME_DEVICE(motion, ctrl);
  CHECK_DTYPE(motion, kFloat);
  CHECK_DIM(motion, 3);
  CHECK_CONTIGUOUS(motion);
  check_recording(kOpName, "motion", motion, ctrl.size(0));
  CHECK_NOT_ALIASED(ctrl, motion);
  CHECK_NOT_ALIASED(step, motion);
  return check_the_rest(kOpName, motion.size(2), step, ctrl, act_ids, offsets, frames_per_step,
                        mode, advance);
}

FrameMode check_spline_to_ctrl(const Tensor& coeffs, const Tensor& step,
                               const Tensor& ctrl, const Tensor& act_ids,
                               const std::optional<Tensor>& offsets,
                               double frames_per_step, std::string_view mode,
                               int64_t advance) {
  constexpr const char* kOpName = "spline_to_ctrl";
  check_ctrl(kOpName, ctrl);
  // coeffs: [M, T, 4, D] float64, contiguous (flycuda.spline_coeffs).
  CHECK_SAME_DEVICE(coeffs, ctrl);
  CHECK_DTYPE(coeffs, kDouble);
  CHECK_DIM(coeffs, 4);
  CHECK_SIZE(coeffs, 2, 4);
  CHECK_CONTIGUOUS(coeffs);
  check_recording(kOpName, "coeffs", coeffs, ctrl.size(0));
  CHECK_NOT_ALIASED(ctrl, coeffs);
  CHECK_NOT_ALIASED(step, coeffs);
  return check_the_rest(kOpName, coeffs.size(3), step, ctrl, act_ids, offsets, frames_per_step,
                        mode, advance);
}

namespace {

template <typename Frames, typename index_t, typename offset_t>
void motion_to_ctrl_cpu_kernel(const Frames frames,      // [M, T, (4,) D]
                               int64_t step,             // step[0]
                               float* ctrl,              // [W, nu] strided
                               const index_t* act_ids,   // [D]
                               const offset_t* offsets,  // [W] or nullptr
                               int64_t W, int64_t D, int64_t nu,
                               int64_t ctrl_s0, int64_t ctrl_s1,
                               double frames_per_step, bool loop) {
  torch::stable::parallel_for(0, W, /*grain_size=*/64, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const double offset = offsets ? static_cast<double>(offsets[w]) : 0.0;
      const FrameSample s = sample_frame(offset, step, frames_per_step, frames.T, loop);
      for (int64_t d = 0; d < D; ++d) {
        const int64_t c = static_cast<int64_t>(act_ids[d]);
        if (c >= 0 && c < nu) ctrl[w * ctrl_s0 + c * ctrl_s1] = frames.at(w, s, d);
      }
    }
  });
}

// Runs the kernel for either op (inputs already checked), then advances the
// counter after every world has read it, as the launch plan says (fused or by a
// second launch on CUDA: one addition here either way). A new_step_counter's hidden
// ticket is not touched: the CPU has no blocks to count.
template <typename Frames>
void run_cpu(const Frames frames, Tensor& step, Tensor& ctrl, const Tensor& act_ids,
             const std::optional<Tensor>& offsets, double frames_per_step, FrameMode fm,
             int64_t advance) {
  const int64_t W = ctrl.size(0), D = frames.D;
  const kernels::MotionToCtrlPlan plan = kernels::plan_motion_to_ctrl(W, D, advance, counter_has_ticket(step));
  int64_t* counter = dptr<int64_t>(step);
  if (W > 0 && D > 0) {
    const ScalarType offset_type =
        offsets.has_value() ? offsets->scalar_type() : kFloat;
    FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "motion_to_ctrl_cpu", [&] {
      FLYCUDA_DISPATCH_FLOATING_TYPES(offset_type, "motion_to_ctrl_cpu", [&] {
        motion_to_ctrl_cpu_kernel<Frames, index_t, scalar_t>(
            frames, counter[0], dptr<float>(ctrl), dptr<index_t>(act_ids),
            offsets.has_value() ? dptr<scalar_t>(*offsets) : nullptr, W, D,
            ctrl.size(1), ctrl.stride(0), ctrl.stride(1), frames_per_step, fm == FrameMode::Loop);
      });
    });
  }
  if (plan.fused || plan.advance_kernel) counter[0] += advance;
}

void motion_to_ctrl_cpu(const Tensor& motion,   // [M, T, D]
                        Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                        Tensor& ctrl,           // [W, nu]
                        const Tensor& act_ids,  // [D]
                        const std::optional<Tensor>& offsets,  // [W]
                        double frames_per_step, std::string_view mode,
                        int64_t advance) {
  const FrameMode fm = check_motion_to_ctrl(motion, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance);
  const LinearFrames frames{dptr<float>(motion), motion.size(0), motion.size(1), motion.size(2)};
  run_cpu(frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

void spline_to_ctrl_cpu(const Tensor& coeffs,   // [M, T, 4, D]
                        Tensor& step,           // [1] or [2] (new_step_counter: hidden ticket)
                        Tensor& ctrl,           // [W, nu]
                        const Tensor& act_ids,  // [D]
                        const std::optional<Tensor>& offsets,  // [W]
                        double frames_per_step, std::string_view mode,
                        int64_t advance) {
  const FrameMode fm = check_spline_to_ctrl(coeffs, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance);
  const SplineFrames frames{dptr<double>(coeffs), coeffs.size(0), coeffs.size(1), coeffs.size(3)};
  run_cpu(frames, step, ctrl, act_ids, offsets, frames_per_step, fm, advance);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("motion_to_ctrl", TORCH_BOX(&motion_to_ctrl_cpu));
  m.impl("spline_to_ctrl", TORCH_BOX(&spline_to_ctrl_cpu));
}

}  // namespace flycuda
