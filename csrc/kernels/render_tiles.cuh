// flycuda: render_tiles — the kernels and their launch plan, compiled by nvcc
// (cuda/render_tiles.cu) and, on the emulated grid, by the host compiler (emu/);
// the CPU twin (csrc/render/render_tiles.cpp) walks the same plan's blocks and threads.
//
// 1. refit_top_kernel: one block of 32 threads per selected world: its threads
//    compute the world boxes of the top level's leaf children in parallel (a geom
//    pose each), then the internal children's boxes level by level in shared memory.
// 2. render_tiles_kernel: one thread per pixel (render/pixel.h render_pixel, the
//    CPU impl's code). A block is 16 x 8 pixels of one image, each warp an 8 x 4
//    patch (neighbouring rays meet the same nodes: coherent loads, little
//    divergence); with a pixel list, 128 consecutive list entries. The block
//    first culls the top level against its rays' pyramid (render/cull.h: its
//    pixel rectangle reduced in shared memory, the leaves one node per thread,
//    then thread 0 propagates the flags up the tree in shared memory).
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

// Image block `block` (no pixel list): its tile t and the top-left pixel (x, y)
// of its 16 x 8 patch.
struct BlockOrigin {
  int32_t t, x, y;
};

FLYCUDA_HOST_DEVICE inline BlockOrigin image_block(const RenderPlan& p, int64_t block) {
  const int64_t per = p.blocks_x * p.blocks_y;
  BlockOrigin o;
  o.t = static_cast<int32_t>(block / per);
  o.y = static_cast<int32_t>((block % per) / p.blocks_x) * kTileH;
  o.x = static_cast<int32_t>(block % p.blocks_x) * kTileW;
  return o;
}

// Thread `thread` of block `block`: its tile t, pixel q (py * Wd + px, or a list
// position) and (py, px); false for a thread past the image's edge or the list's end.
FLYCUDA_HOST_DEVICE inline bool block_pixel(const RenderPlan& p, const render::View& v, int64_t block, int thread,
                                            int32_t& t, int32_t& q, int32_t& py, int32_t& px) {
  if (v.npix > 0) {
    const int64_t i = block * kRenderThreads + thread;
    const int64_t ti = i <= INT32_MAX ? static_cast<int32_t>(i) / v.npix : i / v.npix;  // 32-bit division if it fits
    if (ti >= p.tiles) return false;
    t = static_cast<int32_t>(ti);
    q = static_cast<int32_t>(i - ti * v.npix);
    const int32_t id = v.pixels[q];
    py = id / v.width;
    px = id % v.width;
    return true;
  }
  const BlockOrigin o = image_block(p, block);
  const int warp = thread / 32, lane = thread % 32;
  t = o.t;
  px = o.x + (warp % 2) * kWarpW + lane % kWarpW;
  py = o.y + (warp / 2) * kWarpH + lane / kWarpW;
  q = py * v.width + px;
  return px < v.width && py < v.height;
}

// Are all of block `block`'s pixels skipped images' (worlds[s] = -1)? Then the untimed
// kernel returns before culling: an eyes' re-render of the reset worlds only costs the other
// blocks nothing but their launch. From the block index alone, so uniform over the block
// (its threads return together, before any barrier). A pixel-list block may span tiles: all
// of them must be skipped.
FLYCUDA_HOST_DEVICE inline bool block_skipped(const RenderPlan& p, const render::View& v, int64_t block) {
  if (v.npix > 0) {
    const int64_t first = block * kRenderThreads / v.npix;
    int64_t last = ((block + 1) * kRenderThreads - 1) / v.npix;
    last = last < p.tiles - 1 ? last : p.tiles - 1;
    for (int64_t t = first; t <= last; ++t) {
      if (!render::tile_skipped(v, static_cast<int32_t>(t))) return false;
    }
    return first <= last;
  }
  return render::tile_skipped(v, image_block(p, block).t);
}

// One thread's pixel: rendered, or cleared where no world is shown. vis: the
// block's culling flags (render/cull.h), or null.
template <bool Timed>
FLYCUDA_HOST_DEVICE inline void run_pixel(const render::RenderArgs& a, const RenderPlan& p, int64_t block,
                                          int thread, int64_t* stage, const uint8_t* vis) {
  int32_t t, q, py, px;
  if (!block_pixel(p, a.v, block, thread, t, q, py, px) || render::tile_skipped(a.v, t)) return;
  const int32_t w = render::tile_world(a.v, t, a.sc.nworld);
  if (w < 0) {
    render::clear_pixel(a.v, t, q, py, px);
  } else {
    render::render_pixel<Timed>(a.sc, a.v, t, w, q, py, px, stage, vis);
  }
}

// --- per-block culling (render/cull.h): the kernel reduces the block's pixel
// rectangle in shared memory, the CPU twin in a loop; both then flag the nodes.

// Thread `thread`'s part of its block's pixel rectangle (empty past the edge or the list).
FLYCUDA_HOST_DEVICE inline render::PixelRect thread_rect(const RenderPlan& p, const render::View& v, int64_t block,
                                                         int thread) {
  int32_t t, q, py, px;
  return block_pixel(p, v, block, thread, t, q, py, px) ? render::pixel_rect(t, px, py) : render::empty_rect();
}

// The pixel rectangle of image block `block` (no pixel list): its 16 x 8 patch
// clipped to the image, without visiting its threads.
// With a pixel list (no patches): empty, for the caller to reduce its threads' pixels into.
FLYCUDA_HOST_DEVICE inline render::PixelRect image_block_rect(const RenderPlan& p, const render::View& v,
                                                              int64_t block) {
  if (v.npix > 0) return render::empty_rect();
  const BlockOrigin o = image_block(p, block);
  render::PixelRect r = render::pixel_rect(o.t, o.x, o.y);
  r.x1 = o.x + kTileW < v.width ? o.x + kTileW - 1 : v.width - 1;
  r.y1 = o.y + kTileH < v.height ? o.y + kTileH - 1 : v.height - 1;
  return r;
}

// Does a block with pixel rectangle r cull, and with which pyramid f? Not without
// a top level, for pixels of two tiles, a tile that shows no world, or a singular
// camera matrix.
FLYCUDA_HOST_DEVICE inline bool block_pyramid(const render::RenderArgs& a, const render::PixelRect& r,
                                              render::Frustum& f) {
  if (a.sc.ntop <= 0 || r.t0 != r.t1) return false;
  const int32_t w = render::tile_world(a.v, r.t0, a.sc.nworld);
  return w >= 0 && render::block_frustum(a.v, w, r.t0 % a.v.ncam, r, f);
}

// The top-level nodes a block flags (those below kCullNodes).
FLYCUDA_HOST_DEVICE inline int32_t culled_nodes(const render::Scene& sc) {
  return sc.ntop < render::kCullNodes ? sc.ntop : render::kCullNodes;
}

// Phase 1 of the flags for nodes j0, j0 + dj, ... of the block with pixel
// rectangle r (one tile t) and pyramid f: the leaves against the pyramid.
FLYCUDA_HOST_DEVICE inline void cull_leaf_nodes(const render::RenderArgs& a, const render::PixelRect& r,
                                                const render::Frustum& f, int32_t j0, int32_t dj, uint8_t* vis) {
  const float* top = render::tile_top(a.sc, a.v, r.t0);
  const int32_t n = culled_nodes(a.sc);
  for (int32_t j = j0; j < n; j += dj) render::cull_leaves(a.sc, f, top, j, vis);
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

// Top levels of up to this many nodes are refit in shared memory (12 KiB of boxes).
constexpr int kRefitSharedNodes = 256;

// Node heights for the level-parallel refit, in shared memory: 1 + the largest
// height of a node's internal children (0 without any; a link that breaks the
// layout counts as none). Thread 0, bottom-up; returns the largest height.
static __device__ int32_t refit_heights(const render::Scene& sc, int32_t* height) {
  int32_t top = 0;
  for (int32_t j = sc.ntop - 1; j >= 0; --j) {
    int32_t h = 0;
    for (int i = 0; i < 2; ++i) {
      const int32_t link = sc.top_links[2 * static_cast<int64_t>(j) + i];
      if (!render::is_leaf(link) && link > j && link < sc.ntop && height[link] > h) h = height[link];
    }
    height[j] = h + 1;
    top = height[j] > top ? height[j] : top;
  }
  return top;
}

// One block per selected world s: refits its top level into rows [s] of
// top_boxes (a world selected twice gets two copies: no two blocks write one row).
// The leaves' world boxes in parallel (a geom pose each); then the unions level
// by level, every node of one height at once (its children are lower, done),
// in shared memory, and the rows out to global memory. A top level past
// kRefitSharedNodes is refit in global memory, its unions by thread 0.
static __global__ void refit_top_kernel(render::RenderArgs a) {
  FLYCUDA_SHARED(float, rows, kRefitSharedNodes * render::kBoxCols);
  FLYCUDA_SHARED(int32_t, height, kRefitSharedNodes + 1);  // + the largest height
  const int32_t s = blockIdx.x;
  const int32_t w = s < a.v.nsel ? a.v.worlds[s] : -1;
  if (w == render::kSkipImage) return;  // a skipped image: its row is not read (the whole block returns)
  const int32_t world = (w >= 0 && w < a.sc.nworld) ? w : -1;
  float* boxes = a.v.top_boxes + static_cast<int64_t>(render::kBoxCols) * a.sc.ntop * s;
  const int32_t n = a.sc.ntop;
  if (n > kRefitSharedNodes) {  // uniform over the grid
    for (int32_t j = threadIdx.x; j < n; j += blockDim.x) render::refit_leaves(a.sc, world, j, boxes);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int32_t j = n - 1; j >= 0; --j) render::refit_unions(a.sc, j, boxes);
    }
    return;
  }
  for (int32_t j = threadIdx.x; j < n; j += blockDim.x) render::refit_leaves(a.sc, world, j, rows);
  if (threadIdx.x == 0) height[kRefitSharedNodes] = refit_heights(a.sc, height);
  __syncthreads();
  const int32_t levels = height[kRefitSharedNodes];
  for (int32_t h = 1; h <= levels; ++h) {
    for (int32_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (height[j] == h) render::refit_unions(a.sc, j, rows);
    }
    __syncthreads();
  }
  for (int32_t i = threadIdx.x; i < n * render::kBoxCols; i += blockDim.x) boxes[i] = rows[i];
}

// The block's culling flags, in vis (shared, 2 * kCullNodes), or null where the
// block does not cull. red: shared scratch of 6 * kRenderThreads int32 for the
// reduction of the pixel rectangle (field k of thread i at k * kRenderThreads + i).
// Every thread of the block calls it (its barriers are block-wide).
static __device__ const uint8_t* block_cull(const render::RenderArgs& a, const RenderPlan& p, uint8_t* vis,
                                            int32_t* red) {
  const int tid = threadIdx.x;
  render::PixelRect r = image_block_rect(p, a.v, blockIdx.x);
  if (a.v.npix > 0) {  // a pixel list (uniform over the grid): reduce the threads' pixels
    const render::PixelRect mine = thread_rect(p, a.v, blockIdx.x, tid);
    const int32_t fields[6] = {mine.t0, mine.t1, mine.x0, mine.x1, mine.y0, mine.y1};
    for (int k = 0; k < 6; ++k) red[k * kRenderThreads + tid] = fields[k];
    __syncthreads();
    for (int s = kRenderThreads / 2; s > 0; s >>= 1) {  // tree reduction: reads >= s, writes < s
      if (tid < s) {
        for (int k = 0; k < 6; ++k) {
          const int32_t x = red[k * kRenderThreads + tid], y = red[k * kRenderThreads + tid + s];
          red[k * kRenderThreads + tid] = (k % 2 == 0) ? (y < x ? y : x) : (y > x ? y : x);
        }
      }
      __syncthreads();
    }
    r.t0 = red[0];
    r.t1 = red[kRenderThreads];
    r.x0 = red[2 * kRenderThreads];
    r.x1 = red[3 * kRenderThreads];
    r.y0 = red[4 * kRenderThreads];
    r.y1 = red[5 * kRenderThreads];
  }
  render::Frustum f;
  const bool on = block_pyramid(a, r, f);
  if (on) cull_leaf_nodes(a, r, f, tid, kRenderThreads, vis);
  __syncthreads();
  if (on && tid == 0) render::cull_unions(a.sc, culled_nodes(a.sc), vis);  // shared memory only
  __syncthreads();
  return on ? vis : nullptr;
}

// The pixels. Timed (a.v.timers set): in-kernel stage timers per block.
static __global__ void render_tiles_kernel(render::RenderArgs a, RenderPlan p) {
  FLYCUDA_SHARED(uint8_t, vis, 2 * render::kCullNodes);
  FLYCUDA_SHARED(int32_t, red, 6 * kRenderThreads);
  if (block_skipped(p, a.v, blockIdx.x)) return;  // block-uniform, before block_cull's barriers
  const uint8_t* cull = block_cull(a, p, vis, red);
  run_pixel<false>(a, p, blockIdx.x, threadIdx.x, nullptr, cull);
}

static __global__ void render_tiles_timed_kernel(render::RenderArgs a, RenderPlan p) {
  FLYCUDA_SHARED(uint8_t, vis, 2 * render::kCullNodes);
  FLYCUDA_SHARED(int32_t, red, 6 * kRenderThreads);
  const int64_t start = render::now();
  const uint8_t* cull = block_cull(a, p, vis, red);
  int64_t stage[4] = {0, 0, 0, 0};
  run_pixel<true>(a, p, blockIdx.x, threadIdx.x, stage, cull);
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

// The launches (platform.h, "launch templates"), in order on one stream: the refit of
// each selected world's top level, then the pixels (timed or not). static, as refit_top_kernel
// is: each translation unit that launches them has its own.
template <class Launcher>
static void launch_render_tiles(Launcher&& launch, const render::RenderArgs& a, const RenderPlan& plan) {
  if (a.v.nsel == 0 || plan.blocks == 0) return;
  if (a.sc.ntop > 0) {
    launch(refit_top_kernel, dim3(static_cast<unsigned int>(plan.refit_blocks)), dim3(plan.refit_threads), 0, a);
  }
  if (a.v.timers) {
    launch(render_tiles_timed_kernel, dim3(static_cast<unsigned int>(plan.blocks)), dim3(plan.threads), 0, a, plan);
  } else {
    launch(render_tiles_kernel, dim3(static_cast<unsigned int>(plan.blocks)), dim3(plan.threads), 0, a, plan);
  }
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
