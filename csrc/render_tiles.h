// flycuda: the tile renderer's per-ray code, shared by the CPU (render_tiles.cpp)
// and CUDA (cuda/render_tiles.cu) impls, and mirrored by flycuda/reference/render.py.
//
// A ray is cast per pixel (and per sub-sample) from each selected world's camera.
// It is moved into every geom's local frame and intersected there, and the nearest hit
// is shaded: ambient + headlight + the model's directional lights (optional shadow rays).
// Conventions follow MuJoCo Warp's renderer: the camera looks along its -z axis with y up,
// row 0 is the top of the image, pixel centers are at +0.5, and depth is planar
// (distance along the optical axis). seg holds the geom id, or -1 for background.
#pragma once

#include "common.h"

#include <cmath>
#include <cstdint>

namespace flycuda {
namespace render {

// Geom types: MuJoCo's mjtGeom numbering.
enum GeomType : int32_t { kPlane = 0, kSphere = 2, kCapsule = 3, kEllipsoid = 4, kCylinder = 5,
                          kBox = 6, kMesh = 7 };
constexpr int kParam = 12;     // geom_param columns: size[3] rgb[3] rgb2[3] checker rbound pad
constexpr int kLight = 10;     // lights columns: dir[3] ambient[3] diffuse[3] castshadow
constexpr int kStack = 64;     // BVH traversal stack
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
FLYCUDA_HOST_DEVICE inline float hit_triangle(V3 o, V3 d, const float* tri, V3* n) {
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

// BVH: bounds [N, 6] (lo, hi); index [N, 2]: internal (left, right), leaf (first tri, -count).
FLYCUDA_HOST_DEVICE inline Hit hit_mesh(V3 o, V3 d, int32_t root, const float* bounds,
                                        const int32_t* index, const float* tris) {
  Hit best = miss();
  int32_t stack[kStack];
  int sp = 0;
  stack[sp++] = root;
  while (sp > 0) {
    const int32_t node = stack[--sp];
    const float* b = bounds + 6 * node;
    if (slab(o, d, v3(b[0], b[1], b[2]), v3(b[3], b[4], b[5]), best.t, nullptr) >= kInf) continue;
    const int32_t a = index[2 * node], c = index[2 * node + 1];
    if (c < 0) {  // leaf
      for (int32_t k = a; k < a - c; ++k) {
        V3 n = v3(0.f, 0.f, 1.f);
        const float t = hit_triangle(o, d, tris + 9 * k, &n);
        if (t < best.t) { best.t = t; best.n = n; }
      }
    } else if (sp + 2 <= kStack) {
      stack[sp++] = c;
      stack[sp++] = a;
    }
  }
  return best;
}

// The intersection of a local-frame ray with geom `type` (sizes s, mesh root).
FLYCUDA_HOST_DEVICE inline Hit hit_geom(int32_t type, V3 o, V3 d, V3 s, int32_t root,
                                        const float* bounds, const int32_t* index, const float* tris) {
  switch (type) {
    case kPlane: return hit_plane(o, d, s.x, s.y);
    case kSphere: return hit_sphere(o, d, v3(0.f, 0.f, 0.f), s.x);
    case kCapsule: return hit_capsule(o, d, s.x, s.y);
    case kEllipsoid: return hit_ellipsoid(o, d, s);
    case kCylinder: return hit_cylinder(o, d, s.x, s.y);
    case kBox: return hit_box(o, d, s);
    case kMesh: return root >= 0 ? hit_mesh(o, d, root, bounds, index, tris) : miss();
    default: return miss();
  }
}

// Scene data of one launch (static except the per-world poses).
struct Scene {
  const float* xpos;    // [W, G, 3] rows strided by xpos_s0 / xpos_s1
  const float* xmat;    // [W, G, 9]
  int64_t xpos_s0, xpos_s1, xmat_s0, xmat_s1;
  const int32_t* geom_ids;   // [Gr] global geom id
  const int32_t* geom_info;  // [Gr, 2] type, mesh BVH root
  const float* geom_param;   // [Gr, kParam]
  int64_t ngeom;
  const float* bounds;       // [N, 6]
  const int32_t* index;      // [N, 2]
  const float* tris;         // [Ntri, 9]
  const float* lights;       // [L, kLight]
  int64_t nlight;
  const float* headlight;    // [6] ambient rgb, diffuse rgb
  const float* world_bounds; // [W, 4] sphere around each world's bounded geoms, or null
};

// The sphere (center, radius) enclosing the bounding spheres of world w's
// bounded geoms (all but planes): rays that miss it skip those geoms. Exact
// culling: it never changes an image, only how many geoms a ray tests.
FLYCUDA_HOST_DEVICE inline void world_bound(const Scene& sc, int64_t w, float* out4) {
  V3 c = v3(0.f, 0.f, 0.f);
  int64_t cnt = 0;
  for (int64_t k = 0; k < sc.ngeom; ++k) {
    if (sc.geom_param[kParam * k + 10] <= 0.f) continue;
    const float* xp = sc.xpos + w * sc.xpos_s0 + sc.geom_ids[k] * sc.xpos_s1;
    c = add(c, v3(xp[0], xp[1], xp[2]));
    ++cnt;
  }
  float r = 0.f;
  if (cnt > 0) {
    c = mul(c, 1.f / static_cast<float>(cnt));
    for (int64_t k = 0; k < sc.ngeom; ++k) {
      const float rb = sc.geom_param[kParam * k + 10];
      if (rb <= 0.f) continue;
      const float* xp = sc.xpos + w * sc.xpos_s0 + sc.geom_ids[k] * sc.xpos_s1;
      const V3 dc = sub(v3(xp[0], xp[1], xp[2]), c);
      r = fmaxf(r, sqrtf(dot(dc, dc)) + rb);
    }
    r = r * 1.0001f + 1e-6f;  // round outwards
  }
  out4[0] = c.x;
  out4[1] = c.y;
  out4[2] = c.z;
  out4[3] = cnt > 0 ? r : -1.f;  // -1: no bounded geoms
}

// Does the ray (o, d) miss the sphere (c, r)? (d is a unit vector.)
FLYCUDA_HOST_DEVICE inline bool misses_sphere(V3 o, V3 d, V3 c, float r) {
  const V3 oc = sub(o, c);
  const float b = dot(oc, d), cc = dot(oc, oc) - r * r;
  return cc > 0.f && (b > 0.f || b * b < cc);
}

struct RayResult {
  int32_t k;  // render-list index of the nearest geom, -1 if none
  float t;
  V3 n;       // world normal, unit, facing the ray
};

// Nearest geom along the world ray (o, d) of world w; any_hit stops at the first hit.
FLYCUDA_HOST_DEVICE inline RayResult trace(const Scene& sc, int64_t w, V3 o, V3 d, float tmax,
                                           bool any_hit) {
  RayResult r;
  r.k = -1;
  r.t = tmax;
  r.n = v3(0.f, 0.f, 1.f);
  bool skip_bounded = false;
  if (sc.world_bounds) {  // world-level reject of every bounded geom
    const float* wb = sc.world_bounds + 4 * w;
    skip_bounded = wb[3] < 0.f || misses_sphere(o, d, v3(wb[0], wb[1], wb[2]), wb[3]);
  }
  for (int64_t k = 0; k < sc.ngeom; ++k) {
    const int32_t g = sc.geom_ids[k];
    const float* P = sc.geom_param + kParam * k;
    const float rbound = P[10];
    if (rbound > 0.f && skip_bounded) continue;
    const float* xp = sc.xpos + w * sc.xpos_s0 + g * sc.xpos_s1;
    const V3 c = v3(xp[0], xp[1], xp[2]);
    if (rbound > 0.f && misses_sphere(o, d, c, rbound)) continue;  // geom bounding sphere
    const float* R = sc.xmat + w * sc.xmat_s0 + g * sc.xmat_s1;
    const V3 ol = matTvec(R, sub(o, c)), dl = matTvec(R, d);
    const Hit h = hit_geom(sc.geom_info[2 * k], ol, dl, v3(P[0], P[1], P[2]), sc.geom_info[2 * k + 1],
                           sc.bounds, sc.index, sc.tris);
    if (h.t < r.t) {
      r.k = static_cast<int32_t>(k);
      r.t = h.t;
      r.n = matvec(R, h.n);
      if (any_hit) return r;
    }
  }
  if (r.k >= 0) {
    r.n = normalize(r.n);
    if (dot(r.n, d) > 0.f) r.n = mul(r.n, -1.f);
  }
  return r;
}

// Shaded color of a hit (world ray o, d): base * (ambient + headlight + lights).
FLYCUDA_HOST_DEVICE inline V3 shade(const Scene& sc, int64_t w, V3 o, V3 d, const RayResult& r,
                                    bool shadows) {
  const float* P = sc.geom_param + kParam * r.k;
  V3 base = v3(P[3], P[4], P[5]);
  const float cell = P[9];
  const V3 p = add(o, mul(d, r.t));
  if (cell > 0.f) {  // checkered plane: cells in the plane's local frame
    const int32_t g = sc.geom_ids[r.k];
    const float* xp = sc.xpos + w * sc.xpos_s0 + g * sc.xpos_s1;
    const V3 pl = matTvec(sc.xmat + w * sc.xmat_s0 + g * sc.xmat_s1, sub(p, v3(xp[0], xp[1], xp[2])));
    const int64_t ix = static_cast<int64_t>(floorf(pl.x / cell)), iy = static_cast<int64_t>(floorf(pl.y / cell));
    if ((ix + iy) & 1) base = v3(P[6], P[7], P[8]);
  }
  const float* H = sc.headlight;
  const float hd = fmaxf(0.f, -dot(r.n, d));
  V3 light = v3(H[0] + H[3] * hd, H[1] + H[4] * hd, H[2] + H[5] * hd);
  for (int64_t l = 0; l < sc.nlight; ++l) {
    const float* L = sc.lights + kLight * l;
    light = add(light, v3(L[3], L[4], L[5]));
    const V3 ld = v3(L[0], L[1], L[2]);
    const float diff = fmaxf(0.f, -dot(r.n, ld));
    if (diff <= 0.f) continue;
    if (shadows && L[9] > 0.f) {
      const V3 so = add(p, mul(r.n, 1e-4f * fmaxf(1.f, r.t)));
      if (trace(sc, w, so, mul(ld, -1.f), kInf, true).k >= 0) continue;
    }
    light = add(light, mul(v3(L[6], L[7], L[8]), diff));
  }
  return v3(base.x * light.x, base.y * light.y, base.z * light.z);
}

// Camera-frame direction of sub-sample (sx, sy) of pixel (px, py): MuJoCo Warp's compute_ray.
FLYCUDA_HOST_DEVICE inline V3 camera_ray(int64_t px, int64_t py, int64_t sx, int64_t sy, int64_t n,
                                         int64_t width, int64_t height, float tan_half_fovy) {
  const float w = static_cast<float>(width * n), h = static_cast<float>(height * n);
  const float hh = tan_half_fovy, hw = hh * (w / h);
  const float u = (static_cast<float>(px * n + sx) + 0.5f) / w;
  const float v = (static_cast<float>(py * n + sy) + 0.5f) / h;
  return normalize(v3(-hw + 2.f * hw * u, hh - 2.f * hh * v, -1.f));
}

FLYCUDA_HOST_DEVICE inline uint8_t to_u8(float c) {
  c = c < 0.f ? 0.f : (c > 1.f ? 1.f : c);
  return static_cast<uint8_t>(c * 255.f + 0.5f);
}

// Output pointers/strides of one launch.
struct Out {
  uint8_t* rgb;     // tiles [S, H, Wd, 3] or mosaic [rows * H, cols * Wd, 3]; null = none
  int64_t cols;     // mosaic columns (0: tiles)
  float* depth;     // [S, H, Wd] or null
  int32_t* seg;     // [S, H, Wd] or null
};

// Address of pixel (py, px) of tile s in the rgb output (tiles or mosaic).
FLYCUDA_HOST_DEVICE inline uint8_t* rgb_at(const Out& out, int64_t s, int64_t py, int64_t px,
                                           int64_t H, int64_t Wd) {
  if (out.cols > 0) {
    const int64_t row = s / out.cols, col = s % out.cols;
    return out.rgb + ((row * H + py) * (out.cols * Wd) + col * Wd + px) * 3;
  }
  return out.rgb + ((s * H + py) * Wd + px) * 3;
}

// Number of tiles a launch covers: S, or every cell of the mosaic (the cells
// past the last world are painted black, so every output byte is defined).
FLYCUDA_HOST_DEVICE inline int64_t tiles_covered(const Out& out, int64_t S) {
  return (out.rgb && out.cols > 0) ? ((S + out.cols - 1) / out.cols) * out.cols : S;
}

FLYCUDA_HOST_DEVICE inline void clear_pixel(const Out& out, int64_t s, int64_t py, int64_t px,
                                            int64_t H, int64_t Wd) {
  uint8_t* dst = rgb_at(out, s, py, px, H, Wd);
  dst[0] = dst[1] = dst[2] = 0;
}

// Everything one pixel does: the kernel body of both impls.
FLYCUDA_HOST_DEVICE inline void render_pixel(const Scene& sc, const Out& out, int64_t s, int64_t w,
                                             int64_t py, int64_t px, int64_t H, int64_t Wd,
                                             const float* cam_pos, const float* cam_mat,
                                             float tan_half_fovy, float zfar, int64_t n, bool shadows) {
  const V3 o = v3(cam_pos[0], cam_pos[1], cam_pos[2]);
  V3 acc = v3(0.f, 0.f, 0.f);
  for (int64_t sy = 0; sy < n; ++sy) {
    for (int64_t sx = 0; sx < n; ++sx) {
      const V3 dc = camera_ray(px, py, sx, sy, n, Wd, H, tan_half_fovy);
      const V3 d = matvec(cam_mat, dc);
      RayResult r = trace(sc, w, o, d, kInf, false);
      if (r.k >= 0 && zfar > 0.f && r.t * -dc.z > zfar) r.k = -1;  // beyond the far plane
      if (sx == 0 && sy == 0) {  // depth and seg from the first sub-sample (as MuJoCo Warp)
        const int64_t pix = (s * H + py) * Wd + px;
        if (out.depth) out.depth[pix] = r.k >= 0 ? r.t * -dc.z : 0.f;
        if (out.seg) out.seg[pix] = r.k >= 0 ? sc.geom_ids[r.k] : -1;
      }
      if (out.rgb && r.k >= 0) acc = add(acc, shade(sc, w, o, d, r, shadows));
    }
  }
  if (!out.rgb) return;
  acc = mul(acc, 1.f / static_cast<float>(n * n));
  uint8_t* dst = rgb_at(out, s, py, px, H, Wd);
  dst[0] = to_u8(acc.x);
  dst[1] = to_u8(acc.y);
  dst[2] = to_u8(acc.z);
}

}  // namespace render
}  // namespace flycuda
