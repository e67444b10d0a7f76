// flycuda: render_tiles — the CUDA launcher. The kernels (refit of each world's
// top-level BVH, then one thread per pixel) are csrc/kernels/render_tiles.cuh, the same source
// that runs on the emulated grid in CI. Outputs are preallocated by the caller,
// so a launch allocates nothing and can live inside a CUDA graph.
#include "checks.h"
#include "common.h"
#include "cuda/launch.h"
#include "kernels/render_tiles.cuh"
#include "render_views.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>

namespace flycuda {
namespace {

void render_tiles_cuda(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat,
                       const at::Tensor& cam_pos, const at::Tensor& cam_mat, const at::Tensor& worlds,
                       const at::Tensor& geom_ids, const at::Tensor& geom_info,
                       const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                       const at::Tensor& bvh_index, const at::Tensor& tris, const at::Tensor& top_index,
                       const at::Tensor& unbounded, const at::Tensor& lights,
                       const at::Tensor& headlight, double fovy, double zfar, int64_t samples,
                       bool shadows, int64_t height, int64_t width, int64_t mosaic_cols,
                       bool check, at::Tensor& rgb, at::Tensor& depth, at::Tensor& seg,
                       at::Tensor& top_bounds, at::Tensor& timers) {
  // Check shapes, dtypes, devices before touching the device.
  check_render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, geom_ids, geom_info, geom_param,
                     bvh_bounds, bvh_index, tris, top_index, unbounded, lights, headlight, fovy, zfar, samples, height,
                     width, mosaic_cols, rgb, depth, seg, top_bounds, timers);
  // Guard the device; check index values when asked, unless the stream is being
  // captured (the check copies them to the host).
  const c10::cuda::CUDAGuard guard(geom_xpos.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  if (check && !cuda::capturing(stream)) {
    check_render_tiles_indices(geom_xpos, worlds, geom_ids, geom_info, geom_param, bvh_bounds, bvh_index,
                               tris, top_index, unbounded);
  }
  // Scene and outputs.
  render::Scene sc = render::make_scene(geom_xpos, geom_xmat, geom_ids, geom_info, geom_param,
                                        bvh_bounds, bvh_index, tris, top_index, unbounded, lights, headlight);
  const render::Out out = render::make_out(rgb, depth, seg, mosaic_cols);
  const int64_t S = worlds.size(0);
  const int64_t tiles = render::tiles_covered(out, S);
  const kernels::RenderPlan plan = kernels::plan_render_tiles(tiles, height, width, S);
  if (plan.pixels == 0) return;
  // Every check passed before anything is written: the top-level refit first (when
  // a workspace is given), then the pixels, in order on one stream (capturable).
  TORCH_CHECK(!plan.too_large, "flycuda.render_tiles: too many pixels (", plan.pixels, ")");
  if (top_bounds.numel()) {
    kernels::refit_top_kernel<<<static_cast<unsigned int>(plan.refit_blocks), plan.refit_threads, 0, stream>>>(
        sc, worlds.data_ptr<int32_t>(), top_bounds.data_ptr<float>(), S);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sc.top_bounds = top_bounds.data_ptr<float>();
  }
  const float tan_half = static_cast<float>(std::tan(0.5 * fovy * M_PI / 180.0));
  kernels::render_tiles_kernel<<<static_cast<unsigned int>(plan.blocks), plan.threads, 0, stream>>>(
      sc, out, worlds.data_ptr<int32_t>(), cam_pos.data_ptr<float>(), cam_mat.data_ptr<float>(),
      cam_pos.stride(0), cam_mat.stride(0), S, height, width, tan_half, static_cast<float>(zfar),
      samples, shadows, tiles, timers.numel() ? timers.data_ptr<int64_t>() : nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("render_tiles", &render_tiles_cuda); }

}  // namespace flycuda
