// flycuda: connectome_step — the CUDA launcher (the kernel, its plan and its launch:
// csrc/kernels/connectome_step.cuh; checks: csrc/connectome_step.h). It reads the voltages, the
// stimulus and the network's tables where they lie on the device and copies nothing to the host,
// so a step that runs it can be captured into a CUDA graph.
#include "connectome_step.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void connectome_step_cuda(const Tensor& v, const Tensor& stimulus, const Tensor& rowptr, const Tensor& src,
                          const Tensor& weight, const Tensor& bias, const Tensor& tau, Tensor& out, double dt,
                          int64_t input_nodes) {  // shapes: ConnectomeArgs
  const ConnectomeArgs a{v, stimulus, rowptr, src, weight, bias, tau, out, dt, input_nodes};
  const kernels::ConnectomePlan p = check_connectome_step(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  kernels::launch_connectome_step(cuda::Launcher{cuda::stream_for_launch()}, dptr<float>(v), dptr<float>(stimulus),
                                  dptr<int32_t>(rowptr), dptr<int32_t>(src), dptr<float>(weight), dptr<float>(bias),
                                  dptr<float>(tau), dptr<float>(out), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("connectome_step", TORCH_BOX(&connectome_step_cuda)); }

}  // namespace flycuda
