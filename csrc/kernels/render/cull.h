// flycuda: per-block frustum culling of the top level (host and device code).
// A block of the pixel kernel traces the rays of one rectangle of pixels of one
// camera (a 16 x 8 patch, or 128 consecutive entries of a sorted pixel list): they
// leave one point inside the pyramid spanned by the rectangle's pixel footprints.
// Before tracing, the block tests every top-level leaf's box against that pyramid
// (its four side planes, widened by one pixel), marks the leaves no ray of the
// block can enter, and an internal child as enterable iff something below it is;
// the traversal then skips the rest without a box test. For the eyes,
// whose rays start inside the fly's own boxes and half of which see sky, and for a
// camera whose frame the fly fills only in part, most blocks skip most of the fly.
// The culling is conservative (a box is skipped only when it lies wholly outside
// the widened pyramid), so images are bit-identical with and without it.
#pragma once

#include "kernels/platform.h"
#include "geoms.h"
#include "layout.h"

#include <climits>
#include <cmath>
#include <cstdint>

namespace flycuda {
namespace render {

// Top-level nodes a block culls (2 flags each, one byte per child: 2 KiB of shared
// memory); nodes past it are never skipped.
constexpr int kCullNodes = 1024;

// The tiles and the pixel bounds of a block's pixels (empty: t0 > t1).
struct PixelRect {
  int32_t t0, t1, x0, x1, y0, y1;
};

FLYCUDA_HOST_DEVICE inline PixelRect empty_rect() {
  PixelRect r;
  r.t0 = r.x0 = r.y0 = INT32_MAX;
  r.t1 = r.x1 = r.y1 = INT32_MIN;
  return r;
}

FLYCUDA_HOST_DEVICE inline void rect_merge(PixelRect& r, const PixelRect& o) {
  r.t0 = o.t0 < r.t0 ? o.t0 : r.t0;
  r.x0 = o.x0 < r.x0 ? o.x0 : r.x0;
  r.y0 = o.y0 < r.y0 ? o.y0 : r.y0;
  r.t1 = o.t1 > r.t1 ? o.t1 : r.t1;
  r.x1 = o.x1 > r.x1 ? o.x1 : r.x1;
  r.y1 = o.y1 > r.y1 ? o.y1 : r.y1;
}

FLYCUDA_HOST_DEVICE inline PixelRect pixel_rect(int32_t t, int32_t px, int32_t py) {
  PixelRect r;
  r.t0 = r.t1 = t;
  r.x0 = r.x1 = px;
  r.y0 = r.y1 = py;
  return r;
}

// The pyramid of a block's rays: apex o, inward normals n of its four side planes.
struct Frustum {
  V3 o;
  V3 n[4];
};

// A camera-frame plane normal n in the world, for rays d = R dc (R row-major,
// camera to world): the plane n . dc >= 0 is (R^-T n) . d >= 0, and R^-T is the
// cofactor matrix K over det R, whose columns k are the cross products of R's
// columns. Exact for any invertible R (a fixed camera's matrix need not be a
// rotation); sign: the sign of det R.
FLYCUDA_HOST_DEVICE inline V3 world_normal(const V3* k, V3 n, float sign) {
  return mul(add(add(mul(k[0], n.x), mul(k[1], n.y)), mul(k[2], n.z)), sign);
}

// The pyramid of the rays of camera c of world w through the pixels of r (one
// tile), widened by one pixel on each side: every ray of every sub-sample of
// those pixels lies inside it with a margin far above float rounding. In the
// camera frame a ray is (x, y, -1) with x in [a0, a1] and y in [b0, b1]
// (camera_ray); the planes x = a0 (-z) etc. have the normals below. false: a
// singular (or non-finite) camera matrix, which no pyramid describes.
FLYCUDA_HOST_DEVICE inline bool block_frustum(const View& v, int32_t w, int32_t c, const PixelRect& r, Frustum& f) {
  const float W = static_cast<float>(v.width), H = static_cast<float>(v.height);
  const float hh = v.tan_half_fovy[c], hw = hh * fdiv(W, H);
  const float a0 = -hw + 2.f * hw * fdiv(static_cast<float>(r.x0 - 1), W);
  const float a1 = -hw + 2.f * hw * fdiv(static_cast<float>(r.x1 + 2), W);
  const float b1 = hh - 2.f * hh * fdiv(static_cast<float>(r.y0 - 1), H);  // rows run down the image
  const float b0 = hh - 2.f * hh * fdiv(static_cast<float>(r.y1 + 2), H);
  const float* R = v.cam_mat + w * v.cm_s0 + c * v.cm_s1;
  const float* p = v.cam_pos + w * v.cp_s0 + c * v.cp_s1;
  const V3 c0 = v3(R[0], R[3], R[6]), c1 = v3(R[1], R[4], R[7]), c2 = v3(R[2], R[5], R[8]);
  const V3 k[3] = {cross(c1, c2), cross(c2, c0), cross(c0, c1)};
  const float det = dot(c0, k[0]);
  if (!(fabsf(det) > 1e-12f) || !(fabsf(det) < kInf)) return false;
  const float sign = det > 0.f ? 1.f : -1.f;
  f.o = v3(p[0], p[1], p[2]);
  f.n[0] = world_normal(k, v3(1.f, 0.f, a0), sign);
  f.n[1] = world_normal(k, v3(-1.f, 0.f, -a1), sign);
  f.n[2] = world_normal(k, v3(0.f, 1.f, b0), sign);
  f.n[3] = world_normal(k, v3(0.f, -1.f, -b1), sign);
  return true;
}

// Can a ray inside f enter the box (lo xyz, hi xyz)? False only when the box's
// corner farthest along some plane's normal is still behind that plane, by more
// than a rounding margin; an empty box (lo at +kInf) is never entered.
FLYCUDA_HOST_DEVICE inline bool box_in_frustum(const Frustum& f, const float* b) {
  if (b[0] >= kInf) return false;
  const V3 lo = sub(v3(b[0], b[1], b[2]), f.o), hi = sub(v3(b[3], b[4], b[5]), f.o);
  for (int i = 0; i < 4; ++i) {
    const V3 n = f.n[i];
    const float far = (n.x > 0.f ? n.x * hi.x : n.x * lo.x) + (n.y > 0.f ? n.y * hi.y : n.y * lo.y) +
                      (n.z > 0.f ? n.z * hi.z : n.z * lo.z);
    const float scale = fabsf(n.x) * fmaxf(fabsf(lo.x), fabsf(hi.x)) + fabsf(n.y) * fmaxf(fabsf(lo.y), fabsf(hi.y)) +
                        fabsf(n.z) * fmaxf(fabsf(lo.z), fabsf(hi.z));
    if (far < -1e-4f * scale) return false;
  }
  return true;
}

// Phase 1 (independent per node): the flags of node j's leaf children (1: a ray
// of the block may enter its box). Internal children are left for phase 2.
FLYCUDA_HOST_DEVICE inline void cull_leaves(const Scene& sc, const Frustum& f, const float* top, int32_t j,
                                            uint8_t* vis) {
  const float* row = top + static_cast<int64_t>(kBoxCols) * j;
  for (int i = 0; i < 2; ++i) {
    if (is_leaf(sc.top_links[2 * static_cast<int64_t>(j) + i])) vis[2 * j + i] = box_in_frustum(f, row + 6 * i);
  }
}

// Phase 2 (bottom-up, node j after every node after it, as the refit's unions):
// an internal child may be entered iff one of its own children may. The eyes sit
// inside the boxes of the internal nodes above the head, which no plane test can
// cull; this pass culls them when nothing below them is in view. A child past
// kCullNodes or a link that breaks the layout stays enterable.
FLYCUDA_HOST_DEVICE inline void cull_unions(const Scene& sc, int32_t n, uint8_t* vis) {
  for (int32_t j = n - 1; j >= 0; --j) {
    for (int i = 0; i < 2; ++i) {
      const int32_t link = sc.top_links[2 * static_cast<int64_t>(j) + i];
      if (is_leaf(link)) continue;
      vis[2 * j + i] = (link > j && link < n) ? (vis[2 * link] | vis[2 * link + 1]) : 1;
    }
  }
}

// May the traversal enter child i of top-level node j? (vis null: no culling.)
FLYCUDA_HOST_DEVICE FLYCUDA_HOT bool may_enter(const uint8_t* vis, int32_t j, int i) {
  return !vis || j >= kCullNodes || vis[2 * j + i] != 0;
}

}  // namespace render
}  // namespace flycuda
