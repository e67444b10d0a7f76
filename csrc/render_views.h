// flycuda: render_tiles' host side: the Scene and Out views of the op's tensors,
// shared by the CPU (render_tiles.cpp) and CUDA (cuda/render_tiles.cu) impls.
#pragma once

#include "kernels/render_tiles.h"

#include <ATen/core/Tensor.h>

namespace flycuda {
namespace render {

// Defined in csrc/render_tiles.cpp. The Scene's top_bounds starts unset.
Scene make_scene(const at::Tensor& geom_xpos, const at::Tensor& geom_xmat, const at::Tensor& geom_ids,
                 const at::Tensor& geom_info, const at::Tensor& geom_param, const at::Tensor& bvh_bounds,
                 const at::Tensor& bvh_index, const at::Tensor& tris, const at::Tensor& top_index,
                 const at::Tensor& unbounded, const at::Tensor& lights,
                 const at::Tensor& headlight);
Out make_out(at::Tensor& rgb, at::Tensor& depth, at::Tensor& seg, int64_t mosaic_cols);

}  // namespace render
}  // namespace flycuda
