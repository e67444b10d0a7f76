// flycuda: render_tiles' argument checks (dtype, shape, device, alignment) and the
// RenderArgs the CPU and CUDA impls launch with.
#include "render/render_tiles.h"

#include "common.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace flycuda {

const char* const kSceneFieldNames[kSceneFields] = {"geom_ids", "geom_info", "geom_param", "bvh_boxes",
                                                    "bvh_links", "tris", "top_links", "unbounded",
                                                    "lights", "headlight", "background"};

namespace {

constexpr const char* kOpName = "render_tiles";

// dtype and trailing columns (0: a vector) of each scene field.
struct FieldSpec {
  ScalarType dtype;
  int64_t cols;
};
const FieldSpec kFieldSpecs[kSceneFields] = {
    {kInt, 0}, {kInt, render::kInfoCols}, {kFloat, render::kParamCols}, {kFloat, render::kBoxCols},
    {kInt, 2}, {kFloat, render::kTriCols}, {kInt, 2}, {kInt, 0}, {kFloat, render::kLightCols},
    {kFloat, 0}, {kFloat, 0}};

std::string shape_str(int64_t rows, int64_t cols) {
  return cols > 0 ? "[" + (rows >= 0 ? std::to_string(rows) : std::string("N")) + ", " + std::to_string(cols) + "]"
                  : "[" + (rows >= 0 ? std::to_string(rows) : std::string("N")) + "]";
}

void check_field(const Tensor& t, const char* name, const FieldSpec& f, int64_t rows) {
  FLYCUDA_CHECK(t.scalar_type() == f.dtype, "scene field '", name, "' must have dtype ", f.dtype, ", got ",
                t.scalar_type());
  const bool ok = t.dim() == (f.cols > 0 ? 2 : 1) && (f.cols <= 0 || t.size(1) == f.cols) &&
                  (rows < 0 || t.size(0) == rows);
  FLYCUDA_CHECK(ok, "scene field '", name, "' must have shape ", shape_str(rows, f.cols), ", got ", sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "scene field '", name, "' must be contiguous");
  FLYCUDA_CHECK(t.size(0) < (int64_t{1} << 28) - 1, "scene field '", name, "' must have fewer than 2^28 - 1 rows, got ",
                t.size(0));
}

// Rows of float4 loads on the GPU: the array must start on a 16-byte boundary.
void check_aligned(const Tensor& t, const char* name) {
  FLYCUDA_CHECK(t.numel() == 0 || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "argument '", name,
                "' must start on a 16-byte boundary (its rows are read as float4), got address ", t.data_ptr());
}

// A [rows, ..., last] float32 input whose last dim is contiguous.
void check_rows(const Tensor& t, const char* name, const std::vector<int64_t>& lead, int64_t last) {
  FLYCUDA_CHECK(t.scalar_type() == kFloat, "argument '", name, "' must have dtype Float, got ",
                t.scalar_type());
  std::vector<int64_t> want(lead.begin(), lead.end());
  want.push_back(last);
  bool ok = t.dim() == static_cast<int64_t>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || t.size(static_cast<int64_t>(i)) == want[i];
  FLYCUDA_CHECK(ok, "argument '", name, "' must have shape ", sizes_str(want), " (-1: any), got ",
                sizes_of(t));
  FLYCUDA_CHECK(t.numel() == 0 || t.stride(t.dim() - 1) == 1, "argument '", name,
                "' must be contiguous in its last dim, got strides ", strides_of(t));
}

void check_output(const Tensor& t, const char* name, ScalarType dt, const std::vector<int64_t>& shape) {
  if (t.numel() == 0) return;  // not requested
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ", t.scalar_type());
  FLYCUDA_CHECK(sizes_of(t) == sizes_str(shape), "argument '", name, "' must have shape ", sizes_str(shape),
                ", got ", sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous");
}

void check_devices(FLYCUDA_RENDER_TILES_PARAMS) {
  std::vector<std::pair<std::string, const Tensor*>> all = {
      {"geom_xmat", &geom_xmat}, {"cam_pos", &cam_pos}, {"cam_mat", &cam_mat}, {"worlds", &worlds},
      {"pixels", &pixels}, {"rgb", &rgb}, {"depth", &depth}, {"seg", &seg}, {"top_boxes", &top_boxes},
      {"timers", &timers}};
  for (int f = 0; f < kSceneFields; ++f) all.emplace_back(std::string("scene.") + kSceneFieldNames[f], &scene[f]);
  for (const auto& [name, t] : all) {
    FLYCUDA_CHECK(t->device() == geom_xpos.device(), "argument '", name, "' must be on ", geom_xpos.device(),
                  " (the device of 'geom_xpos'), got ", t->device());
  }
  (void)fovy, (void)zfar, (void)samples, (void)shadows, (void)height, (void)width, (void)mosaic_cols, (void)check;
}

void check_shapes(FLYCUDA_RENDER_TILES_PARAMS, kernels::RenderPlan& plan) {
  // Poses and cameras.
  check_rows(geom_xpos, "geom_xpos", {-1, -1}, 3);
  const int64_t W = geom_xpos.size(0), G = geom_xpos.size(1);
  check_rows(geom_xmat, "geom_xmat", {W, G}, 9);
  FLYCUDA_CHECK(cam_pos.dim() == 3, "argument 'cam_pos' must be [W, C, 3], got shape ", sizes_of(cam_pos));
  const int64_t C = cam_pos.size(1);
  check_rows(cam_pos, "cam_pos", {W, C}, 3);
  check_rows(cam_mat, "cam_mat", {W, C}, 9);
  FLYCUDA_CHECK_VALUE(C >= 1 && C <= render::kMaxCams, "argument 'cam_pos' must hold 1 to ", render::kMaxCams,
                      " cameras per world, got ", C);
  FLYCUDA_CHECK_VALUE(static_cast<int64_t>(fovy.size()) == C, "argument 'fovy' must hold one angle per camera (",
                      C, "), got ", fovy.size());
  for (const double f : fovy) {
    FLYCUDA_CHECK_VALUE(f > 0.0 && f < 180.0, "argument 'fovy' must be in (0, 180) degrees, got ", f);
  }
  // Selection and scene.
  FLYCUDA_CHECK(worlds.scalar_type() == kInt && worlds.dim() == 1 && worlds.is_contiguous(),
                "argument 'worlds' must be a contiguous int32 vector, got ", worlds.scalar_type(), " of shape ",
                sizes_of(worlds));
  FLYCUDA_CHECK_VALUE(static_cast<int64_t>(scene.size()) == kSceneFields, "argument 'scene' must hold the ",
                      kSceneFields, " fields of flycuda.ops.scene_layout.Scene.FIELDS, got ", scene.size(), " tensors");
  const int64_t Gr = scene[kGeomIds].numel();
  for (int f = 0; f < kSceneFields; ++f) {
    const bool per_geom = f == kGeomIds || f == kGeomInfo || f == kGeomParam;
    const int64_t rows = per_geom ? Gr
                         : f == kBvhLinks ? scene[kBvhBoxes].size(0)
                         : f == kHeadlight ? render::kHeadlightCols
                         : f == kBackground ? render::kBackgroundCols : -1;
    check_field(scene[f], kSceneFieldNames[f], kFieldSpecs[f], rows);
  }
  check_aligned(scene[kBvhBoxes], "scene.bvh_boxes");
  check_aligned(scene[kTris], "scene.tris");
  // Image, pixels and outputs.
  FLYCUDA_CHECK_VALUE(height > 0 && width > 0 && height * width < INT32_MAX, "the image must not be empty (nor ",
                      "past 2^31 pixels), got height ", height, " and width ", width);
  FLYCUDA_CHECK_VALUE(zfar >= 0.0 && std::isfinite(zfar), "argument 'zfar' must be >= 0 (0: none), got ", zfar);
  FLYCUDA_CHECK_VALUE(samples >= 1 && samples <= 8, "argument 'samples' must be in [1, 8], got ", samples);
  FLYCUDA_CHECK_VALUE(mosaic_cols >= 0, "argument 'mosaic_cols' must be >= 0, got ", mosaic_cols);
  FLYCUDA_CHECK(pixels.scalar_type() == kInt && pixels.dim() == 1 && pixels.is_contiguous(),
                "argument 'pixels' must be a contiguous int32 vector of pixel ids (empty: every pixel), got ",
                pixels.scalar_type(), " of shape ", sizes_of(pixels));
  const int64_t P = pixels.numel(), S = worlds.size(0), Nt = scene[kTopLinks].size(0);
  FLYCUDA_CHECK_VALUE(!(P > 0 && mosaic_cols > 0), "a pixel list ('pixels') cannot be drawn into a mosaic");
  if (mosaic_cols > 0) {
    check_output(rgb, "rgb", kByte, {cdiv(S * C, mosaic_cols) * height, mosaic_cols * width, 3});
  } else if (P > 0) {
    check_output(rgb, "rgb", kByte, {S, C, P, 3});
  } else {
    check_output(rgb, "rgb", kByte, {S, C, height, width, 3});
  }
  const std::vector<int64_t> img = P > 0 ? std::vector<int64_t>{S, C, P} : std::vector<int64_t>{S, C, height, width};
  check_output(depth, "depth", kFloat, img);
  check_output(seg, "seg", kInt, img);
  FLYCUDA_CHECK(Nt == 0 || S == 0 || top_boxes.numel() > 0, "argument 'top_boxes' (the workspace [S, ", Nt, ", ",
                render::kBoxCols, "]) is required");
  check_output(top_boxes, "top_boxes", kFloat, {S, Nt, render::kBoxCols});
  check_aligned(top_boxes, "top_boxes");
  (void)shadows, (void)check;
  const int64_t T = S * C, tiles = (rgb.numel() && mosaic_cols > 0) ? cdiv(T, mosaic_cols) * mosaic_cols : T;
  plan = kernels::plan_render_tiles(tiles, height, width, P, S);
  FLYCUDA_CHECK(!plan.too_large, "too many pixels (", tiles, " images) for one launch");
  check_output(timers, "timers", kLong, {plan.blocks, render::kTimers});
}

render::Scene make_scene(const Tensor& geom_xpos, const Tensor& geom_xmat, const TensorList& scene) {
  render::Scene sc;
  sc.xpos = dptr<float>(geom_xpos);
  sc.xmat = dptr<float>(geom_xmat);
  sc.xpos_s0 = geom_xpos.stride(0);
  sc.xpos_s1 = geom_xpos.stride(1);
  sc.xmat_s0 = geom_xmat.stride(0);
  sc.xmat_s1 = geom_xmat.stride(1);
  sc.nworld = static_cast<int32_t>(geom_xpos.size(0));
  sc.ngeom = static_cast<int32_t>(scene[kGeomIds].numel());
  sc.geom_ids = dptr<int32_t>(scene[kGeomIds]);
  sc.geom_info = dptr<int32_t>(scene[kGeomInfo]);
  sc.geom_param = dptr<float>(scene[kGeomParam]);
  sc.bvh_boxes = dptr<float>(scene[kBvhBoxes]);
  sc.bvh_links = dptr<int32_t>(scene[kBvhLinks]);
  sc.tris = dptr<float>(scene[kTris]);
  sc.top_links = dptr<int32_t>(scene[kTopLinks]);
  sc.unbounded = dptr<int32_t>(scene[kUnbounded]);
  sc.lights = dptr<float>(scene[kLights]);
  sc.headlight = dptr<float>(scene[kHeadlight]);
  sc.background = dptr<float>(scene[kBackground]);
  sc.nnode = static_cast<int32_t>(scene[kBvhBoxes].size(0));
  sc.ntri = static_cast<int32_t>(scene[kTris].size(0));
  sc.ntop = static_cast<int32_t>(scene[kTopLinks].size(0));
  sc.nunbounded = static_cast<int32_t>(scene[kUnbounded].numel());
  sc.nlight = static_cast<int32_t>(scene[kLights].size(0));
  return sc;
}

render::View make_view(FLYCUDA_RENDER_TILES_PARAMS) {
  render::View v;
  v.worlds = dptr<int32_t>(worlds);
  v.nsel = static_cast<int32_t>(worlds.numel());
  v.ncam = static_cast<int32_t>(cam_pos.size(1));
  v.cam_pos = dptr<float>(cam_pos);
  v.cam_mat = dptr<float>(cam_mat);
  v.cp_s0 = cam_pos.stride(0);
  v.cp_s1 = cam_pos.stride(1);
  v.cm_s0 = cam_mat.stride(0);
  v.cm_s1 = cam_mat.stride(1);
  for (int c = 0; c < render::kMaxCams; ++c) {
    v.tan_half_fovy[c] = c < v.ncam ? static_cast<float>(std::tan(0.5 * fovy[c] * M_PI / 180.0)) : 0.f;
  }
  v.height = static_cast<int32_t>(height);
  v.width = static_cast<int32_t>(width);
  v.pixels = pixels.numel() ? dptr<int32_t>(pixels) : nullptr;
  v.npix = static_cast<int32_t>(pixels.numel());
  v.zfar = static_cast<float>(zfar);
  v.samples = static_cast<int32_t>(samples);
  v.shadows = shadows;
  v.rgb = rgb.numel() ? dptr<uint8_t>(rgb) : nullptr;
  v.mosaic_cols = static_cast<int32_t>(mosaic_cols);
  v.depth = depth.numel() ? dptr<float>(depth) : nullptr;
  v.seg = seg.numel() ? dptr<int32_t>(seg) : nullptr;
  v.top_boxes = top_boxes.numel() ? dptr<float>(top_boxes) : nullptr;
  v.timers = timers.numel() ? dptr<int64_t>(timers) : nullptr;
  (void)geom_xpos, (void)geom_xmat, (void)scene, (void)check, (void)mosaic_cols;
  return v;
}

}  // namespace

render::RenderArgs render_args(FLYCUDA_RENDER_TILES_PARAMS, bool check_values, kernels::RenderPlan& plan,
                               const CopyToHost& copy) {
  check_shapes(FLYCUDA_RENDER_TILES_ARGS, plan);
  check_devices(FLYCUDA_RENDER_TILES_ARGS);
  render::RenderArgs a;
  a.sc = make_scene(geom_xpos, geom_xmat, scene);
  a.v = make_view(FLYCUDA_RENDER_TILES_ARGS);
  if (check_values) check_render_values(geom_xpos, worlds, scene, pixels, height, width, copy);
  return a;
}

}  // namespace flycuda
