// flycuda: hybrid_senses — the CUDA launcher (the kernels, their plan and their launch:
// csrc/kernels/hybrid_senses.cuh; checks: csrc/hybrid_senses.h). It reads MuJoCo Warp's Data
// where it lies on the device (nacon included) and copies nothing to the host, so a control
// step that runs it can be captured into a CUDA graph. body_ids' values are the Python
// wrapper's to check on CUDA (flycuda/ops/_values.py); the kernel reads NaN for bad ones.
#include "hybrid_senses.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void hybrid_senses_cuda(const Tensor& xpos, const Tensor& xmat, const Tensor& body_ids, const TensorList& contacts,
                        const Tensor& geom_segment, int64_t cone, Tensor& thorax_z, Tensor& tarsus5_z,
                        Tensor& stumbling_forces, Tensor& heading) {  // shapes: SensesArgs
  const SensesArgs a{xpos, xmat, body_ids, contacts, geom_segment, cone, thorax_z, tarsus5_z, stumbling_forces,
                     heading};
  const kernels::SensesPlan p = check_hybrid_senses(a);
  if (p.threads() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(xpos.get_device_index());
  const cuda::Launcher launch{cuda::stream_for_launch()};
  const auto ip = [&](int field) { return dptr<int>(contacts[field]); };
  const auto fp = [&](int field) { return dptr<float>(contacts[field]); };
  FLYCUDA_DISPATCH_INDEX_TYPES(body_ids.scalar_type(), "hybrid_senses_cuda", [&] {
    kernels::launch_hybrid_senses(launch, dptr<float>(xpos), dptr<float>(xmat), dptr<index_t>(body_ids),
                                  ip(kContactGeom), ip(kContactWorldid), fp(kContactFrame), fp(kContactFriction),
                                  ip(kContactDim), ip(kContactEfcAddress), fp(kContactAdhesion),
                                  fp(kContactEfcForce), ip(kContactNacon), dptr<int>(geom_segment),
                                  dptr<double>(thorax_z), dptr<double>(tarsus5_z), dptr<double>(stumbling_forces),
                                  dptr<double>(heading), p);
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("hybrid_senses", TORCH_BOX(&hybrid_senses_cuda));
}

}  // namespace flycuda
