// flycuda: odor_plume — argument checks, the launch plan and the CPU impl. What the op computes:
// csrc/kernels/odor_plume.cuh, whose per-element function the CPU twin below calls in loops over
// the worlds and sensors (the CUDA kernel and the emulator call the same, one element a thread).
#include "odor_plume.h"

#include "common.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace flycuda {
namespace {

constexpr const char* kOpName = "odor_plume";

void check_tensors(const PlumeArgs& a) {
  const Tensor &out = a.out, &plume = a.plume, &sensors = a.sensors, &time = a.time;
  CHECK_DTYPE(out, kFloat);
  FLYCUDA_CHECK(out.dim() == 2, "argument 'out' must be a 2-D tensor [W, s], got shape ", sizes_of(out));
  CHECK_NO_OVERLAP(out);
  const int64_t W = out.size(0), s = out.size(1);
  CHECK_SAME_DEVICE(plume, out);
  CHECK_DTYPE(plume, kFloat);
  FLYCUDA_CHECK(plume.dim() == 3 || plume.dim() == 4, "argument 'plume' must be a 3-D [T, X, Y] or 4-D "
                "[T, X, Y, Z] grid, got shape ", sizes_of(plume));
  FLYCUDA_CHECK(plume.numel() > 0, "argument 'plume' must hold at least one frame and node, got shape ",
                sizes_of(plume));
  CHECK_CONTIGUOUS(plume);
  CHECK_SAME_DEVICE(sensors, out);
  CHECK_DTYPE(sensors, kFloat);
  FLYCUDA_CHECK(sensors.dim() == 3 && sensors.size(0) == W && sensors.size(1) == s && sensors.size(2) == 3,
                "argument 'sensors' must have shape [W, s, 3] with W = out.size(0) = ", W, " and s = out.size(1) = ",
                s, ", got ", sizes_of(sensors));
  CHECK_SAME_DEVICE(time, out);
  CHECK_DTYPE(time, kFloat);
  FLYCUDA_CHECK(time.dim() == 1 && time.size(0) == W, "argument 'time' must have shape [W] with W = out.size(0) = ",
                W, ", got ", sizes_of(time));
  CHECK_NOT_ALIASED(out, plume);
  CHECK_NOT_ALIASED(out, sensors);
  CHECK_NOT_ALIASED(out, time);
  FLYCUDA_CHECK(W * s <= INT32_MAX, "W * s = ", W * s, " must be < 2^31 (32-bit thread indices)");
}

void check_options(const PlumeArgs& a, int dims) {
  FLYCUDA_CHECK_VALUE(static_cast<int>(a.origin.size()) == dims && static_cast<int>(a.spacing.size()) == dims,
                      "arguments 'origin' and 'spacing' must each hold ", dims, " values (the grid's spatial axes), "
                      "got ", static_cast<int64_t>(a.origin.size()), " and ", static_cast<int64_t>(a.spacing.size()));
  for (int d = 0; d < dims; ++d) {
    FLYCUDA_CHECK_VALUE(std::isfinite(a.origin[d]), "argument 'origin' must be finite, got ", a.origin[d],
                        " on axis ", d);
    FLYCUDA_CHECK_VALUE(std::isfinite(a.spacing[d]) && a.spacing[d] > 0.0,
                        "argument 'spacing' must be finite and > 0, got ", a.spacing[d], " on axis ", d);
  }
  FLYCUDA_CHECK_VALUE(std::isfinite(a.fps) && a.fps > 0.0, "argument 'fps' must be finite and > 0, got ", a.fps);
  FLYCUDA_CHECK_VALUE(a.time_mode == "clamp" || a.time_mode == "loop",
                      "argument 'time_mode' must be 'clamp' or 'loop', got '", a.time_mode, "'");
}

}  // namespace

kernels::PlumePlan check_odor_plume(const PlumeArgs& a) {
  check_tensors(a);
  kernels::PlumePlan p;
  p.dims = static_cast<int>(a.plume.dim()) - 1;
  check_options(a, p.dims);
  p.W = a.out.size(0), p.s = a.out.size(1), p.T = a.plume.size(0);
  for (int d = 0; d < p.dims; ++d) {
    p.n[d] = a.plume.size(d + 1), p.origin[d] = a.origin[d], p.spacing[d] = a.spacing[d];
  }
  for (int d = 0; d <= p.dims; ++d) p.stride[d] = a.plume.stride(d);
  p.fps = a.fps;
  p.time_mode = a.time_mode == "loop" ? kernels::kPlumeLoop : kernels::kPlumeClamp;
  p.sen_s0 = a.sensors.stride(0), p.sen_s1 = a.sensors.stride(1), p.sen_s2 = a.sensors.stride(2);
  p.time_s0 = a.time.stride(0);
  p.out_s0 = a.out.stride(0), p.out_s1 = a.out.stride(1);
  return p;
}

namespace {

void odor_plume_cpu(const Tensor& plume, const Tensor& sensors, const Tensor& time, Tensor& out,
                    const std::vector<double>& origin, const std::vector<double>& spacing, double fps,
                    std::string_view time_mode) {  // shapes: PlumeArgs
  const PlumeArgs a{plume, sensors, time, out, origin, spacing, fps, time_mode};
  const kernels::PlumePlan p = check_odor_plume(a);
  if (p.threads() == 0) return;
  // The pointers once (each dptr is a call through the stable ABI).
  const float *g = dptr<float>(plume), *sen = dptr<float>(sensors), *t = dptr<float>(time);
  float* o = dptr<float>(out);
  const int64_t grain = std::max<int64_t>(1, 1024 / p.s);  // about 1024 elements a task
  torch::stable::parallel_for(0, p.W, grain, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      for (int64_t ss = 0; ss < p.s; ++ss) kernels::plume_element(g, sen, t, o, p, w, ss);
    }
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("odor_plume", TORCH_BOX(&odor_plume_cpu)); }

}  // namespace flycuda
