// flycuda: ray-geom intersections of the tile renderer, in a geom's local frame
// (host and device code): plane, sphere, capsule, ellipsoid, cylinder, box, and
// one packed triangle (meshes and heightfields go through bvh.h). Mirrored by
// flycuda/reference/render.py.
#pragma once

#include "kernels/platform.h"
#include "layout.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace render {

struct V3 { float x, y, z; };
FLYCUDA_HOST_DEVICE inline V3 v3(float x, float y, float z) { V3 r; r.x = x; r.y = y; r.z = z; return r; }
FLYCUDA_HOST_DEVICE inline V3 add(V3 a, V3 b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
FLYCUDA_HOST_DEVICE inline V3 sub(V3 a, V3 b) { return v3(a.x - b.x, a.y - b.y, a.z - b.z); }
FLYCUDA_HOST_DEVICE inline V3 mul(V3 a, float s) { return v3(a.x * s, a.y * s, a.z * s); }
FLYCUDA_HOST_DEVICE inline float dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
FLYCUDA_HOST_DEVICE inline V3 cross(V3 a, V3 b) {
  return v3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}

// The renderer's division and reciprocal length. The extension compiles every
// kernel with -prec-div=true -prec-sqrt=true, so that the ops' bits match their
// references; the renderer is held to the float64 reference's bounds instead, so
// on the GPU it divides with __fdividef (MUFU.RCP and a multiply, 2 ulp, no
// IEEE slow path) and normalizes with rsqrtf (MUFU.RSQ, 2 ulp). The CPU twin and
// the emulator keep IEEE division and sqrt (they are bit-identical to each other).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float fdiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float rlength(float sq) {
#if defined(__CUDA_ARCH__)
  return rsqrtf(sq);
#else
  return 1.f / sqrtf(sq);
#endif
}
FLYCUDA_HOST_DEVICE inline V3 normalize(V3 a) {
  const float n2 = dot(a, a);
  return n2 > 0.f ? mul(a, rlength(n2)) : a;
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
  const float t = fdiv(-b - sqrtf(disc), a);
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
  const V3 os = v3(fdiv(o.x, s.x), fdiv(o.y, s.y), fdiv(o.z, s.z));
  const V3 ds = v3(fdiv(d.x, s.x), fdiv(d.y, s.y), fdiv(d.z, s.z));
  Hit h = miss();
  h.t = quad_entry(dot(ds, ds), dot(os, ds), dot(os, os) - 1.f);
  if (h.t < kInf) {
    const V3 p = add(o, mul(d, h.t));
    h.n = v3(fdiv(p.x, s.x * s.x), fdiv(p.y, s.y * s.y), fdiv(p.z, s.z * s.z));
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
      const float t = fdiv(side * h - o.z, d.z);
      const float x = o.x + t * d.x, y = o.y + t * d.y;
      if (t > kEps && x * x + y * y <= r * r && t < best.t) { best.t = t; best.n = v3(0.f, 0.f, (float)side); }
    }
  }
  return best;
}

// One axis of a slab test: narrows [tn, tf] to where o + t d is within [lo, hi];
// `entered` says whether this axis set tn (the face the ray enters through).
FLYCUDA_HOST_DEVICE FLYCUDA_HOT void slab_axis(float o, float d, float lo, float hi, float& tn, float& tf,
                                               bool& entered) {
  entered = false;
  if (d == 0.f) {  // parallel: inside the slab or a miss
    if (o < lo || o > hi) tf = -kInf;
    return;
  }
  float t1 = fdiv(lo - o, d), t2 = fdiv(hi - o, d);
  if (t1 > t2) { const float tmp = t1; t1 = t2; t2 = tmp; }
  if (t1 > tn) { tn = t1; entered = true; }
  if (t2 < tf) tf = t2;
}

// The box |x| <= s (local frame), entered from outside; the normal of the entry face.
FLYCUDA_HOST_DEVICE inline Hit hit_box(V3 o, V3 d, V3 s) {
  float tn = -kInf, tf = kInf;
  bool ex, ey, ez;
  slab_axis(o.x, d.x, -s.x, s.x, tn, tf, ex);
  slab_axis(o.y, d.y, -s.y, s.y, tn, tf, ey);
  slab_axis(o.z, d.z, -s.z, s.z, tn, tf, ez);
  Hit h = miss();
  if (tn > tf || tf < kEps || !(tn > kEps)) return h;
  h.t = tn;  // the axis that set tn last wins, as the slab order x, y, z
  const V3 sgn = v3(d.x > 0.f ? -1.f : 1.f, d.y > 0.f ? -1.f : 1.f, d.z > 0.f ? -1.f : 1.f);
  h.n = ez ? v3(0.f, 0.f, sgn.z) : (ey ? v3(0.f, sgn.y, 0.f) : v3(sgn.x, 0.f, 0.f));
  return h;
}

// z = 0 plane seen from above; |x| <= sx, |y| <= sy unless a size is 0 (infinite).
FLYCUDA_HOST_DEVICE inline Hit hit_plane(V3 o, V3 d, float sx, float sy) {
  Hit h = miss();
  if (o.z <= 0.f || d.z >= 0.f) return h;
  const float t = fdiv(-o.z, d.z);
  const float x = o.x + t * d.x, y = o.y + t * d.y;
  if (t > kEps && (sx <= 0.f || fabsf(x) <= sx) && (sy <= 0.f || fabsf(y) <= sy)) {
    h.t = t;
    h.n = v3(0.f, 0.f, 1.f);
  }
  return h;
}

// Moller-Trumbore on a packed triangle (layout.h: v0, e1, e2, each a float4):
// the distance, or kInf. The barycentrics and the distance are tested scaled by
// |det| (the sign folded in), so the one division happens only for a ray that
// crosses the triangle. The normal is cross(e1, e2) (tri_normal), taken once for
// the nearest hit only.
FLYCUDA_HOST_DEVICE FLYCUDA_HOT float hit_triangle(V3 o, V3 d, const float* tri) {
#if defined(__CUDA_ARCH__)
  const float4* row = reinterpret_cast<const float4*>(tri);  // rows of 48 B, the array 16 B aligned (host check)
  const float4 a = __ldg(row), b = __ldg(row + 1), c = __ldg(row + 2);
  const V3 v0 = v3(a.x, a.y, a.z), e1 = v3(b.x, b.y, b.z), e2 = v3(c.x, c.y, c.z);
#else
  const V3 v0 = v3(tri[0], tri[1], tri[2]), e1 = v3(tri[4], tri[5], tri[6]), e2 = v3(tri[8], tri[9], tri[10]);
#endif
  const V3 p = cross(d, e2);
  const float det = dot(e1, p);
  if (fabsf(det) < 1e-12f) return kInf;
  const float sign = det > 0.f ? 1.f : -1.f, adet = fabsf(det);  // u = us / adet, v = vs / adet
  const V3 s = sub(o, v0);
  const float us = sign * dot(s, p);
  if (us < 0.f || us > adet) return kInf;
  const V3 q = cross(s, e1);
  const float vs = sign * dot(d, q);
  if (vs < 0.f || us + vs > adet) return kInf;
  const float ts = sign * dot(e2, q);
  if (!(ts > 0.f)) return kInf;
  const float t = fdiv(ts, adet);
  return t > kEps ? t : kInf;
}

FLYCUDA_HOST_DEVICE inline V3 tri_normal(const float* tri) {
  return cross(v3(tri[4], tri[5], tri[6]), v3(tri[8], tri[9], tri[10]));
}

// The intersection of a local-frame ray with primitive geom `type` (sizes s);
// meshes are walked by bvh.h's traversal, not here.
FLYCUDA_HOST_DEVICE inline Hit hit_primitive(int32_t type, V3 o, V3 d, V3 s) {
  switch (type) {
    case kPlane: return hit_plane(o, d, s.x, s.y);
    case kSphere: return hit_sphere(o, d, v3(0.f, 0.f, 0.f), s.x);
    case kCapsule: return hit_capsule(o, d, s.x, s.y);
    case kEllipsoid: return hit_ellipsoid(o, d, s);
    case kCylinder: return hit_cylinder(o, d, s.x, s.y);
    case kBox: return hit_box(o, d, s);
    default: return miss();
  }
}

}  // namespace render
}  // namespace flycuda
