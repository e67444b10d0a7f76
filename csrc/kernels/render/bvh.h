// flycuda: the tile renderer's BVHs (host and device code): the per-world top
// level over the geoms, refit from the live poses, and one flat traversal loop
// over both levels. A mesh leaf of the top level moves the ray into the mesh's
// frame and pushes a marker that moves it back; one int32 stack serves both
// levels (layout.h: kStack, sized by the depths the host checks). Mirrored by
// flycuda/reference/render.py (float64).
#pragma once

#include "kernels/platform.h"
#include "cull.h"
#include "geoms.h"
#include "layout.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace render {

// A ray in the frame being walked: origin, unit direction, per-axis reciprocals.
// A component below 1e-30 in magnitude (zero included) gets +-kInf, a finite
// float: the box test's products then never meet inf * 0, so it needs no NaN
// rules and no branch (slab_inv).
struct Ray {
  V3 o, d, inv;
};

FLYCUDA_HOST_DEVICE FLYCUDA_HOT float safe_inv(float x) {
  return fabsf(x) > 1e-30f ? fdiv(1.f, x) : (x < 0.f ? -kInf : kInf);
}

FLYCUDA_HOST_DEVICE FLYCUDA_HOT Ray make_ray(V3 o, V3 d) {
  Ray r;
  r.o = o;
  r.d = d;
  r.inv = v3(safe_inv(d.x), safe_inv(d.y), safe_inv(d.z));
  return r;
}

// The nearest hit so far: distance, render-list geom (-1: none), triangle (-1: a primitive).
struct Best {
  float t;
  int32_t k, tri;
};

// Does a hit at t on geom k (triangle tri, -1: a primitive) replace b? Nearer, or as
// near from a geom earlier in the render list or an earlier triangle of the same
// mesh: exact ties resolve in that order whatever order the traversal meets the
// geoms and triangles in (the CPU twin's packets meet them in another order).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT bool replaces(float t, int32_t k, int32_t tri, const Best& b) {
  return t < b.t || (t == b.t && (k < b.k || (k == b.k && tri < b.tri)));
}

// The two child boxes of a node (one row of kBoxCols floats: three float4 loads on the GPU).
struct NodeBoxes {
  V3 alo, ahi, clo, chi;
};

FLYCUDA_HOST_DEVICE FLYCUDA_HOT NodeBoxes load_boxes(const float* row) {
  NodeBoxes nb;
#if defined(__CUDA_ARCH__)
  const float4* q = reinterpret_cast<const float4*>(row);  // rows are 48 B, the array 16 B aligned (host check)
  const float4 x = __ldg(q), y = __ldg(q + 1), z = __ldg(q + 2);
  nb.alo = v3(x.x, x.y, x.z);
  nb.ahi = v3(x.w, y.x, y.y);
  nb.clo = v3(y.z, y.w, z.x);
  nb.chi = v3(z.y, z.z, z.w);
#else
  nb.alo = v3(row[0], row[1], row[2]);
  nb.ahi = v3(row[3], row[4], row[5]);
  nb.clo = v3(row[6], row[7], row[8]);
  nb.chi = v3(row[9], row[10], row[11]);
#endif
  return nb;
}

// One axis of the box test with a reciprocal: narrows [tn, tf]. Branch-free
// (selects: minss/maxss on the CPU, FMNMX/FSEL on the GPU): no product is NaN, as
// inv is finite and nonzero (safe_inv). A ray parallel to the slab (inv = +-kInf)
// tests its origin against the closed slab instead: inside, no bound; outside, a miss.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT void slab_inv(float o, float inv, float lo, float hi, float& tn, float& tf) {
  const float t1 = (lo - o) * inv, t2 = (hi - o) * inv;
  const bool parallel = fabsf(inv) >= kInf, inside = o >= lo && o <= hi;
  float near = t1 < t2 ? t1 : t2, far = t1 < t2 ? t2 : t1;
  near = parallel ? (inside ? -kInf : kInf) : near;
  far = parallel ? (inside ? kInf : -kInf) : far;
  tn = near > tn ? near : tn;
  tf = far < tf ? far : tf;
}

// Entry distance of the ray into the box [lo, hi] if it enters before tmax, else kInf.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float box_entry(const Ray& r, V3 lo, V3 hi, float tmax) {
  float tn = -kInf, tf = kInf;
  slab_inv(r.o.x, r.inv.x, lo.x, hi.x, tn, tf);
  slab_inv(r.o.y, r.inv.y, lo.y, hi.y, tn, tf);
  slab_inv(r.o.z, r.inv.z, lo.z, hi.z, tn, tf);
  return (tn > tf || tf < kEps || tn > tmax) ? kInf : tn;
}

// Pose of render-list geom k in world w.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT const float* geom_pos(const Scene& sc, int32_t w, int32_t k) {
  return sc.xpos + w * sc.xpos_s0 + sc.geom_ids[k] * sc.xpos_s1;
}
FLYCUDA_HOST_DEVICE FLYCUDA_HOT const float* geom_mat(const Scene& sc, int32_t w, int32_t k) {
  return sc.xmat + w * sc.xmat_s0 + sc.geom_ids[k] * sc.xmat_s1;
}

// Does the ray (o, d) miss the sphere (c, r)? (d is a unit vector.)
FLYCUDA_HOST_DEVICE FLYCUDA_HOT bool misses_sphere(V3 o, V3 d, V3 c, float r) {
  const V3 oc = sub(o, c);
  const float b = dot(oc, d), cc = dot(oc, oc) - r * r;
  return cc > 0.f && (b > 0.f || b * b < cc);
}

// The world ray (o, d) in the local frame of geom k, unless it misses the geom's
// bounding sphere (then false).
FLYCUDA_HOST_DEVICE inline bool to_local(const Scene& sc, int32_t w, int32_t k, V3 o, V3 d, V3& ol, V3& dl) {
  const float* xp = geom_pos(sc, w, k);
  const V3 c = v3(xp[0], xp[1], xp[2]);
  const float rbound = sc.geom_param[kParamCols * k + kParamRbound];
  if (rbound > 0.f && misses_sphere(o, d, c, rbound)) return false;
  const float* R = geom_mat(sc, w, k);
  ol = matTvec(R, sub(o, c));
  dl = matTvec(R, d);
  return true;
}

// Tests primitive geom k (world ray o, d); true if its hit replaced b.
FLYCUDA_HOST_DEVICE inline bool test_primitive(const Scene& sc, int32_t w, int32_t k, V3 o, V3 d, Best& b) {
  V3 ol, dl;
  if (!to_local(sc, w, k, o, d, ol, dl)) return false;
  const float* P = sc.geom_param + kParamCols * k;
  const Hit h = hit_primitive(sc.geom_info[kInfoCols * k + kInfoType], ol, dl,
                              v3(P[kParamSize], P[kParamSize + 1], P[kParamSize + 2]));
  if (!replaces(h.t, k, -1, b)) return false;
  b.t = h.t;
  b.k = k;
  b.tri = -1;
  return true;
}

// Tests the triangles of a mesh leaf (the ray in mesh k's frame); true if one replaced b
// (AnyHit: stops at the first).
template <bool AnyHit>
FLYCUDA_HOST_DEVICE inline bool test_triangles(const Scene& sc, int32_t link, int32_t k, const Ray& r, Best& b) {
  bool hit = false;
  const int32_t first = leaf_first(link), end = first + leaf_count(link);
  for (int32_t i = first; i < end && i < sc.ntri; ++i) {
    const float t = hit_triangle(r.o, r.d, sc.tris + static_cast<int64_t>(kTriCols) * i);
    if (replaces(t, k, i, b)) {
      b.t = t;
      b.k = k;
      b.tri = i;
      hit = true;
      if (AnyHit) return true;
    }
  }
  return hit;
}

// Is child `link` of a node of the current level a leaf to test at once (a mesh
// leaf's triangles; a top-level leaf of a primitive geom), as opposed to an entry to
// visit later (an internal node; a top-level leaf of a mesh, to enter)?
FLYCUDA_HOST_DEVICE FLYCUDA_HOT bool test_now(const Scene& sc, int32_t link, int32_t mesh) {
  if (!is_leaf(link)) return false;
  if (mesh >= 0) return true;
  const int32_t k = leaf_first(link);
  return k >= sc.ngeom || sc.geom_info[kInfoCols * k + kInfoType] != kMesh;
}

// Tests a leaf at once (see test_now); true if it replaced b.
template <bool AnyHit>
FLYCUDA_HOST_DEVICE inline bool test_leaf(const Scene& sc, int32_t w, int32_t link, int32_t mesh, const Ray& r,
                                          Best& b) {
  if (mesh >= 0) return test_triangles<AnyHit>(sc, link, mesh, r, b);
  const int32_t k = leaf_first(link);  // the world frame: r is the world ray
  return leaf_count(link) > 0 && k < sc.ngeom && test_primitive(sc, w, k, r.o, r.d, b);
}

// The nearest hit of the world ray (o, d) in world w nearer than tmax (AnyHit: the
// first found; shadow rays). top: the world's refit top-level boxes [Nt, kBoxCols].
// The unbounded geoms (planes) first, then one loop over both BVH levels: at each
// node both children's boxes are tested; leaves to test at once are tested, the
// other children are visited nearer first, the farther one from the stack. Links
// that break the layout (a child not after its parent, out of range) are skipped
// and a ray stops after kMaxVisits pops, so a corrupted BVH cannot hang a kernel.
// count (null, or 2 accumulators): nodes visited and triangles tested are added to it.
// vis (null, or the block's flags, cull.h): top-level children the ray's block cannot
// see are skipped untested.
template <bool AnyHit>
FLYCUDA_HOST_DEVICE inline Best trace(const Scene& sc, int32_t w, const float* top, V3 o, V3 d, float tmax,
                                      int64_t* count = nullptr, const uint8_t* vis = nullptr) {
  Best b;
  b.t = tmax;
  b.k = -1;
  b.tri = -1;
  for (int32_t u = 0; u < sc.nunbounded; ++u) {
    const int32_t k = sc.unbounded[u];
    if (k >= 0 && k < sc.ngeom && test_primitive(sc, w, k, o, d, b) && AnyHit) return b;
  }
  int32_t stack[kStack];
  int sp = 0;
  // The world ray waits in local memory while the loop walks a mesh in its frame
  // (registers are the budget: layout.h; it is read back once per mesh left).
  FLYCUDA_PARKED float world[6] = {o.x, o.y, o.z, d.x, d.y, d.z};
  Ray r = make_ray(o, d);
  int32_t mesh = -1;                     // the geom whose frame r is in; -1: the world's
  int32_t node = sc.ntop > 0 ? 0 : kMarker;  // the entry being visited
  for (int32_t pops = 0; pops < kMaxVisits; ++pops) {
    if (node == kMarker) {  // back from a mesh (or nothing to walk)
      mesh = -1;
      r = make_ray(v3(world[0], world[1], world[2]), v3(world[3], world[4], world[5]));
    } else if (!is_leaf(node)) {  // an internal node of the current level
      const bool in_world = mesh < 0;
      const int32_t n = in_world ? sc.ntop : sc.nnode;
      const int32_t* links = in_world ? sc.top_links : sc.bvh_links;
      if (node < n) {
        if (count) count[0] += 1;
        const NodeBoxes nb = load_boxes((in_world ? top : sc.bvh_boxes) + static_cast<int64_t>(kBoxCols) * node);
        const int32_t la = links[2 * static_cast<int64_t>(node)], lc = links[2 * static_cast<int64_t>(node) + 1];
        const bool ea = (is_leaf(la) || (la > node && la < n)) && (!in_world || may_enter(vis, node, 0));
        const bool ec = (is_leaf(lc) || (lc > node && lc < n)) && (!in_world || may_enter(vis, node, 1));
        float ta = ea ? box_entry(r, nb.alo, nb.ahi, b.t) : kInf;
        float tc = ec ? box_entry(r, nb.clo, nb.chi, b.t) : kInf;
        if (count && !in_world) count[1] += (ta < kInf && is_leaf(la) ? leaf_count(la) : 0) +
                                                 (tc < kInf && is_leaf(lc) ? leaf_count(lc) : 0);
        if (ta < kInf && test_now(sc, la, mesh)) {
          if (test_leaf<AnyHit>(sc, w, la, mesh, r, b) && AnyHit) return b;
          ta = kInf;
        }
        if (tc < kInf && test_now(sc, lc, mesh)) {
          if (test_leaf<AnyHit>(sc, w, lc, mesh, r, b) && AnyHit) return b;
          tc = kInf;
        }
        if (ta > b.t) ta = kInf;  // a leaf tested above may have found a nearer hit
        if (tc > b.t) tc = kInf;
        if (ta < kInf && tc < kInf) {
          const bool a_first = ta <= tc;
          if (sp < kStack) stack[sp++] = a_first ? lc : la;
          node = a_first ? la : lc;
          continue;
        }
        if (ta < kInf || tc < kInf) {
          node = ta < kInf ? la : lc;
          continue;
        }
      }
    } else if (mesh < 0) {  // a top-level leaf of a mesh: enter its frame
      const int32_t k = leaf_first(node);
      const int32_t root = (k < sc.ngeom && leaf_count(node) > 0) ? sc.geom_info[kInfoCols * k + kInfoRoot] : -1;
      V3 ol, dl;
      if (root >= 0 && root < sc.nnode && sp < kStack && to_local(sc, w, k, r.o, r.d, ol, dl)) {
        stack[sp++] = kMarker;
        mesh = k;
        r = make_ray(ol, dl);
        node = root;
        continue;
      }
    }
    if (sp == 0) break;
    node = stack[--sp];
  }
  return b;
}

// The unit world normal at hit b of the world ray (o, d), facing the ray.
FLYCUDA_HOST_DEVICE inline V3 hit_normal(const Scene& sc, int32_t w, V3 o, V3 d, const Best& b) {
  const float* R = geom_mat(sc, w, b.k);
  V3 nl;
  const int32_t type = sc.geom_info[kInfoCols * b.k + kInfoType];
  if (b.tri >= 0) {
    nl = tri_normal(sc.tris + static_cast<int64_t>(kTriCols) * b.tri);
  } else if (type == kPlane) {  // what hit_primitive gives a plane's hit, without tracing it again
    nl = v3(0.f, 0.f, 1.f);
  } else {
    const float* xp = geom_pos(sc, w, b.k);
    const float* P = sc.geom_param + kParamCols * b.k;
    nl = hit_primitive(type, matTvec(R, sub(o, v3(xp[0], xp[1], xp[2]))),
                       matTvec(R, d), v3(P[kParamSize], P[kParamSize + 1], P[kParamSize + 2])).n;
  }
  V3 n = normalize(matvec(R, nl));
  if (dot(n, d) > 0.f) n = mul(n, -1.f);
  return n;
}

// --- the top level's refit -------------------------------------------------------

// An empty box: a point at +kInf (no ray enters it, see slab_inv); unions skip it.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT void empty_box(float* b) {
  for (int i = 0; i < 6; ++i) b[i] = kInf;
}

// b = the union of b and c (either may be empty).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT void union_box(float* b, const float* c) {
  if (c[0] >= kInf) return;
  const bool first = b[0] >= kInf;
  for (int e = 0; e < 3; ++e) {
    b[e] = first ? c[e] : fminf(b[e], c[e]);
    b[3 + e] = first ? c[3 + e] : fmaxf(b[3 + e], c[3 + e]);
  }
}

// World-frame box of render-list geom k in world w: its local box (mesh: the union
// of its root's two child boxes; primitives: from the sizes; else the bounding
// sphere) moved by the pose, padded outwards against rounding (1e-3 of its size,
// 1e-5 of its distance from the origin), so that the culling agrees with the geom's
// own test but on far silhouettes.
FLYCUDA_HOST_DEVICE inline void geom_box(const Scene& sc, int32_t w, int32_t k, float* b) {
  const float* P = sc.geom_param + kParamCols * k;
  const int32_t type = sc.geom_info[kInfoCols * k + kInfoType], root = sc.geom_info[kInfoCols * k + kInfoRoot];
  const float rb = P[kParamRbound];
  V3 c = v3(0.f, 0.f, 0.f), h = v3(rb, rb, rb);
  if (type == kSphere) h = v3(P[0], P[0], P[0]);
  if (type == kCapsule) h = v3(P[0], P[0], P[1] + P[0]);
  if (type == kCylinder) h = v3(P[0], P[0], P[1]);
  if (type == kEllipsoid || type == kBox) h = v3(P[0], P[1], P[2]);
  if (type == kMesh && root >= 0 && root < sc.nnode) {
    float m[6];
    empty_box(m);
    const float* row = sc.bvh_boxes + static_cast<int64_t>(kBoxCols) * root;
    union_box(m, row);
    union_box(m, row + 6);
    if (m[0] < kInf) {
      c = v3(0.5f * (m[0] + m[3]), 0.5f * (m[1] + m[4]), 0.5f * (m[2] + m[5]));
      h = v3(0.5f * (m[3] - m[0]), 0.5f * (m[4] - m[1]), 0.5f * (m[5] - m[2]));
    }
  }
  const float* xp = geom_pos(sc, w, k);
  const float* R = geom_mat(sc, w, k);
  const V3 cw = add(v3(xp[0], xp[1], xp[2]), matvec(R, c));
  const V3 hw = v3(fabsf(R[0]) * h.x + fabsf(R[1]) * h.y + fabsf(R[2]) * h.z,
                   fabsf(R[3]) * h.x + fabsf(R[4]) * h.y + fabsf(R[5]) * h.z,
                   fabsf(R[6]) * h.x + fabsf(R[7]) * h.y + fabsf(R[8]) * h.z);
  const float big = fmaxf(fmaxf(hw.x, hw.y), hw.z);
  const float dist = fmaxf(fmaxf(fabsf(cw.x), fabsf(cw.y)), fabsf(cw.z));
  const float pad = 1e-3f * big + 1e-5f * dist + 1e-6f;
  b[0] = cw.x - (hw.x + pad);
  b[1] = cw.y - (hw.y + pad);
  b[2] = cw.z - (hw.z + pad);
  b[3] = cw.x + (hw.x + pad);
  b[4] = cw.y + (hw.y + pad);
  b[5] = cw.z + (hw.z + pad);
}

// Refit, phase 1 (independent per node): the boxes of node j's leaf children (a
// geom's world box; empty for an empty leaf, a bad geom or no world, w < 0).
// Internal children are left for phase 2.
FLYCUDA_HOST_DEVICE inline void refit_leaves(const Scene& sc, int32_t w, int32_t j, float* boxes) {
  float* row = boxes + static_cast<int64_t>(kBoxCols) * j;
  for (int i = 0; i < 2; ++i) {
    const int32_t link = sc.top_links[2 * static_cast<int64_t>(j) + i];
    if (!is_leaf(link)) continue;
    const int32_t k = leaf_first(link);
    if (w >= 0 && leaf_count(link) > 0 && k < sc.ngeom) {
      geom_box(sc, w, k, row + 6 * i);
    } else {
      empty_box(row + 6 * i);
    }
  }
}

// Refit, phase 2 (bottom-up: node j after every node after it): the boxes of node
// j's internal children, each the union of that child's own two boxes. A link
// that breaks the layout (not after j, out of range) reads as empty.
FLYCUDA_HOST_DEVICE inline void refit_unions(const Scene& sc, int32_t j, float* boxes) {
  float* row = boxes + static_cast<int64_t>(kBoxCols) * j;
  for (int i = 0; i < 2; ++i) {
    const int32_t link = sc.top_links[2 * static_cast<int64_t>(j) + i];
    if (is_leaf(link)) continue;
    float* b = row + 6 * i;
    empty_box(b);
    if (link <= j || link >= sc.ntop) continue;
    const float* kid = boxes + static_cast<int64_t>(kBoxCols) * link;
    union_box(b, kid);
    union_box(b, kid + 6);
  }
}

}  // namespace render
}  // namespace flycuda
