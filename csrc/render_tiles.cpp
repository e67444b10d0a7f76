// flycuda: render_tiles — the CPU impl: the launch plan's blocks in parallel, each
// block's threads in order, running the kernels' own per-pixel code
// (kernels/render_tiles.cuh run_pixel); the top-level refit in the kernel's two
// phases. Checks and RenderArgs: render_args.cpp.
#include "render_args.h"

#include "common.h"

namespace flycuda {
namespace {

void refit_top_cpu(const render::RenderArgs& a) {
  torch::stable::parallel_for(0, a.v.nsel, /*grain_size=*/16, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      const int64_t w = a.v.worlds[s];
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

void render_tiles_cpu(FLYCUDA_RENDER_TILES_PARAMS) {
  kernels::RenderPlan plan;
  const render::RenderArgs a = render_args(FLYCUDA_RENDER_TILES_ARGS, check, plan);
  if (a.v.nsel == 0) return;
  if (a.sc.ntop > 0) refit_top_cpu(a);
  int64_t* tim = a.v.timers;
  torch::stable::parallel_for(0, plan.blocks, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    uint8_t vis[2 * render::kCullNodes];
    for (int64_t block = begin; block < end; ++block) {
      int64_t stage[4] = {0, 0, 0, 0};
      const int64_t start = tim ? render::now() : 0;
      const uint8_t* cull = block_cull(a, plan, block, vis);
      for (int thread = 0; thread < plan.threads; ++thread) {
        if (tim) {
          kernels::run_pixel<true>(a, plan, block, thread, stage, cull);
        } else {
          kernels::run_pixel<false>(a, plan, block, thread, nullptr, cull);
        }
      }
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
