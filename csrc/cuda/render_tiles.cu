// flycuda: render_tiles — the CUDA launcher. The kernels (the refit of each
// selected world's top level, then one thread per pixel) are
// csrc/kernels/render_tiles.cuh with their launches, the same source that runs on the
// emulated grid in CI; the checks and RenderArgs: csrc/render/. Outputs and the workspace
// are preallocated by the caller, so a launch allocates nothing and can live inside a
// CUDA graph.
#include "render/render_tiles.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

void render_tiles_cuda(FLYCUDA_RENDER_TILES_PARAMS) {
  // Guard the device; check index values when asked, unless the stream is being
  // captured (the check copies them to the host, with the CUDA runtime: no torch
  // call from inside the op). Every check passes before anything is written.
  const torch::stable::accelerator::DeviceGuard guard(geom_xpos.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  kernels::RenderPlan plan;
  const render::RenderArgs a = render_args(FLYCUDA_RENDER_TILES_ARGS, check && !cuda::capturing(stream), plan,
                                           cuda::copy_to_host(stream));
  // The top-level refit, then the pixels, in order on one stream (capturable).
  kernels::launch_render_tiles(cuda::Launcher{stream}, a, plan);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("render_tiles", TORCH_BOX(&render_tiles_cuda)); }

}  // namespace flycuda
