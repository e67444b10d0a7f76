// flycuda: the CPU twin's ray packets: four neighbouring pixels' primary rays walk
// the BVHs together (host code only: on the GPU a warp already runs 32 rays in
// step, each thread with bvh.h's scalar trace). One node visit tests both child
// boxes for the four rays at once (4-wide SIMD through GCC's vector extensions:
// SSE on x86-64, NEON on aarch64) and takes one branch for the packet instead of
// one per ray; a mesh leaf's triangles, mesh entries, the floor and the camera rays
// are 4-wide too (shading is lane by lane).
// Each lane keeps its own mask, nearest hit and arithmetic: every 4-wide test is the
// scalar test's operations in the scalar test's order (no FMA: -ffp-contract=off;
// the scalar selects are minps/maxps), a lane enters a box only where its own box
// test says so, and exact ties go to the earlier geom, then the earlier triangle,
// whatever order a walk meets them in (bvh.h replaces). A packet that reaches the
// scalar walk's limits (only on a BVH the host check refused) hands its rays to the
// scalar walk. The images therefore equal the scalar walk's bit for bit:
// tests/render/test_render_packets.py compares them with the CPU op's timed (scalar)
// walk, and tests/csrc/test_emu.py with the GPU kernel's code on the emulated grid.
#pragma once

#if defined(FLYCUDA_DEVICE_PATH)
#error "render_packet.h is the CPU twin's: the device runs bvh.h's scalar trace per thread"
#endif

// Packets need GCC's vector extensions with vector conditions (GCC; Clang from 13):
// other compilers build the CPU twin's one-ray-at-a-time walk (render_tiles.cpp).
#if defined(__GNUC__) && (!defined(__clang__) || __clang_major__ >= 13)
#define FLYCUDA_PACKETS 1
#endif

#if defined(FLYCUDA_PACKETS)

#include "kernels/render/bvh.h"
#include "kernels/render/pixel.h"

#include <cstdint>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace flycuda {
namespace render {

constexpr int kLanes = 4;

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

inline F4 splat(float x) { return F4{x, x, x, x}; }

// a < b ? a : b and a > b ? a : b lane by lane (what minps / maxps compute), and |a|.
FLYCUDA_HOT F4 min4(F4 a, F4 b) {
#if defined(__SSE__)
  return reinterpret_cast<F4>(_mm_min_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b)));
#else
  return a < b ? a : b;
#endif
}
FLYCUDA_HOT F4 max4(F4 a, F4 b) {
#if defined(__SSE__)
  return reinterpret_cast<F4>(_mm_max_ps(reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b)));
#else
  return a > b ? a : b;
#endif
}
FLYCUDA_HOT F4 sqrt4(F4 a) {
#if defined(__SSE__)
  return reinterpret_cast<F4>(_mm_sqrt_ps(reinterpret_cast<__m128>(a)));
#else
  return F4{sqrtf(a[0]), sqrtf(a[1]), sqrtf(a[2]), sqrtf(a[3])};
#endif
}
FLYCUDA_HOT F4 abs4(F4 a) {  // the sign bit cleared, as fabsf
  return reinterpret_cast<F4>(reinterpret_cast<I4>(a) & I4{INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX});
}

// Bit i set where lane i of the comparison mask m is true.
inline uint32_t lane_bits(I4 m) {
#if defined(__SSE__)
  return static_cast<uint32_t>(_mm_movemask_ps(reinterpret_cast<__m128>(m)));
#else
  return (m[0] ? 1u : 0u) | (m[1] ? 2u : 0u) | (m[2] ? 4u : 0u) | (m[3] ? 8u : 0u);
#endif
}

// Four rays, one per lane, in the frame being walked: origins, directions,
// reciprocals, and whether any lane is parallel to an axis (a reciprocal of +-kInf).
struct Rays4 {
  F4 o[3], d[3], inv[3];
  bool parallel;
};

// bvh.h safe_inv, lane by lane.
inline F4 safe_inv4(F4 x) {
  const F4 sky = x < splat(0.f) ? splat(-kInf) : splat(kInf);
  return abs4(x) > splat(1e-30f) ? splat(1.f) / x : sky;
}

// The rays with origins o and directions d (a component's four lanes per vector):
// bvh.h make_ray, lane by lane.
inline Rays4 rays4(const F4* o, const F4* d) {
  Rays4 r;
  I4 parallel = I4{0, 0, 0, 0};
  for (int e = 0; e < 3; ++e) {
    r.o[e] = o[e];
    r.d[e] = d[e];
    r.inv[e] = safe_inv4(d[e]);
    parallel |= abs4(r.inv[e]) >= splat(kInf);
  }
  r.parallel = lane_bits(parallel) != 0;
  return r;
}

// The rays (o[i], d[i]) of the four lanes.
inline Rays4 make_rays4(const V3* o, const V3* d) {
  const F4 os[3] = {F4{o[0].x, o[1].x, o[2].x, o[3].x}, F4{o[0].y, o[1].y, o[2].y, o[3].y},
                    F4{o[0].z, o[1].z, o[2].z, o[3].z}};
  const F4 ds[3] = {F4{d[0].x, d[1].x, d[2].x, d[3].x}, F4{d[0].y, d[1].y, d[2].y, d[3].y},
                    F4{d[0].z, d[1].z, d[2].z, d[3].z}};
  return rays4(os, ds);
}

// bvh.h to_local for the four world rays: their origins and directions in geom k's
// frame (every lane: the same operations as the scalar code) into ol and dl, and the
// lanes of m whose rays meet the geom's bounding sphere (all of m if it has none).
inline uint32_t to_local4(const Scene& sc, int32_t w, int32_t k, const Rays4& world, uint32_t m, F4* ol, F4* dl) {
  const float* xp = geom_pos(sc, w, k);
  const float rbound = sc.geom_param[kParamCols * k + kParamRbound];
  const F4 oc[3] = {world.o[0] - splat(xp[0]), world.o[1] - splat(xp[1]), world.o[2] - splat(xp[2])};
  if (rbound > 0.f) {
    const F4 b = oc[0] * world.d[0] + oc[1] * world.d[1] + oc[2] * world.d[2];
    const F4 cc = (oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2]) - splat(rbound * rbound);
    m &= ~lane_bits((cc > splat(0.f)) & ((b > splat(0.f)) | (b * b < cc)));
    if (!m) return 0;
  }
  const float* R = geom_mat(sc, w, k);
  for (int e = 0; e < 3; ++e) {  // matTvec
    ol[e] = splat(R[e]) * oc[0] + splat(R[3 + e]) * oc[1] + splat(R[6 + e]) * oc[2];
    dl[e] = splat(R[e]) * world.d[0] + splat(R[3 + e]) * world.d[1] + splat(R[6 + e]) * world.d[2];
  }
  return m;
}

// Lane i's ray, for bvh.h's scalar leaf tests.
inline Ray lane_ray(const Rays4& r, int i) {
  Ray s;
  s.o = v3(r.o[0][i], r.o[1][i], r.o[2][i]);
  s.d = v3(r.d[0][i], r.d[1][i], r.d[2][i]);
  s.inv = v3(r.inv[0][i], r.inv[1][i], r.inv[2][i]);
  return s;
}

// bvh.h slab_inv, lane by lane (the same operations: its selects are minps/maxps).
// Parallel: some lane may be parallel to the slab (else its rule changes nothing).
template <bool Parallel>
FLYCUDA_HOT void slab_inv4(F4 o, F4 inv, float lo, float hi, F4& tn, F4& tf) {
  const F4 t1 = (splat(lo) - o) * inv, t2 = (splat(hi) - o) * inv;
  F4 near = min4(t1, t2), far = max4(t2, t1);  // t1 < t2 ? t1 : t2, t1 < t2 ? t2 : t1
  if (Parallel) {
    const I4 parallel = abs4(inv) >= splat(kInf), inside = (o >= splat(lo)) & (o <= splat(hi));
    near = parallel ? (inside ? splat(-kInf) : splat(kInf)) : near;
    far = parallel ? (inside ? splat(kInf) : splat(-kInf)) : far;
  }
  tn = max4(near, tn);  // near > tn ? near : tn
  tf = min4(far, tf);   // far < tf ? far : tf
}

// bvh.h box_entry, lane by lane: each lane's entry distance into [lo, hi] if it
// enters before its tmax, else kInf.
template <bool Parallel>
FLYCUDA_HOT F4 box_entry4(const Rays4& r, V3 lo, V3 hi, F4 tmax) {
  F4 tn = splat(-kInf), tf = splat(kInf);
  slab_inv4<Parallel>(r.o[0], r.inv[0], lo.x, hi.x, tn, tf);
  slab_inv4<Parallel>(r.o[1], r.inv[1], lo.y, hi.y, tn, tf);
  slab_inv4<Parallel>(r.o[2], r.inv[2], lo.z, hi.z, tn, tf);
  const I4 out = (tn > tf) | (tf < splat(kEps)) | (tn > tmax);
  return out ? splat(kInf) : tn;
}

// bvh.h hit_triangle (geoms.h), lane by lane: the four rays against one packed
// triangle, every lane through the same operations (a lane the scalar test would
// leave early is masked at the end); kInf where a lane misses.
FLYCUDA_HOT F4 hit_triangle4(const Rays4& r, const float* tri) {
  const F4 v0[3] = {splat(tri[0]), splat(tri[1]), splat(tri[2])};
  const F4 e1[3] = {splat(tri[4]), splat(tri[5]), splat(tri[6])};
  const F4 e2[3] = {splat(tri[8]), splat(tri[9]), splat(tri[10])};
  const F4 p[3] = {r.d[1] * e2[2] - r.d[2] * e2[1], r.d[2] * e2[0] - r.d[0] * e2[2], r.d[0] * e2[1] - r.d[1] * e2[0]};
  const F4 det = e1[0] * p[0] + e1[1] * p[1] + e1[2] * p[2];
  const F4 adet = abs4(det);
  const F4 sign = det > splat(0.f) ? splat(1.f) : splat(-1.f);
  const F4 s[3] = {r.o[0] - v0[0], r.o[1] - v0[1], r.o[2] - v0[2]};
  const F4 us = sign * (s[0] * p[0] + s[1] * p[1] + s[2] * p[2]);
  const F4 q[3] = {s[1] * e1[2] - s[2] * e1[1], s[2] * e1[0] - s[0] * e1[2], s[0] * e1[1] - s[1] * e1[0]};
  const F4 vs = sign * (r.d[0] * q[0] + r.d[1] * q[1] + r.d[2] * q[2]);
  const F4 ts = sign * (e2[0] * q[0] + e2[1] * q[1] + e2[2] * q[2]);
  const F4 t = ts / adet;
  const I4 miss = (adet < splat(1e-12f)) | (us < splat(0.f)) | (us > adet) | (vs < splat(0.f)) |
                  (us + vs > adet) | ~(ts > splat(0.f)) | ~(t > splat(kEps));  // the scalar test's exits
  return miss ? splat(kInf) : t;
}

// bvh.h test_triangles<false> for the lanes in m (the rays in mesh k's frame).
inline void test_triangles4(const Scene& sc, int32_t link, int32_t k, const Rays4& r, uint32_t m, Best* b) {
  const int32_t first = leaf_first(link), end = first + leaf_count(link);
  for (int32_t i = first; i < end && i < sc.ntri; ++i) {
    const F4 t = hit_triangle4(r, sc.tris + static_cast<int64_t>(kTriCols) * i);
    uint32_t hits = m & lane_bits(t < splat(kInf));
    while (hits) {
      const int lane = __builtin_ctz(hits);
      hits &= hits - 1;
      if (replaces(t[lane], k, i, b[lane])) {
        b[lane].t = t[lane];
        b[lane].k = k;
        b[lane].tri = i;
      }
    }
  }
}

inline F4 tmax4(const Best* b) { return F4{b[0].t, b[1].t, b[2].t, b[3].t}; }

// The smallest of the entry distances of the lanes in m (m not empty).
inline float nearest(F4 t, uint32_t m) {
  float best = kInf;
  for (int i = 0; i < kLanes; ++i) {
    if (((m >> i) & 1u) && t[i] < best) best = t[i];
  }
  return best;
}

// bvh.h test_leaf<false> for the lanes in m: a mesh leaf's triangles four rays at
// a time, a primitive geom's leaf lane by lane.
inline void test_leaf4(const Scene& sc, int32_t w, int32_t link, int32_t mesh, const Rays4& r, uint32_t m, Best* b) {
  if (mesh >= 0) {
    test_triangles4(sc, link, mesh, r, m, b);
    return;
  }
  for (int i = 0; i < kLanes; ++i) {
    if ((m >> i) & 1u) test_leaf<false>(sc, w, link, mesh, lane_ray(r, i), b[i]);
  }
}

// bvh.h test_primitive for the lanes in m, where geom k is an unbounded plane (the
// floor): lane by lane the same operations as to_local and geoms.h hit_plane.
inline void test_plane4(const Scene& sc, int32_t w, int32_t k, const Rays4& r, uint32_t m, Best* b) {
  F4 ol[3], dl[3];
  to_local4(sc, w, k, r, m, ol, dl);  // (no bounding sphere: every lane of m)
  const float* P = sc.geom_param + kParamCols * k;
  const F4 t = -ol[2] / dl[2];
  const F4 x = ol[0] + t * dl[0], y = ol[1] + t * dl[1];
  const float sx = P[kParamSize], sy = P[kParamSize + 1];
  I4 hit = (ol[2] > splat(0.f)) & (dl[2] < splat(0.f)) & (t > splat(kEps));  // !(o.z <= 0 || d.z >= 0)
  if (!(sx <= 0.f)) hit &= abs4(x) <= splat(sx);  // (sx <= 0 || |x| <= sx), a NaN size included
  if (!(sy <= 0.f)) hit &= abs4(y) <= splat(sy);
  uint32_t hits = m & lane_bits(hit);
  while (hits) {
    const int lane = __builtin_ctz(hits);
    hits &= hits - 1;
    if (replaces(t[lane], k, -1, b[lane])) {
      b[lane].t = t[lane];
      b[lane].k = k;
      b[lane].tri = -1;
    }
  }
}

// A packet's stack entry: a node (or kMarker) and the lanes that walk it.
struct Entry4 {
  int32_t node;
  uint32_t lanes;
};

// bvh.h trace<false> for the rays (o[i], d[i]) of the lanes in `lanes` (the other
// lanes walk along, masked: copies of a live lane's ray): b[i] = lane i's nearest hit.
// The walk: bvh.h's loop, a node entered by the lanes whose own box tests enter it,
// the nearer child first by the lanes' nearest entry. False where the walk hit one of
// the scalar walk's limits (a full stack, kMaxVisits pops), which only a BVH that the
// host did not check can reach: a packet's stack and pops bound each lane's own, but
// the scalar walk cuts off elsewhere, so the caller then walks each ray on its own.
inline bool trace4(const Scene& sc, int32_t w, const float* top, const V3* o, const V3* d, uint32_t lanes, Best* b,
                   const uint8_t* vis) {
  for (int i = 0; i < kLanes; ++i) {
    b[i].t = kInf;
    b[i].k = -1;
    b[i].tri = -1;
  }
  const Rays4 world = make_rays4(o, d);
  for (int32_t u = 0; u < sc.nunbounded; ++u) {
    const int32_t k = sc.unbounded[u];
    if (k < 0 || k >= sc.ngeom) continue;
    if (sc.geom_info[kInfoCols * k + kInfoType] == kPlane && !(sc.geom_param[kParamCols * k + kParamRbound] > 0.f)) {
      test_plane4(sc, w, k, world, lanes, b);
      continue;
    }
    for (int i = 0; i < kLanes; ++i) {
      if ((lanes >> i) & 1u) test_primitive(sc, w, k, o[i], d[i], b[i]);
    }
  }
  Rays4 r = world;
  Entry4 stack[kStack];
  int sp = 0;
  int32_t mesh = -1;
  Entry4 at{sc.ntop > 0 ? 0 : kMarker, lanes};
  for (int32_t pops = 0; pops < kMaxVisits; ++pops) {
    const int32_t node = at.node;
    if (node == kMarker) {
      mesh = -1;
      r = world;
    } else if (!is_leaf(node)) {
      const bool in_world = mesh < 0;
      const int32_t n = in_world ? sc.ntop : sc.nnode;
      const int32_t* links = in_world ? sc.top_links : sc.bvh_links;
      if (node < n) {
        const NodeBoxes nb = load_boxes((in_world ? top : sc.bvh_boxes) + static_cast<int64_t>(kBoxCols) * node);
        const int32_t la = links[2 * static_cast<int64_t>(node)], lc = links[2 * static_cast<int64_t>(node) + 1];
        const bool ea = (is_leaf(la) || (la > node && la < n)) && (!in_world || may_enter(vis, node, 0));
        const bool ec = (is_leaf(lc) || (lc > node && lc < n)) && (!in_world || may_enter(vis, node, 1));
        const F4 tmax = tmax4(b);
        F4 ta = splat(kInf), tc = splat(kInf);
        if (r.parallel) {
          if (ea) ta = box_entry4<true>(r, nb.alo, nb.ahi, tmax);
          if (ec) tc = box_entry4<true>(r, nb.clo, nb.chi, tmax);
        } else {
          if (ea) ta = box_entry4<false>(r, nb.alo, nb.ahi, tmax);
          if (ec) tc = box_entry4<false>(r, nb.clo, nb.chi, tmax);
        }
        uint32_t ma = at.lanes & lane_bits(ta < splat(kInf)), mc = at.lanes & lane_bits(tc < splat(kInf));
        if (ma && test_now(sc, la, mesh)) {
          test_leaf4(sc, w, la, mesh, r, ma, b);
          ma = 0;
        }
        if (mc && test_now(sc, lc, mesh)) {
          test_leaf4(sc, w, lc, mesh, r, mc, b);
          mc = 0;
        }
        const F4 now_t = tmax4(b);  // a leaf tested above may have found a nearer hit
        ma &= ~lane_bits(ta > now_t);
        mc &= ~lane_bits(tc > now_t);
        if (ma && mc) {
          const bool a_first = nearest(ta, ma) <= nearest(tc, mc);
          if (sp == kStack) return false;
          stack[sp++] = a_first ? Entry4{lc, mc} : Entry4{la, ma};
          at = a_first ? Entry4{la, ma} : Entry4{lc, mc};
          continue;
        }
        if (ma || mc) {
          at = ma ? Entry4{la, ma} : Entry4{lc, mc};
          continue;
        }
      }
    } else if (mesh < 0) {  // a top-level leaf of a mesh: the lanes that meet its sphere enter its frame
      const int32_t k = leaf_first(node);
      const int32_t root = (k < sc.ngeom && leaf_count(node) > 0) ? sc.geom_info[kInfoCols * k + kInfoRoot] : -1;
      if (root >= 0 && root < sc.nnode) {
        F4 ol[3], dl[3];
        const uint32_t in = to_local4(sc, w, k, world, at.lanes, ol, dl);
        if (in) {
          if (sp == kStack) return false;
          stack[sp++] = Entry4{kMarker, 0};
          mesh = k;
          r = rays4(ol, dl);
          at = Entry4{root, in};
          continue;
        }
      }
    }
    if (sp == 0) return true;
    at = stack[--sp];
  }
  return false;  // kMaxVisits pops
}

// pixel.h primary_ray for four pixels (py[i], px[i]) of tile t (world w), lane by
// lane the same operations (camera_ray, normalize, matvec).
inline void primary_rays4(const View& v, int32_t t, int32_t w, const int32_t* py, const int32_t* px, int32_t sx,
                          int32_t sy, V3* o, V3* d, float* planar) {
  const int32_t c = t % v.ncam, n = v.samples;
  const float* cp = v.cam_pos + w * v.cp_s0 + c * v.cp_s1;
  const float* M = v.cam_mat + w * v.cm_s0 + c * v.cm_s1;
  const float wf = static_cast<float>(v.width * n), hf = static_cast<float>(v.height * n);
  const float hh = v.tan_half_fovy[c], hw = hh * fdiv(wf, hf);
  F4 u, vv;
  for (int i = 0; i < kLanes; ++i) {
    u[i] = static_cast<float>(px[i] * n + sx);
    vv[i] = static_cast<float>(py[i] * n + sy);
  }
  u = (u + splat(0.5f)) / splat(wf);
  vv = (vv + splat(0.5f)) / splat(hf);
  F4 a[3] = {splat(-hw) + splat(2.f * hw) * u, splat(hh) - splat(2.f * hh) * vv, splat(-1.f)};
  const F4 n2 = a[0] * a[0] + a[1] * a[1] + a[2] * a[2];
  const F4 inv = splat(1.f) / sqrt4(n2);
  const I4 unit = n2 > splat(0.f);
  for (int e = 0; e < 3; ++e) a[e] = unit ? a[e] * inv : a[e];
  for (int i = 0; i < kLanes; ++i) {
    o[i] = v3(cp[0], cp[1], cp[2]);
    d[i] = matvec(M, v3(a[0][i], a[1][i], a[2][i]));
    planar[i] = -a[2][i];
  }
}

// render_pixel<false> for four pixels of one tile t (world w) at once: lane i is
// pixel (py[i], px[i]) = q[i], for the lanes in `lanes`.
inline void render_pixels4(const Scene& sc, const View& v, int32_t t, int32_t w, const int32_t* q,
                           const int32_t* py, const int32_t* px, uint32_t lanes, const uint8_t* vis) {
  V3 acc[kLanes];
  for (int i = 0; i < kLanes; ++i) acc[i] = v3(0.f, 0.f, 0.f);
  const float* top = tile_top(sc, v, t);
  const int first = __builtin_ctz(lanes);
  int32_t ly[kLanes], lx[kLanes];  // a dead lane walks a copy of a live one's ray
  for (int i = 0; i < kLanes; ++i) {
    const int j = ((lanes >> i) & 1u) ? i : first;
    ly[i] = py[j];
    lx[i] = px[j];
  }
  const int32_t n = v.samples;
  for (int32_t sy = 0; sy < n; ++sy) {
    for (int32_t sx = 0; sx < n; ++sx) {
      V3 o[kLanes], d[kLanes];
      float planar[kLanes];
      primary_rays4(v, t, w, ly, lx, sx, sy, o, d, planar);
      Best b[kLanes];
      if (!trace4(sc, w, top, o, d, lanes, b, vis)) {
        for (int i = 0; i < kLanes; ++i) {
          if ((lanes >> i) & 1u) b[i] = trace<false>(sc, w, top, o[i], d[i], kInf, nullptr, vis);
        }
      }
      for (int i = 0; i < kLanes; ++i) {
        if (!((lanes >> i) & 1u)) continue;
        acc[i] = add(acc[i], sample_colour(sc, v, t, w, q[i], sx == 0 && sy == 0, o[i], d[i], planar[i], b[i], top));
      }
    }
  }
  for (int i = 0; i < kLanes; ++i) {
    if ((lanes >> i) & 1u) write_rgb(v, t, q[i], py[i], px[i], acc[i]);
  }
}

}  // namespace render
}  // namespace flycuda

#endif  // FLYCUDA_PACKETS
