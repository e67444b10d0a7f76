// flycuda: render_tiles — the kernels and their launch plan, compiled by nvcc
// (cuda/render_tiles.cu) and, on the emulated grid, by the host compiler (emu/);
// the CPU twin (render_tiles.cpp) walks the same plan's blocks and threads.
//
// 1. refit_top_kernel: one block of 32 threads per selected world: its threads
//    compute the world boxes of the top level's leaf children in parallel (a geom
//    pose each), then thread 0 forms the internal children's boxes bottom-up.
// 2. render_tiles_kernel: one thread per pixel (render/pixel.h render_pixel, the
//    CPU impl's code). A block is 16 x 8 pixels of one image, each warp an 8 x 4
//    patch (neighbouring rays meet the same nodes: coherent loads, little
//    divergence); with a pixel list, 128 consecutive list entries.
#pragma once

#include "platform.h"
#include "render/pixel.h"

#include <climits>
#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kRenderThreads = 128;  // one block = one timer row = one CPU work item
constexpr int kTileW = 16;  // pixels of a block: 16 x 8, 4 warps of 8 x 4
constexpr int kTileH = 8;
constexpr int kWarpW = 8;
constexpr int kWarpH = 4;
constexpr int kRefitThreads = 32;    // one block per selected world

// The launch plan, read by the .cu launcher, the CPU twin and the emulator driver; no ATen.
struct RenderPlan {
  int64_t tiles;         // images (S * C, or every mosaic cell)
  int64_t blocks_x, blocks_y;  // blocks across and down one image (0 with a pixel list)
  int64_t blocks;        // of the pixels' kernel (= timer rows, = CPU work items)
  int threads;           // kRenderThreads
  int64_t refit_blocks;  // S
  int refit_threads;     // kRefitThreads
  bool too_large;        // blocks or refit blocks > INT32_MAX, or a tile index past int32: refused
};

FLYCUDA_HOST_DEVICE inline RenderPlan plan_render_tiles(int64_t tiles, int64_t H, int64_t Wd, int64_t P,
                                                        int64_t S) {
  RenderPlan p;
  p.tiles = tiles;
  p.threads = kRenderThreads;
  if (P > 0) {
    p.blocks_x = p.blocks_y = 0;
    p.blocks = (tiles * P + kRenderThreads - 1) / kRenderThreads;
  } else {
    p.blocks_x = (Wd + kTileW - 1) / kTileW;
    p.blocks_y = (H + kTileH - 1) / kTileH;
    p.blocks = tiles * p.blocks_x * p.blocks_y;
  }
  p.refit_threads = kRefitThreads;
  p.refit_blocks = S;
  p.too_large = p.blocks > INT32_MAX || S > INT32_MAX || tiles > INT32_MAX || P > INT32_MAX ||
                tiles * (P > 0 ? P : H * Wd) > (int64_t{1} << 40);
  return p;
}

// Thread `thread` of block `block`: its tile t, pixel q (py * Wd + px, or a list
// position) and (py, px); false for a thread past the image's edge or the list's end.
FLYCUDA_HOST_DEVICE inline bool block_pixel(const RenderPlan& p, const render::View& v, int64_t block, int thread,
                                            int32_t& t, int32_t& q, int32_t& py, int32_t& px) {
  if (v.npix > 0) {
    const int64_t i = block * kRenderThreads + thread;
    if (i / v.npix >= p.tiles) return false;
    t = static_cast<int32_t>(i / v.npix);
    q = static_cast<int32_t>(i % v.npix);
    const int32_t id = v.pixels[q];
    py = id / v.width;
    px = id % v.width;
    return true;
  }
  const int64_t per = p.blocks_x * p.blocks_y;
  t = static_cast<int32_t>(block / per);
  const int64_t by = (block % per) / p.blocks_x, bx = block % p.blocks_x;
  const int warp = thread / 32, lane = thread % 32;
  px = static_cast<int32_t>(bx * kTileW + (warp % 2) * kWarpW + lane % kWarpW);
  py = static_cast<int32_t>(by * kTileH + (warp / 2) * kWarpH + lane / kWarpW);
  q = py * v.width + px;
  return px < v.width && py < v.height;
}

// One thread's pixel: rendered, or cleared where no world is shown.
template <bool Timed>
FLYCUDA_HOST_DEVICE inline void run_pixel(const render::RenderArgs& a, const RenderPlan& p, int64_t block,
                                          int thread, int64_t* stage) {
  int32_t t, q, py, px;
  if (!block_pixel(p, a.v, block, thread, t, q, py, px)) return;
  const int32_t w = render::tile_world(a.v, t, a.sc.nworld);
  if (w < 0) {
    render::clear_pixel(a.v, t, q, py, px);
  } else {
    render::render_pixel<Timed>(a.sc, a.v, t, w, q, py, px, stage);
  }
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

// One block per selected world s: refits its top level into rows [s] of
// top_boxes (a world selected twice gets two copies: no two blocks write one row).
static __global__ void refit_top_kernel(render::RenderArgs a) {
  const int32_t s = blockIdx.x;
  const int32_t w = s < a.v.nsel ? a.v.worlds[s] : -1;
  const int32_t world = (w >= 0 && w < a.sc.nworld) ? w : -1;
  float* boxes = a.v.top_boxes + static_cast<int64_t>(render::kBoxCols) * a.sc.ntop * s;
  for (int32_t j = threadIdx.x; j < a.sc.ntop; j += blockDim.x) render::refit_leaves(a.sc, world, j, boxes);
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int32_t j = a.sc.ntop - 1; j >= 0; --j) render::refit_unions(a.sc, j, boxes);
  }
}

// The pixels. Timed (a.v.timers set): in-kernel stage timers per block.
static __global__ void render_tiles_kernel(render::RenderArgs a, RenderPlan p) {
  run_pixel<false>(a, p, blockIdx.x, threadIdx.x, nullptr);
}

static __global__ void render_tiles_timed_kernel(render::RenderArgs a,
                                                                                 RenderPlan p) {
  const int64_t start = render::now();
  int64_t stage[4] = {0, 0, 0, 0};
  run_pixel<true>(a, p, blockIdx.x, threadIdx.x, stage);
  // Stage times and counts summed over the block's threads; total from thread 0.
  int64_t* row = a.v.timers + static_cast<int64_t>(blockIdx.x) * render::kTimers;
  if (threadIdx.x == 0) row[0] = row[1] = row[3] = row[4] = 0;
  __syncthreads();
  atomicAdd(reinterpret_cast<unsigned long long*>(row), static_cast<unsigned long long>(stage[0]));
  atomicAdd(reinterpret_cast<unsigned long long*>(row + 1), static_cast<unsigned long long>(stage[1]));
  atomicAdd(reinterpret_cast<unsigned long long*>(row + 3), static_cast<unsigned long long>(stage[2]));
  atomicAdd(reinterpret_cast<unsigned long long*>(row + 4), static_cast<unsigned long long>(stage[3]));
  __syncthreads();
  if (threadIdx.x == 0) row[2] = render::now() - start;
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
