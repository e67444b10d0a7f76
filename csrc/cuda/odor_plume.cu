// flycuda: odor_plume — the CUDA launcher (the kernel, its plan and its launch:
// csrc/kernels/odor_plume.cuh; checks: csrc/odor_plume.h). The grid is held once on the device
// and shared by every world; the sensors (a view of MuJoCo Warp's site_xpos) and the worlds' times
// (Data.time) are read where they lie, nothing is copied to the host: capturable in a CUDA graph.
#include "odor_plume.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void odor_plume_cuda(const Tensor& plume, const Tensor& sensors, const Tensor& time, Tensor& out,
                     const std::vector<double>& origin, const std::vector<double>& spacing, double fps,
                     std::string_view time_mode) {  // shapes: PlumeArgs
  const PlumeArgs a{plume, sensors, time, out, origin, spacing, fps, time_mode};
  const kernels::PlumePlan p = check_odor_plume(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  kernels::launch_odor_plume(cuda::Launcher{cuda::stream_for_launch()}, dptr<float>(plume), dptr<float>(sensors),
                             dptr<float>(time), dptr<float>(out), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("odor_plume", TORCH_BOX(&odor_plume_cuda)); }

}  // namespace flycuda
