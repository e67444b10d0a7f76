// flycuda: render_tiles — the device code, compiled by nvcc (cuda/render_tiles.cu)
// and, on the emulated grid, by the host compiler (emu/).
//
// One thread per pixel of each selected world: idx = (s * H + py) * Wd + px,
// kRenderThreads a block, so a block covers a run of pixels of one image row
// (neighbouring rays hit the same geoms and BVH nodes: coherent memory access,
// little divergence). Each thread runs render_pixel (csrc/kernels/render_tiles.h), the
// same code as the CPU impl. The static scene (geom table, BVH, triangles,
// lights) is read with ordinary global loads through the Scene struct; the
// per-world poses are zero-copy views of MuJoCo Warp's geom_xpos/geom_xmat.
#pragma once

#include "render_tiles.h"
#include "platform.h"

#include <climits>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kRenderThreads = static_cast<int>(render::kChunk);  // one block = one timer chunk
constexpr int kRefitThreads = 32;  // small blocks: a few worlds per SM, serial work per thread

// The launch plan, read by the .cu launcher, the CPU twin (its chunks of pixels and
// timer rows are the CUDA blocks) and the emulator driver; no ATen.
struct RenderPlan {
  int64_t pixels;        // tiles * H * Wd: one thread each
  int64_t blocks;        // of the pixels' kernel (= timer rows, = CPU chunks)
  int threads;           // kRenderThreads
  int64_t refit_blocks;  // of the top-level refit (one thread per selected world)
  int refit_threads;     // kRefitThreads
  bool too_large;        // blocks > INT32_MAX: refused
};

FLYCUDA_HOST_DEVICE inline RenderPlan plan_render_tiles(int64_t tiles, int64_t H, int64_t Wd, int64_t S) {
  RenderPlan p;
  p.pixels = tiles * H * Wd;
  p.threads = kRenderThreads;
  p.blocks = (p.pixels + kRenderThreads - 1) / kRenderThreads;
  p.refit_threads = kRefitThreads;
  p.refit_blocks = (S + kRefitThreads - 1) / kRefitThreads;
  p.too_large = p.blocks > INT32_MAX;
  return p;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

// One thread per selected world s: refits its top-level BVH (render::refit_top)
// into rows [s, :, :] of top_bounds (a world selected twice gets two copies: no
// two threads write one row). A few hundred boxes per world: the pixels' kernel
// then reads them from L2.
static __global__ void refit_top_kernel(render::Scene sc, const int32_t* __restrict__ worlds,  // [S]
                                        float* __restrict__ top_bounds,                       // [S, Nt, 6]
                                        int64_t S) {
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= S) return;
  render::refit_top(sc, render::tile_world(worlds, s, S, sc.nworld), top_bounds + 6 * sc.ntop * s);
}

static __global__ void render_tiles_kernel(render::Scene sc, render::Out out,
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
    const int64_t w = render::tile_world(worlds, s, S, sc.nworld);
    if (w < 0) {  // an empty mosaic cell, or a bad world id
      render::clear_pixel(out, s, S, py, px, H, Wd);
    } else {
      render::render_pixel(sc, out, s, w, py, px, H, Wd, cam_pos + w * cp_s0, cam_mat + w * cm_s0,
                           tan_half_fovy, zfar, samples, shadows, timers ? stage : nullptr);
    }
  }
  if (timers) {  // stage times summed over the block's threads; total from thread 0
    int64_t* row = timers + static_cast<int64_t>(blockIdx.x) * render::kTimers;
    if (threadIdx.x == 0) row[0] = row[1] = 0;
    __syncthreads();
    atomicAdd(reinterpret_cast<unsigned long long*>(row), static_cast<unsigned long long>(stage[0]));
    atomicAdd(reinterpret_cast<unsigned long long*>(row + 1), static_cast<unsigned long long>(stage[1]));
    __syncthreads();
    if (threadIdx.x == 0) row[2] = render::now() - start;
  }
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
