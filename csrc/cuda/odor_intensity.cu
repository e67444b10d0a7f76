// flycuda: odor_intensity — the CUDA launcher (the kernel, its plan and its launch:
// csrc/kernels/odor_intensity.cuh; checks: csrc/odor_intensity.h). It reads the sources, peaks,
// sensors and wind where they lie on the device (the sensors a view of MuJoCo Warp's
// Data.site_xpos) and copies nothing to the host, so a control step that runs it can be
// captured into a CUDA graph.
#include "odor_intensity.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void odor_intensity_cuda(const Tensor& sources, const Tensor& peaks, const Tensor& sensors, Tensor& out,
                         std::string_view field, double exponent, const std::optional<Tensor>& wind,
                         double diffusivity, double decay) {  // shapes: OdorArgs
  const OdorArgs a{sources, peaks, sensors, out, field, exponent, wind, diffusivity, decay};
  const kernels::OdorPlan p = check_odor_intensity(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  kernels::launch_odor_intensity(cuda::Launcher{cuda::stream_for_launch()}, dptr<float>(sources), dptr<float>(peaks),
                                 dptr<float>(sensors), p.has_wind ? dptr<float>(*wind) : nullptr, dptr<float>(out), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("odor_intensity", TORCH_BOX(&odor_intensity_cuda)); }

}  // namespace flycuda
