// flycuda: render_tiles — the CPU impl: the launch plan's blocks in parallel, each
// block's threads in order, four at a time as one ray packet (render_packet.h,
// the kernels' per-pixel helpers around a 4-wide walk; with timers, one at a time
// through the kernels' own run_pixel, whose per-ray counts the timers report); the
// top-level refit in the kernel's two phases. Checks and RenderArgs: render_args.cpp.
#include "render/render_tiles.h"

#include "common.h"
#include "render/render_packet.h"

namespace flycuda {
namespace {

#if defined(FLYCUDA_PACKETS)
static_assert(kernels::kRenderThreads % render::kLanes == 0, "a block's threads run as whole packets");
#endif

void refit_top_cpu(const render::RenderArgs& a) {
  torch::stable::parallel_for(0, a.v.nsel, /*grain_size=*/16, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const int64_t w = a.v.worlds[s];
      if (w == render::kSkipImage) continue;  // as the kernel: a skipped image's row is not read
      const int64_t world = (w >= 0 && w < a.sc.nworld) ? w : -1;
      float* boxes = a.v.top_boxes + static_cast<int64_t>(render::kBoxCols) * a.sc.ntop * s;
      for (int32_t j = 0; j < a.sc.ntop; ++j) render::refit_leaves(a.sc, world, j, boxes);
      for (int32_t j = a.sc.ntop - 1; j >= 0; --j) render::refit_unions(a.sc, j, boxes);
    }
  });
}

// The kernel's block_cull, with the block's threads in a loop: the culling flags
// in vis, or null where the block does not cull.
const uint8_t* block_cull(const render::RenderArgs& a, const kernels::RenderPlan& plan, int64_t block,
                          uint8_t* vis) {
  render::PixelRect r = kernels::image_block_rect(plan, a.v, block);
  if (a.v.npix > 0) {
    for (int thread = 0; thread < plan.threads; ++thread) {
      render::rect_merge(r, kernels::thread_rect(plan, a.v, block, thread));
    }
  }
  render::Frustum f;
  if (!kernels::block_pyramid(a, r, f)) return nullptr;
  kernels::cull_leaf_nodes(a, r, f, 0, 1, vis);
  render::cull_unions(a.sc, kernels::culled_nodes(a.sc), vis);
  return vis;
}

#if defined(FLYCUDA_PACKETS)
// Threads thread0 .. thread0 + 3 of a block: run_pixel<false> for each, the pixels
// of one tile as one packet (a lane of another tile, as a pixel list may start one
// mid-block, on its own).
void run_quad(const render::RenderArgs& a, const kernels::RenderPlan& plan, int64_t block, int thread0,
              const uint8_t* vis) {
  int32_t t[render::kLanes], q[render::kLanes], py[render::kLanes], px[render::kLanes];
  uint32_t lanes = 0;
  int32_t tile = -1, world = -1;
  for (int i = 0; i < render::kLanes; ++i) {
    if (!kernels::block_pixel(plan, a.v, block, thread0 + i, t[i], q[i], py[i], px[i]) ||
        render::tile_skipped(a.v, t[i])) {
      continue;
    }
    const int32_t w = render::tile_world(a.v, t[i], a.sc.nworld);
    if (w < 0) {
      render::clear_pixel(a.v, t[i], q[i], py[i], px[i]);
    } else if (tile < 0 || t[i] == tile) {
      tile = t[i], world = w;
      lanes |= 1u << i;
    } else {
      render::render_pixel<false>(a.sc, a.v, t[i], w, q[i], py[i], px[i], nullptr, vis);
    }
  }
  if (lanes) render::render_pixels4(a.sc, a.v, tile, world, q, py, px, lanes, vis);
}
#endif

// The threads of a block: timed, one at a time (the kernel's run_pixel, which counts
// each ray's nodes and triangles); else as packets of four where the compiler has them.
void run_block(const render::RenderArgs& a, const kernels::RenderPlan& plan, int64_t block, int64_t* stage,
               const uint8_t* vis) {
#if defined(FLYCUDA_PACKETS)
  if (!stage) {
    for (int thread = 0; thread < plan.threads; thread += render::kLanes) run_quad(a, plan, block, thread, vis);
    return;
  }
#endif
  for (int thread = 0; thread < plan.threads; ++thread) {
    if (stage) {
      kernels::run_pixel<true>(a, plan, block, thread, stage, vis);
    } else {
      kernels::run_pixel<false>(a, plan, block, thread, nullptr, vis);
    }
  }
}

void render_tiles_cpu(FLYCUDA_RENDER_TILES_PARAMS) {
  kernels::RenderPlan plan;
  const render::RenderArgs a = render_args(FLYCUDA_RENDER_TILES_ARGS, check, plan);
  if (a.v.nsel == 0) return;
  if (a.sc.ntop > 0) refit_top_cpu(a);
  int64_t* tim = a.v.timers;
  torch::stable::parallel_for(0, plan.blocks, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    uint8_t vis[2 * render::kCullNodes];
    for (int64_t block = begin; block < end; ++block) {
      if (!tim && kernels::block_skipped(plan, a.v, block)) continue;  // as the untimed kernel
      int64_t stage[4] = {0, 0, 0, 0};
      const int64_t start = tim ? render::now() : 0;
      const uint8_t* cull = block_cull(a, plan, block, vis);
      run_block(a, plan, block, tim ? stage : nullptr, cull);
      if (tim) {
        int64_t* row = tim + block * render::kTimers;
        row[0] = stage[0], row[1] = stage[1], row[3] = stage[2], row[4] = stage[3];
        row[2] = render::now() - start;
      }
    }
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("render_tiles", TORCH_BOX(&render_tiles_cpu)); }

}  // namespace flycuda
