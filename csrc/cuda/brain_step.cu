// flycuda: brain_step — the CUDA launcher (the kernels, their plan and their launch:
// csrc/kernels/brain_step.cuh; checks: csrc/brain_step.h). It reads the step counter, the state and
// the connectivity where they lie on the device and copies nothing to the host, so a step that runs
// it can be captured into a CUDA graph.
#include "brain_step.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void brain_step_cuda(Tensor& v, Tensor& g, Tensor& last, Tensor& acc, Tensor& ring, Tensor& log, Tensor& log_count,
                     const Tensor& rate, const Tensor& silence, const Tensor& seeds, const Tensor& step,
                     const Tensor& rowptr, const Tensor& post, const Tensor& count, const std::vector<double>& consts,
                     int64_t refractory, int64_t delay) {  // shapes: BrainArgs
  const BrainArgs a{v, g, last, acc, ring, log, log_count, rate, silence, seeds, step, rowptr, post, count, consts,
                    refractory, delay};
  const kernels::BrainPlan p = check_brain_step(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(v.get_device_index());
  kernels::launch_brain_step(cuda::Launcher{cuda::stream_for_launch()}, dptr<double>(v), dptr<double>(g),
                             dptr<int32_t>(last), dptr<int32_t>(acc), dptr<uint8_t>(ring), dptr<int64_t>(log),
                             reinterpret_cast<unsigned long long*>(dptr<int64_t>(log_count)), dptr<double>(rate),
                             dptr<uint8_t>(silence), dptr<int64_t>(seeds), dptr<int64_t>(step), dptr<int32_t>(rowptr),
                             dptr<int32_t>(post), dptr<int32_t>(count), p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("brain_step", TORCH_BOX(&brain_step_cuda)); }

}  // namespace flycuda
