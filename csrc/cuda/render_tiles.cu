// flycuda: render_tiles — the CUDA launcher. The kernels (the refit of each
// selected world's top level, then one thread per pixel) are
// csrc/kernels/render_tiles.cuh, the same source that runs on the emulated grid in
// CI. Outputs and the workspace are preallocated by the caller, so a launch
// allocates nothing and can live inside a CUDA graph.
#include "render_args.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void render_tiles_cuda(FLYCUDA_RENDER_TILES_PARAMS) {
  // Guard the device; check index values when asked, unless the stream is being
  // captured (the check copies them to the host). Every check passes before
  // anything is written.
  const torch::stable::accelerator::DeviceGuard guard(geom_xpos.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  kernels::RenderPlan plan;
  const render::RenderArgs a = render_args(FLYCUDA_RENDER_TILES_ARGS, check && !cuda::capturing(stream), plan);
  if (a.v.nsel == 0 || plan.blocks == 0) return;
  // The top-level refit, then the pixels, in order on one stream (capturable).
  if (a.sc.ntop > 0) {
    kernels::refit_top_kernel<<<static_cast<unsigned int>(plan.refit_blocks), plan.refit_threads, 0, stream>>>(a);
    FLYCUDA_LAUNCH_CHECK();
  }
  if (a.v.timers) {
    kernels::render_tiles_timed_kernel<<<static_cast<unsigned int>(plan.blocks), plan.threads, 0, stream>>>(a, plan);
  } else {
    kernels::render_tiles_kernel<<<static_cast<unsigned int>(plan.blocks), plan.threads, 0, stream>>>(a, plan);
  }
  FLYCUDA_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("render_tiles", TORCH_BOX(&render_tiles_cuda)); }

}  // namespace flycuda
