// flycuda: render_tiles — the CUDA impl.
//
// One thread per pixel of each selected world: idx = (s * H + py) * Wd + px,
// 128 threads a block, so a block covers a run of pixels of one image row
// (neighbouring rays hit the same geoms and BVH nodes: coherent memory access,
// little divergence). Each thread runs render_pixel (csrc/render_tiles.h),
// the same code as the CPU impl. The static scene (geom table, BVH, triangles,
// lights) is read through the read-only cache; the per-world poses are zero-copy
// views of MuJoCo Warp's geom_xpos/geom_xmat. Outputs are preallocated by the
// caller, so a launch allocates nothing and can live inside a CUDA graph.
#include "checks.h"
#include "common.h"
#include "render_tiles.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cmath>

namespace flycuda {
namespace {

constexpr int kThreads = static_cast<int>(render::kChunk);  // one block = one timer chunk

// One thread per selected world: its culling sphere (render::world_bound).
__global__ void world_bounds_kernel(render::Scene sc, const int32_t* __restrict__ worlds,  // [S]
                                    float* __restrict__ world_bounds,                    // [W, 4]
                                    int64_t S) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= S) return;
  const int64_t w = worlds[s];
  render::world_bound(sc, w, world_bounds + 4 * w);
}

__global__ void render_tiles_kernel(render::Scene sc, render::Out out,
                                    const int32_t* __restrict__ worlds,  // [S]
                                    const float* __restrict__ cam_pos,   // [W, 3]
                                    const float* __restrict__ cam_mat,   // [W, 9]
                                    int64_t cp_s0, int64_t cm_s0, int64_t S, int64_t H, int64_t Wd,
                                    float tan_half_fovy, float zfar, int64_t samples, bool shadows,
                                    int64_t tiles,
                                    int64_t* timers) {  // [blocks, 3] or null
  const int64_t start = timers ? render::now() : 0;
  int64_t stage[2] = {0, 0};
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < tiles * H * Wd) {
    const int64_t px = idx % Wd;
    const int64_t py = (idx / Wd) % H;
    const int64_t s = idx / (Wd * H);
    if (s >= S) {  // an empty mosaic cell
      render::clear_pixel(out, s, py, px, H, Wd);
    } else {
      const int64_t w = worlds[s];
      render::render_pixel(sc, out, s, w, py, px, H, Wd, cam_pos + w * cp_s0, cam_mat + w * cm_s0,
                           tan_half_fovy, zfar, samples, shadows, timers ? stage : nullptr);
    }
  }
  if (timers) {  // stage cycles summed over the block's threads; total from thread 0
    int64_t* row = timers + static_cast<int64_t>(blockIdx.x) * render::kTimers;
    if (threadIdx.x == 0) row[0] = row[1] = 0;
    __syncthreads();
    atomicAdd(reinterpret_cast<unsigned long long*>(row), static_cast<unsigned long long>(stage[0]));
    atomicAdd(reinterpret_cast<unsigned long long*>(row + 1), static_cast<unsigned long long>(stage[1]));
    __syncthreads();
    if (threadIdx.x == 0) row[2] = render::now() - start;
  }
}

void render_tiles_cuda(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat,
                       const at::Tensor& cam_pos, const at::Tensor& cam_mat, const at::Tensor& worlds,
                       const at::Tensor& geom_ids, const at::Tensor& geom_info,
                       const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                       const at::Tensor& bvh_index, const at::Tensor& tris, const at::Tensor& lights,
                       const at::Tensor& headlight, double fovy, double zfar, int64_t samples,
                       bool shadows, int64_t height, int64_t width, int64_t mosaic_cols,
                       bool check_indices, at::Tensor& rgb, at::Tensor& depth, at::Tensor& seg,
                       at::Tensor& world_bounds, at::Tensor& timers) {
  // Check shapes, dtypes, devices before touching the device.
  check_render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, geom_ids, geom_info, geom_param,
                     bvh_bounds, bvh_index, tris, lights, headlight, fovy, zfar, samples, height,
                     width, mosaic_cols, rgb, depth, seg, world_bounds, timers);
  // Guard the device; check index values when asked, unless the stream is being
  // captured (the check copies them to the host).
  const c10::cuda::CUDAGuard guard(geom_xpos.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (check_indices && capture == cudaStreamCaptureStatusNone) {
    check_render_tiles_indices(geom_xpos, worlds, geom_ids, geom_info, bvh_bounds, bvh_index, tris);
  }
  // Scene and outputs.
  render::Scene sc = render::make_scene(geom_xpos, geom_xmat, geom_ids, geom_info, geom_param,
                                        bvh_bounds, bvh_index, tris, lights, headlight);
  const render::Out out = render::make_out(rgb, depth, seg, mosaic_cols);
  const int64_t S = worlds.size(0);
  const int64_t tiles = render::tiles_covered(out, S);
  const int64_t n = tiles * height * width;
  if (n == 0) return;
  // Culling spheres first (when a workspace is given), then the pixels.
  if (world_bounds.numel()) {
    world_bounds_kernel<<<static_cast<unsigned int>(cdiv(S, kThreads)), kThreads, 0, stream>>>(
        sc, worlds.data_ptr<int32_t>(), world_bounds.data_ptr<float>(), S);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sc.world_bounds = world_bounds.data_ptr<float>();
  }
  // Launch the kernel and check the launch.
  const int64_t blocks = cdiv(n, kThreads);
  TORCH_CHECK(blocks <= INT32_MAX, "flycuda.render_tiles: too many pixels (", n, ")");
  const float tan_half = static_cast<float>(std::tan(0.5 * fovy * M_PI / 180.0));
  render_tiles_kernel<<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      sc, out, worlds.data_ptr<int32_t>(), cam_pos.data_ptr<float>(), cam_mat.data_ptr<float>(),
      cam_pos.stride(0), cam_mat.stride(0), S, height, width, tan_half, static_cast<float>(zfar),
      samples, shadows, tiles, timers.numel() ? timers.data_ptr<int64_t>() : nullptr);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("render_tiles", &render_tiles_cuda); }

}  // namespace flycuda
