// flycuda: render_tiles — argument checks and the CPU impl (parallel over image rows).
// The per-pixel code is csrc/kernels/render_tiles.h, shared with the CUDA impl.
#include "checks.h"
#include "common.h"
#include "kernels/render_tiles.cuh"
#include "render_views.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace flycuda {

namespace {

void check_f32_rows(const char* kOpName, const at::Tensor& t, const char* name, int64_t dim,
                    int64_t last) {
  FLYCUDA_CHECK(t.scalar_type() == at::kFloat, "argument '", name, "' must have dtype Float, got ",
                t.scalar_type());
  FLYCUDA_CHECK(t.dim() == dim && t.size(dim - 1) == last, "argument '", name, "' must be a ", dim,
                "-D tensor with last dim ", last, ", got shape ", t.sizes());
  FLYCUDA_CHECK(t.numel() == 0 || t.stride(dim - 1) == 1, "argument '", name,
                "' must be contiguous in its last dim, got strides ", t.strides());
}

void check_static(const char* kOpName, const at::Tensor& t, const char* name, at::ScalarType dt,
                  int64_t cols) {
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ",
                t.scalar_type());
  FLYCUDA_CHECK(t.dim() == (cols > 0 ? 2 : 1) && (cols <= 0 || t.size(1) == cols), "argument '",
                name, "' must have shape [N", cols > 0 ? ", " + std::to_string(cols) : std::string(),
                "], got ", t.sizes());
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous");
}

void check_output(const char* kOpName, const at::Tensor& t, const char* name, at::ScalarType dt,
                  at::IntArrayRef shape) {
  if (t.numel() == 0) return;  // not requested
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ",
                t.scalar_type());
  FLYCUDA_CHECK(t.sizes() == shape, "argument '", name, "' must have shape ", shape, ", got ",
                t.sizes());
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous");
}

// The top level is one tree over the render list: node 0 the root, every other
// node linked from exactly one earlier node (so all are reachable and the refit
// runs bottom-up in one pass), no deeper than the traversal stack; each bounded
// geom (geom_param[k, 10] = rbound > 0) in exactly one leaf (k, -1), each
// unbounded one (a plane) in `unbounded`.
void check_top_level(const at::Tensor& geom_param, const at::Tensor& top_index, const at::Tensor& unbounded) {
  constexpr const char* kOpName = "render_tiles";
  const at::Tensor param = geom_param.to(at::kCPU).contiguous(), top = top_index.to(at::kCPU).contiguous(),
                   unb = unbounded.to(at::kCPU).contiguous();
  const int64_t Gr = param.size(0), Nt = top.size(0);
  std::vector<int64_t> leaves(Gr, 0), planes(Gr, 0), links(Nt, 0), depth(Nt, 0);
  const int32_t* tx = top.data_ptr<int32_t>();
  for (int64_t n = 0; n < Nt; ++n) {
    const int32_t a = tx[2 * n], c = tx[2 * n + 1];
    const bool ok = c < 0 ? (c == -1 && a >= 0 && a < Gr) : (a > n && c > n && a < Nt && c < Nt && a != c);
    FLYCUDA_CHECK(ok, "argument 'top_index' node ", n, " = (", a, ", ", c, ") is neither a leaf (k, -1) "
                  "with k in [0, ", Gr, ") nor links to two distinct later nodes in [0, ", Nt, ")");
    if (c < 0) {
      ++leaves[a];
      continue;
    }
    for (const int32_t kid : {a, c}) {
      ++links[kid];
      depth[kid] = depth[n] + 1;
    }
    FLYCUDA_CHECK(depth[n] + 1 < render::kTopStack, "argument 'top_index' is deeper than the traversal stack (",
                  render::kTopStack - 1, " levels) at node ", n);
  }
  for (int64_t n = 0; n < Nt; ++n) {
    FLYCUDA_CHECK(links[n] == (n == 0 ? 0 : 1), "argument 'top_index' node ", n, " is linked from ", links[n],
                  " nodes, expected ", (n == 0 ? "0 (the root)" : "1 (one tree)"));
  }
  const int32_t* ux = unb.data_ptr<int32_t>();
  for (int64_t u = 0; u < unb.numel(); ++u) {
    FLYCUDA_CHECK(ux[u] >= 0 && ux[u] < Gr, "argument 'unbounded' entry ", u, " = ", ux[u],
                  " is outside [0, ", Gr, ")");
    ++planes[ux[u]];
  }
  const float* pp = param.data_ptr<float>();
  for (int64_t k = 0; k < Gr; ++k) {
    const bool bounded = pp[render::kParam * k + 10] > 0.f;
    FLYCUDA_CHECK(leaves[k] == (bounded ? 1 : 0) && planes[k] == (bounded ? 0 : 1), "render-list geom ", k,
                  (bounded ? " (bounded: rbound > 0)" : " (unbounded: rbound <= 0)"), " must appear once, in ",
                  (bounded ? "a 'top_index' leaf" : "'unbounded'"), ", got ", leaves[k], " leaves and ", planes[k],
                  " 'unbounded' entries");
  }
}

}  // namespace

void check_render_tiles(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat,
                        const at::Tensor& cam_pos, const at::Tensor& cam_mat,
                        const at::Tensor& worlds, const at::Tensor& geom_ids,
                        const at::Tensor& geom_info, const at::Tensor& geom_param,
                        const at::Tensor& bvh_bounds, const at::Tensor& bvh_index,
                        const at::Tensor& tris, const at::Tensor& top_index,
                        const at::Tensor& unbounded, const at::Tensor& lights,
                        const at::Tensor& headlight, double fovy, double zfar, int64_t samples,
                        int64_t height, int64_t width, int64_t mosaic_cols, const at::Tensor& rgb,
                        const at::Tensor& depth, const at::Tensor& seg,
                        const at::Tensor& top_bounds, const at::Tensor& timers) {
  constexpr const char* kOpName = "render_tiles";
  // Per-world poses: geom_xpos [W, G, 3], geom_xmat [W, G, 9], cam_pos [W, 3], cam_mat [W, 9].
  check_f32_rows(kOpName, geom_xpos, "geom_xpos", 3, 3);
  check_f32_rows(kOpName, geom_xmat, "geom_xmat", 3, 9);
  const int64_t W = geom_xpos.size(0), G = geom_xpos.size(1);
  FLYCUDA_CHECK(geom_xmat.size(0) == W && geom_xmat.size(1) == G, "argument 'geom_xmat' must have shape [",
                W, ", ", G, ", 9] like geom_xpos, got ", geom_xmat.sizes());
  check_f32_rows(kOpName, cam_pos, "cam_pos", 2, 3);
  check_f32_rows(kOpName, cam_mat, "cam_mat", 2, 9);
  CHECK_SIZE(cam_pos, 0, W);
  CHECK_SIZE(cam_mat, 0, W);
  // Selection and static scene.
  check_static(kOpName, worlds, "worlds", at::kInt, 0);
  check_static(kOpName, geom_ids, "geom_ids", at::kInt, 0);
  const int64_t Gr = geom_ids.size(0);
  check_static(kOpName, geom_info, "geom_info", at::kInt, 2);
  check_static(kOpName, geom_param, "geom_param", at::kFloat, render::kParam);
  CHECK_SIZE(geom_info, 0, Gr);
  CHECK_SIZE(geom_param, 0, Gr);
  check_static(kOpName, bvh_bounds, "bvh_bounds", at::kFloat, 6);
  check_static(kOpName, bvh_index, "bvh_index", at::kInt, 2);
  CHECK_SIZE(bvh_index, 0, bvh_bounds.size(0));
  check_static(kOpName, tris, "tris", at::kFloat, 9);
  check_static(kOpName, top_index, "top_index", at::kInt, 2);
  FLYCUDA_CHECK(top_index.size(0) < INT32_MAX, "argument 'top_index' must have fewer than 2^31 - 1 rows, got ",
                top_index.size(0));
  check_static(kOpName, unbounded, "unbounded", at::kInt, 0);
  check_static(kOpName, lights, "lights", at::kFloat, render::kLight);
  check_static(kOpName, headlight, "headlight", at::kFloat, 0);
  CHECK_SIZE(headlight, 0, 6);
  const std::pair<const char*, const at::Tensor*> others[] = {
      {"geom_xmat", &geom_xmat}, {"cam_pos", &cam_pos}, {"cam_mat", &cam_mat}, {"worlds", &worlds},
      {"geom_ids", &geom_ids}, {"geom_info", &geom_info}, {"geom_param", &geom_param},
      {"bvh_bounds", &bvh_bounds}, {"bvh_index", &bvh_index}, {"tris", &tris}, {"top_index", &top_index},
      {"unbounded", &unbounded}, {"lights", &lights},
      {"headlight", &headlight}, {"rgb", &rgb}, {"depth", &depth}, {"seg", &seg},
      {"top_bounds", &top_bounds}, {"timers", &timers}};
  for (const auto& [name, t] : others) {
    FLYCUDA_CHECK(t->device() == geom_xpos.device(), "argument '", name, "' must be on ",
                  geom_xpos.device(), " (the device of 'geom_xpos'), got ", t->device());
  }
  // Image.
  FLYCUDA_CHECK_VALUE(height > 0 && width > 0, "the image must not be empty, got height ", height,
                      " and width ", width);
  FLYCUDA_CHECK_VALUE(fovy > 0.0 && fovy < 180.0, "argument 'fovy' must be in (0, 180) degrees, got ", fovy);
  FLYCUDA_CHECK_VALUE(zfar >= 0.0 && std::isfinite(zfar), "argument 'zfar' must be >= 0 (0: none), got ", zfar);
  FLYCUDA_CHECK_VALUE(samples >= 1 && samples <= 8, "argument 'samples' must be in [1, 8], got ", samples);
  FLYCUDA_CHECK_VALUE(mosaic_cols >= 0, "argument 'mosaic_cols' must be >= 0, got ", mosaic_cols);
  const int64_t S = worlds.size(0);
  if (mosaic_cols > 0) {
    const int64_t rows = cdiv(S, mosaic_cols);
    check_output(kOpName, rgb, "rgb", at::kByte, {rows * height, mosaic_cols * width, 3});
  } else {
    check_output(kOpName, rgb, "rgb", at::kByte, {S, height, width, 3});
  }
  check_output(kOpName, depth, "depth", at::kFloat, {S, height, width});
  check_output(kOpName, seg, "seg", at::kInt, {S, height, width});
  check_output(kOpName, top_bounds, "top_bounds", at::kFloat, {S, top_index.size(0), 6});
  const int64_t tiles = (rgb.numel() && mosaic_cols > 0) ? cdiv(S, mosaic_cols) * mosaic_cols : S;
  const kernels::RenderPlan plan = kernels::plan_render_tiles(tiles, height, width, S);
  FLYCUDA_CHECK(!plan.too_large, "too many pixels (", plan.pixels, ") for one launch");
  check_output(kOpName, timers, "timers", at::kLong, {plan.blocks, render::kTimers});
}

void check_render_tiles_indices(const at::Tensor& geom_xpos, const at::Tensor& worlds,
                                const at::Tensor& geom_ids, const at::Tensor& geom_info,
                                const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                                const at::Tensor& bvh_index, const at::Tensor& tris,
                                const at::Tensor& top_index, const at::Tensor& unbounded) {
  constexpr const char* kOpName = "render_tiles";
  check_index_values(kOpName, "worlds", worlds, geom_xpos.size(0), "W = geom_xpos.size(0)", false);
  check_index_values(kOpName, "geom_ids", geom_ids, geom_xpos.size(1), "G = geom_xpos.size(1)", false);
  const at::Tensor info = geom_info.to(at::kCPU).contiguous(), index = bvh_index.to(at::kCPU).contiguous();
  const int64_t N = bvh_bounds.size(0), T = tris.size(0);
  const int32_t* gi = info.data_ptr<int32_t>();
  for (int64_t k = 0; k < info.size(0); ++k) {
    const int32_t type = gi[2 * k], root = gi[2 * k + 1];
    FLYCUDA_CHECK(root >= -1 && root < N, "argument 'geom_info' row ", k, " has BVH root ", root,
                  ", expected -1 or [0, ", N, ")");
    FLYCUDA_CHECK(type != render::kMesh || root >= 0, "argument 'geom_info' row ", k,
                  " is a mesh without a BVH root");
  }
  const int32_t* ix = index.data_ptr<int32_t>();
  for (int64_t n = 0; n < N; ++n) {
    const int32_t a = ix[2 * n], c = ix[2 * n + 1];
    const bool ok = c < 0 ? (a >= 0 && a - c <= T) : (a > n && c > n && a < N && c < N);
    FLYCUDA_CHECK(ok, "argument 'bvh_index' node ", n, " = (", a, ", ", c,
                  ") links outside the tree or the ", T, " triangles");
  }
  check_top_level(geom_param, top_index, unbounded);
}

namespace {

void render_tiles_cpu(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat,
                      const at::Tensor& cam_pos, const at::Tensor& cam_mat, const at::Tensor& worlds,
                      const at::Tensor& geom_ids, const at::Tensor& geom_info,
                      const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                      const at::Tensor& bvh_index, const at::Tensor& tris, const at::Tensor& top_index,
                      const at::Tensor& unbounded, const at::Tensor& lights,
                      const at::Tensor& headlight, double fovy, double zfar, int64_t samples,
                      bool shadows, int64_t height, int64_t width, int64_t mosaic_cols,
                      bool check, at::Tensor& rgb, at::Tensor& depth, at::Tensor& seg,
                      at::Tensor& top_bounds, at::Tensor& timers) {
  // Check inputs.
  check_render_tiles(geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, geom_ids, geom_info, geom_param,
                     bvh_bounds, bvh_index, tris, top_index, unbounded, lights, headlight, fovy, zfar, samples, height,
                     width, mosaic_cols, rgb, depth, seg, top_bounds, timers);
  if (check) {
    check_render_tiles_indices(geom_xpos, worlds, geom_ids, geom_info, geom_param, bvh_bounds, bvh_index,
                               tris, top_index, unbounded);
  }
  // Scene, outputs, sizes.
  render::Scene sc = render::make_scene(geom_xpos, geom_xmat, geom_ids, geom_info, geom_param,
                                        bvh_bounds, bvh_index, tris, top_index, unbounded, lights, headlight);
  const render::Out out = render::make_out(rgb, depth, seg, mosaic_cols);
  const int64_t S = worlds.size(0);
  const int32_t* wsel = worlds.data_ptr<int32_t>();
  const float* cp = cam_pos.data_ptr<float>();
  const float* cm = cam_mat.data_ptr<float>();
  const int64_t cp_s0 = cam_pos.stride(0), cm_s0 = cam_mat.stride(0);
  const float tan_half = static_cast<float>(std::tan(0.5 * fovy * M_PI / 180.0));
  const int64_t tiles = render::tiles_covered(out, S);
  // Top-level BVH of each selected world refit from its poses (when a workspace is given).
  if (top_bounds.numel()) {
    float* tb = top_bounds.data_ptr<float>();
    at::parallel_for(0, S, /*grain_size=*/16, [&](int64_t begin, int64_t end) {
      for (int64_t s = begin; s < end; ++s) {
        render::refit_top(sc, render::tile_world(wsel, s, S, sc.nworld), tb + 6 * sc.ntop * s);
      }
    });
    sc.top_bounds = tb;
  }
  // Run the kernel: the plan's blocks of pixels (as the CUDA blocks), in parallel.
  const kernels::RenderPlan plan = kernels::plan_render_tiles(tiles, height, width, S);
  const int64_t n = plan.pixels, per = plan.threads;
  int64_t* tim = timers.numel() ? timers.data_ptr<int64_t>() : nullptr;
  at::parallel_for(0, plan.blocks, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      int64_t stage[2] = {0, 0};
      const int64_t start = tim ? render::now() : 0;
      for (int64_t idx = chunk * per; idx < std::min(n, (chunk + 1) * per); ++idx) {
        const int64_t px = idx % width, py = (idx / width) % height, s = idx / (width * height);
        const int64_t w = render::tile_world(wsel, s, S, sc.nworld);
        if (w < 0) {  // an empty mosaic cell, or a bad world id (check=False)
          render::clear_pixel(out, s, S, py, px, height, width);
          continue;
        }
        render::render_pixel(sc, out, s, w, py, px, height, width, cp + w * cp_s0, cm + w * cm_s0,
                             tan_half, static_cast<float>(zfar), samples, shadows, tim ? stage : nullptr);
      }
      if (tim) {
        tim[chunk * render::kTimers + 0] = stage[0];
        tim[chunk * render::kTimers + 1] = stage[1];
        tim[chunk * render::kTimers + 2] = render::now() - start;
      }
    }
  });
}

}  // namespace

render::Scene render::make_scene(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat,
                                 const at::Tensor& geom_ids, const at::Tensor& geom_info,
                                 const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                                 const at::Tensor& bvh_index, const at::Tensor& tris,
                                 const at::Tensor& top_index, const at::Tensor& unbounded,
                                 const at::Tensor& lights, const at::Tensor& headlight) {
  render::Scene sc;
  sc.xpos = geom_xpos.data_ptr<float>();
  sc.xmat = geom_xmat.data_ptr<float>();
  sc.xpos_s0 = geom_xpos.stride(0);
  sc.xpos_s1 = geom_xpos.stride(1);
  sc.xmat_s0 = geom_xmat.stride(0);
  sc.xmat_s1 = geom_xmat.stride(1);
  sc.geom_ids = geom_ids.data_ptr<int32_t>();
  sc.geom_info = geom_info.data_ptr<int32_t>();
  sc.geom_param = geom_param.data_ptr<float>();
  sc.ngeom = geom_ids.size(0);
  sc.nworld = geom_xpos.size(0);
  sc.nnode = static_cast<int32_t>(bvh_bounds.size(0));
  sc.bounds = bvh_bounds.data_ptr<float>();
  sc.index = bvh_index.data_ptr<int32_t>();
  sc.tris = tris.data_ptr<float>();
  sc.top_index = top_index.data_ptr<int32_t>();
  sc.ntop = static_cast<int32_t>(top_index.size(0));
  sc.unbounded = unbounded.data_ptr<int32_t>();
  sc.nunbounded = unbounded.size(0);
  sc.lights = lights.data_ptr<float>();
  sc.nlight = lights.size(0);
  sc.headlight = headlight.data_ptr<float>();
  sc.top_bounds = nullptr;
  return sc;
}

render::Out render::make_out(at::Tensor& rgb, at::Tensor& depth, at::Tensor& seg, int64_t mosaic_cols) {
  render::Out out;
  out.rgb = rgb.numel() ? rgb.data_ptr<uint8_t>() : nullptr;
  out.cols = mosaic_cols;
  out.depth = depth.numel() ? depth.data_ptr<float>() : nullptr;
  out.seg = seg.numel() ? seg.data_ptr<int32_t>() : nullptr;
  return out;
}

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("render_tiles", &render_tiles_cpu); }

}  // namespace flycuda
