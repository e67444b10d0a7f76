// flycuda: ray-geom intersections of the tile renderer, in a geom's local frame
// (host and device code): plane, sphere, capsule, ellipsoid, cylinder, box, and
// triangle meshes through a BVH. Included by render_tiles.h; mirrored by
// flycuda/reference/render.py.
#pragma once

#include "kernels/platform.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace render {

// Geom types: MuJoCo's mjtGeom numbering.
enum GeomType : int32_t { kPlane = 0, kSphere = 2, kCapsule = 3, kEllipsoid = 4, kCylinder = 5,
                          kBox = 6, kMesh = 7 };
constexpr int kParam = 12;     // geom_param columns: size[3] rgb[3] rgb2[3] checker rbound pad
constexpr int kLight = 10;     // lights columns: dir[3] ambient[3] diffuse[3] castshadow
constexpr int kStack = 64;     // mesh BVH traversal stack
constexpr int kTopStack = 32;  // top-level BVH traversal stack (nested around a mesh's: GPU local memory)
constexpr int32_t kMaxVisits = 1 << 22;  // BVH nodes one ray may visit: bounds a walk of a bad BVH
constexpr float kEps = 1e-6f;  // smallest accepted ray distance
constexpr float kInf = 3.0e38f;

struct V3 { float x, y, z; };
FLYCUDA_HOST_DEVICE inline V3 v3(float x, float y, float z) { V3 r; r.x = x; r.y = y; r.z = z; return r; }
FLYCUDA_HOST_DEVICE inline V3 add(V3 a, V3 b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
FLYCUDA_HOST_DEVICE inline V3 sub(V3 a, V3 b) { return v3(a.x - b.x, a.y - b.y, a.z - b.z); }
FLYCUDA_HOST_DEVICE inline V3 mul(V3 a, float s) { return v3(a.x * s, a.y * s, a.z * s); }
FLYCUDA_HOST_DEVICE inline float dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
FLYCUDA_HOST_DEVICE inline V3 cross(V3 a, V3 b) {
  return v3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
FLYCUDA_HOST_DEVICE inline V3 normalize(V3 a) {
  const float n = sqrtf(dot(a, a));
  return n > 0.f ? mul(a, 1.f / n) : a;
}
// R (row-major 3x3) times v, and R^T times v.
FLYCUDA_HOST_DEVICE inline V3 matvec(const float* R, V3 v) {
  return v3(R[0] * v.x + R[1] * v.y + R[2] * v.z, R[3] * v.x + R[4] * v.y + R[5] * v.z,
            R[6] * v.x + R[7] * v.y + R[8] * v.z);
}
FLYCUDA_HOST_DEVICE inline V3 matTvec(const float* R, V3 v) {
  return v3(R[0] * v.x + R[3] * v.y + R[6] * v.z, R[1] * v.x + R[4] * v.y + R[7] * v.z,
            R[2] * v.x + R[5] * v.y + R[8] * v.z);
}

struct Hit {
  float t;  // distance along the (unit) ray; kInf if none
  V3 n;     // local-frame normal (not normalized for meshes)
};
FLYCUDA_HOST_DEVICE inline Hit miss() { Hit h; h.t = kInf; h.n = v3(0.f, 0.f, 1.f); return h; }

// Nearest root t > kEps of a t^2 + 2 b t + c = 0 (the entering one), else kInf.
FLYCUDA_HOST_DEVICE inline float quad_entry(float a, float b, float c) {
  if (a <= 0.f) return kInf;
  const float disc = b * b - a * c;
  if (disc < 0.f) return kInf;
  const float t = (-b - sqrtf(disc)) / a;
  return t > kEps ? t : kInf;
}

FLYCUDA_HOST_DEVICE inline Hit hit_sphere(V3 o, V3 d, V3 c, float r) {
  const V3 oc = sub(o, c);
  Hit h = miss();
  h.t = quad_entry(dot(d, d), dot(oc, d), dot(oc, oc) - r * r);
  if (h.t < kInf) h.n = add(oc, mul(d, h.t));
  return h;
}

FLYCUDA_HOST_DEVICE inline Hit hit_ellipsoid(V3 o, V3 d, V3 s) {
  const V3 os = v3(o.x / s.x, o.y / s.y, o.z / s.z), ds = v3(d.x / s.x, d.y / s.y, d.z / s.z);
  Hit h = miss();
  h.t = quad_entry(dot(ds, ds), dot(os, ds), dot(os, os) - 1.f);
  if (h.t < kInf) {
    const V3 p = add(o, mul(d, h.t));
    h.n = v3(p.x / (s.x * s.x), p.y / (s.y * s.y), p.z / (s.z * s.z));
  }
  return h;
}

// Side of the z-axis cylinder of radius r, |z| <= h.
FLYCUDA_HOST_DEVICE inline Hit hit_tube(V3 o, V3 d, float r, float h) {
  Hit out = miss();
  const float t = quad_entry(d.x * d.x + d.y * d.y, o.x * d.x + o.y * d.y, o.x * o.x + o.y * o.y - r * r);
  if (t < kInf && fabsf(o.z + t * d.z) <= h) { out.t = t; out.n = v3(o.x + t * d.x, o.y + t * d.y, 0.f); }
  return out;
}

FLYCUDA_HOST_DEVICE inline Hit nearer(Hit a, Hit b) { return b.t < a.t ? b : a; }

FLYCUDA_HOST_DEVICE inline Hit hit_capsule(V3 o, V3 d, float r, float h) {
  Hit best = hit_tube(o, d, r, h);
  for (int side = -1; side <= 1; side += 2) {  // hemispherical caps beyond the tube
    Hit c = hit_sphere(o, d, v3(0.f, 0.f, side * h), r);
    if (c.t < kInf && side * (o.z + c.t * d.z) >= h) best = nearer(best, c);
  }
  return best;
}

FLYCUDA_HOST_DEVICE inline Hit hit_cylinder(V3 o, V3 d, float r, float h) {
  Hit best = hit_tube(o, d, r, h);
  if (d.z != 0.f) {
    for (int side = -1; side <= 1; side += 2) {  // flat caps
      const float t = (side * h - o.z) / d.z;
      const float x = o.x + t * d.x, y = o.y + t * d.y;
      if (t > kEps && x * x + y * y <= r * r && t < best.t) { best.t = t; best.n = v3(0.f, 0.f, (float)side); }
    }
  }
  return best;
}

// Slab test of the box [lo, hi]; returns the entry distance (or kInf) and its axis.
FLYCUDA_HOST_DEVICE inline float slab(V3 o, V3 d, V3 lo, V3 hi, float tmax, int* axis) {
  float tn = -kInf, tf = kInf;
  const float oo[3] = {o.x, o.y, o.z}, dd[3] = {d.x, d.y, d.z};
  const float l[3] = {lo.x, lo.y, lo.z}, u[3] = {hi.x, hi.y, hi.z};
  for (int k = 0; k < 3; ++k) {
    if (dd[k] == 0.f) {
      if (oo[k] < l[k] || oo[k] > u[k]) return kInf;
      continue;
    }
    float t1 = (l[k] - oo[k]) / dd[k], t2 = (u[k] - oo[k]) / dd[k];
    if (t1 > t2) { const float tmp = t1; t1 = t2; t2 = tmp; }
    if (t1 > tn) { tn = t1; if (axis) *axis = k; }
    if (t2 < tf) tf = t2;
  }
  if (tn > tf || tf < kEps || tn > tmax) return kInf;
  return tn;  // may be < kEps when o is inside the box
}

FLYCUDA_HOST_DEVICE inline Hit hit_box(V3 o, V3 d, V3 s) {
  Hit h = miss();
  int axis = 0;
  const float t = slab(o, d, v3(-s.x, -s.y, -s.z), s, kInf, &axis);
  if (t < kInf && t > kEps) {
    h.t = t;
    const float dd[3] = {d.x, d.y, d.z};
    float n[3] = {0.f, 0.f, 0.f};
    n[axis] = dd[axis] > 0.f ? -1.f : 1.f;
    h.n = v3(n[0], n[1], n[2]);
  }
  return h;
}

// z = 0 plane seen from above; |x| <= sx, |y| <= sy unless a size is 0 (infinite).
FLYCUDA_HOST_DEVICE inline Hit hit_plane(V3 o, V3 d, float sx, float sy) {
  Hit h = miss();
  if (o.z <= 0.f || d.z >= 0.f) return h;
  const float t = -o.z / d.z;
  const float x = o.x + t * d.x, y = o.y + t * d.y;
  if (t > kEps && (sx <= 0.f || fabsf(x) <= sx) && (sy <= 0.f || fabsf(y) <= sy)) {
    h.t = t;
    h.n = v3(0.f, 0.f, 1.f);
  }
  return h;
}

// Moller-Trumbore; tri = 9 floats (v0, v1, v2).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float hit_triangle(V3 o, V3 d, const float* tri, V3* n) {
  const V3 v0 = v3(tri[0], tri[1], tri[2]);
  const V3 e1 = sub(v3(tri[3], tri[4], tri[5]), v0), e2 = sub(v3(tri[6], tri[7], tri[8]), v0);
  const V3 p = cross(d, e2);
  const float det = dot(e1, p);
  if (fabsf(det) < 1e-12f) return kInf;
  const float inv = 1.f / det;
  const V3 s = sub(o, v0);
  const float u = dot(s, p) * inv;
  if (u < 0.f || u > 1.f) return kInf;
  const V3 q = cross(s, e1);
  const float v = dot(d, q) * inv;
  if (v < 0.f || u + v > 1.f) return kInf;
  const float t = dot(e2, q) * inv;
  if (t <= kEps) return kInf;
  *n = cross(e1, e2);
  return t;
}

// BVH: bounds [N, 6] (lo, hi); index [N, 2]: internal (left, right), leaf (first item, -count).
// The links are validated on the host; nodes outside [0, nnode) and links back to
// an earlier node are skipped, and a ray stops after kMaxVisits nodes, so a
// corrupted BVH cannot hang a kernel.
// The same layout serves the meshes (items: triangles) and the per-world top
// level over geoms (items: render-list geoms, render_tiles.h).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float node_entry(V3 o, V3 inv, const float* bounds, int32_t node, int32_t nnode,
                                            float tmax) {
  if (node < 0 || node >= nnode) return kInf;
  const float* b = bounds + 6 * static_cast<int64_t>(node);
  const float oo[3] = {o.x, o.y, o.z}, ii[3] = {inv.x, inv.y, inv.z};
  float tn = -kInf, tf = kInf;
  for (int k = 0; k < 3; ++k) {
    if (ii[k] == kInf) {  // the ray is parallel to this slab: inside it or a miss
      if (oo[k] < b[k] || oo[k] > b[3 + k]) return kInf;
      continue;
    }
    float t1 = (b[k] - oo[k]) * ii[k], t2 = (b[3 + k] - oo[k]) * ii[k];
    if (t1 > t2) { const float tmp = t1; t1 = t2; t2 = tmp; }
    if (t1 > tn) tn = t1;  // plain compares: fmaxf's NaN rules cost a call on the CPU
    if (t2 < tf) tf = t2;
  }
  if (tn > tf || tf < kEps || tn > tmax) return kInf;
  return tn;
}

// Per-axis reciprocals of a ray direction for node_entry (kInf for a zero component:
// node_entry then tests the origin against that slab instead).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT V3 reciprocal(V3 d) {
  return v3(d.x != 0.f ? 1.f / d.x : kInf, d.y != 0.f ? 1.f / d.y : kInf, d.z != 0.f ? 1.f / d.z : kInf);
}

// Visits the leaves of the BVH at `root` that the ray (o, d) enters before `tmax`,
// nearer child first: both children's boxes are tested at their parent and pushed
// far-then-near with their entry distances, and a popped node whose entry is no
// nearer than tmax (lowered by the leaves as they find hits) is skipped.
// leaf(first, count) tests a leaf's items; it returns true to stop (any-hit).
// Depth: at most Stack - 1 levels (deeper nodes are dropped; checked on the host).
template <int Stack, class Leaf>
FLYCUDA_HOST_DEVICE inline void traverse(V3 o, V3 d, const float* bounds, const int32_t* index, int32_t root,
                                         int32_t nnode, float& tmax, Leaf&& leaf) {
  int32_t stack[Stack];
  float entry[Stack];
  int sp = 0;
  const V3 inv = reciprocal(d);  // multiplies instead of 6 divisions per box
  const float t_root = node_entry(o, inv, bounds, root, nnode, tmax);
  if (t_root < kInf) {
    stack[sp] = root;
    entry[sp++] = t_root;
  }
  for (int32_t visits = 0; sp > 0 && visits < kMaxVisits; ++visits) {
    --sp;
    const int32_t node = stack[sp];
    if (entry[sp] > tmax) continue;  // a closer hit was found after it was pushed
    const int32_t a = index[2 * static_cast<int64_t>(node)], c = index[2 * static_cast<int64_t>(node) + 1];
    if (c < 0) {
      if (leaf(a, -static_cast<int64_t>(c))) return;
      continue;
    }
    // Children come after their parent in both layouts (checked on the host): a
    // link back is skipped, so even a corrupted BVH holds no cycle.
    const float ta = a > node ? node_entry(o, inv, bounds, a, nnode, tmax) : kInf;
    const float tc = c > node ? node_entry(o, inv, bounds, c, nnode, tmax) : kInf;
    const bool a_first = ta <= tc;  // pushed last, popped first
    const int32_t near_node = a_first ? a : c, far_node = a_first ? c : a;
    const float t_near = a_first ? ta : tc, t_far = a_first ? tc : ta;
    if (t_far < kInf && sp < Stack) {
      stack[sp] = far_node;
      entry[sp++] = t_far;
    }
    if (t_near < kInf && sp < Stack) {
      stack[sp] = near_node;
      entry[sp++] = t_near;
    }
  }
}

// Nearest triangle of the mesh BVH at `root` closer than tmax (a closer hit on
// another geom); any_hit (shadow rays) returns the first one found.
FLYCUDA_HOST_DEVICE inline Hit hit_mesh(V3 o, V3 d, int32_t root, const float* bounds,
                                        const int32_t* index, const float* tris, int32_t nnode,
                                        float tmax, bool any_hit) {
  Hit best = miss();
  best.t = tmax;
  traverse<kStack>(o, d, bounds, index, root, nnode, best.t, [&](int32_t first, int64_t count) {
    for (int64_t k = first; k < first + count; ++k) {
      V3 n = v3(0.f, 0.f, 1.f);
      const float t = hit_triangle(o, d, tris + 9 * k, &n);
      if (t < best.t) {
        best.t = t;
        best.n = n;
        if (any_hit) return true;
      }
    }
    return false;
  });
  return best;
}

// The intersection of a local-frame ray with geom `type` (sizes s, mesh root).
FLYCUDA_HOST_DEVICE inline Hit hit_geom(int32_t type, V3 o, V3 d, V3 s, int32_t root,
                                        const float* bounds, const int32_t* index, const float* tris,
                                        int32_t nnode, float tmax, bool any_hit) {
  switch (type) {
    case kPlane: return hit_plane(o, d, s.x, s.y);
    case kSphere: return hit_sphere(o, d, v3(0.f, 0.f, 0.f), s.x);
    case kCapsule: return hit_capsule(o, d, s.x, s.y);
    case kEllipsoid: return hit_ellipsoid(o, d, s);
    case kCylinder: return hit_cylinder(o, d, s.x, s.y);
    case kBox: return hit_box(o, d, s);
    case kMesh: return root >= 0 ? hit_mesh(o, d, root, bounds, index, tris, nnode, tmax, any_hit) : miss();
    default: return miss();
  }
}

}  // namespace render
}  // namespace flycuda
