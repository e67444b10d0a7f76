// flycuda: render_tiles' host side, shared by the CPU (render/render_tiles.cpp) and CUDA
// (cuda/render_tiles.cu) impls: the op's parameter list (written once, here), the
// packed scene's fields (in the order of flycuda.ops.scene_layout.Scene.FIELDS), the checks
// (render/render_args.cpp, render/render_bvh.cpp), and the one RenderArgs
// (kernels/render/layout.h) built from them.
#pragma once

#include "common.h"
#include "kernels/render_tiles.cuh"

namespace flycuda {

// The op's parameters (the schema's order; registration.cpp) and the same as arguments.
#define FLYCUDA_RENDER_TILES_PARAMS                                                                   \
  const Tensor &geom_xpos, const Tensor &geom_xmat, const Tensor &cam_pos,                \
      const Tensor &cam_mat, const Tensor &worlds, const TensorList& scene, const std::vector<double>& fovy, \
      double zfar, int64_t samples, bool shadows, int64_t height, int64_t width, int64_t mosaic_cols,   \
      const Tensor &pixels, bool check, Tensor &rgb, Tensor &depth, Tensor &seg,        \
      Tensor &top_boxes, Tensor &timers
#define FLYCUDA_RENDER_TILES_ARGS                                                                      \
  geom_xpos, geom_xmat, cam_pos, cam_mat, worlds, scene, fovy, zfar, samples, shadows, height, width,  \
      mosaic_cols, pixels, check, rgb, depth, seg, top_boxes, timers

// The packed scene: `scene` holds these tensors in this order (flycuda.ops.scene_layout.Scene.FIELDS).
enum SceneField : int {
  kGeomIds, kGeomInfo, kGeomParam, kBvhBoxes, kBvhLinks, kTris, kTopLinks, kUnbounded, kLights, kHeadlight,
  kBackground, kSceneFields
};
extern const char* const kSceneFieldNames[kSceneFields];

// Checks every argument's dtype, shape and device (and, with `check_values`, the
// index values: worlds, geom ids, pixel ids, every BVH's links and depth; these
// read device tensors on the host) and returns the launch's RenderArgs and plan.
// Nothing is written before it returns.
render::RenderArgs render_args(FLYCUDA_RENDER_TILES_PARAMS, bool check_values, kernels::RenderPlan& plan,
                               const CopyToHost& copy = {});

// The index-value checks alone (render_bvh.cpp): worlds, geom ids and types, pixel
// ids, the mesh BVHs and the top level (links, leaves, depth against the stack).
void check_render_values(const Tensor& geom_xpos, const Tensor& worlds, const TensorList& scene,
                         const Tensor& pixels, int64_t height, int64_t width, const CopyToHost& copy = {});

}  // namespace flycuda
