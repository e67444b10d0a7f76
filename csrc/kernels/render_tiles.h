// flycuda: the tile renderer's per-ray code, shared by the CPU (render_tiles.cpp)
// and CUDA (cuda/render_tiles.cu) impls, and mirrored by flycuda/reference/render.py.
//
// A ray is cast per pixel (and per sub-sample) from each selected world's camera.
// It walks the world's top-level BVH over geom boxes (refit from the live poses
// before the pixels, refit_top) and the unbounded geoms (planes); each geom it
// reaches is intersected in its local frame (meshes through their own BVH), and
// the nearest hit is shaded: ambient + headlight + the model's directional lights
// (optional shadow rays, any-hit).
// Conventions follow MuJoCo Warp's renderer: the camera looks along its -z axis with y up,
// row 0 is the top of the image, pixel centers are at +0.5, and depth is planar
// (distance along the optical axis). seg holds the geom id, or -1 for background.
#pragma once

#include "kernels/platform.h"
#include "render_geoms.h"

#include <cmath>
#include <cstdint>
#if !defined(FLYCUDA_DEVICE_PATH)
#include <chrono>
#endif

namespace flycuda {
namespace render {

// Scene data of one launch (static except the per-world poses).
struct Scene {
  const float* xpos;    // [W, G, 3] rows strided by xpos_s0 / xpos_s1
  int64_t nworld;       // W
  const float* xmat;    // [W, G, 9]
  int64_t xpos_s0, xpos_s1, xmat_s0, xmat_s1;
  const int32_t* geom_ids;   // [Gr] global geom id
  const int32_t* geom_info;  // [Gr, 2] type, mesh BVH root
  const float* geom_param;   // [Gr, kParam]
  int64_t ngeom;
  const float* bounds;       // [N, 6] mesh BVH nodes
  const int32_t* index;      // [N, 2]
  int32_t nnode;             // N
  const float* tris;         // [Ntri, 9]
  const int32_t* top_index;  // [Nt, 2] top-level BVH over the bounded geoms: leaves (k, -1)
  int32_t ntop;              // Nt
  const int32_t* unbounded;  // [U] render-list indices of the unbounded geoms (planes)
  int64_t nunbounded;        // U
  const float* lights;       // [L, kLight]
  int64_t nlight;
  const float* headlight;    // [6] ambient rgb, diffuse rgb
  const float* top_bounds;   // [S, Nt, 6] the selected worlds' top-level boxes, or null
};

// An empty box: a point at +kInf (no ray enters it, see slab); unions skip it.
FLYCUDA_HOST_DEVICE inline void empty_box(float* b) {
  for (int i = 0; i < 6; ++i) b[i] = kInf;
}

// World-frame box of render-list geom k in world w: its local box (mesh: the BVH
// root's; primitives: from the sizes; else the bounding sphere) moved by the pose,
// padded outwards against rounding (1e-3 of its size, 1e-5 of its distance from the
// origin), so that the culling agrees with the geom's own test but on far silhouettes.
FLYCUDA_HOST_DEVICE inline void geom_box(const Scene& sc, int64_t w, int64_t k, float* b) {
  const float* P = sc.geom_param + kParam * k;
  const int32_t type = sc.geom_info[2 * k], root = sc.geom_info[2 * k + 1];
  V3 c = v3(0.f, 0.f, 0.f), h = v3(P[10], P[10], P[10]);
  if (type == kSphere) h = v3(P[0], P[0], P[0]);
  if (type == kCapsule) h = v3(P[0], P[0], P[1] + P[0]);
  if (type == kCylinder) h = v3(P[0], P[0], P[1]);
  if (type == kEllipsoid || type == kBox) h = v3(P[0], P[1], P[2]);
  if (type == kMesh && root >= 0 && root < sc.nnode) {
    const float* r = sc.bounds + 6 * static_cast<int64_t>(root);
    c = v3(0.5f * (r[0] + r[3]), 0.5f * (r[1] + r[4]), 0.5f * (r[2] + r[5]));
    h = v3(0.5f * (r[3] - r[0]), 0.5f * (r[4] - r[1]), 0.5f * (r[5] - r[2]));
  }
  const int32_t g = sc.geom_ids[k];
  const float* xp = sc.xpos + w * sc.xpos_s0 + g * sc.xpos_s1;
  const float* R = sc.xmat + w * sc.xmat_s0 + g * sc.xmat_s1;
  const V3 cw = add(v3(xp[0], xp[1], xp[2]), matvec(R, c));
  const float hw[3] = {fabsf(R[0]) * h.x + fabsf(R[1]) * h.y + fabsf(R[2]) * h.z,
                       fabsf(R[3]) * h.x + fabsf(R[4]) * h.y + fabsf(R[5]) * h.z,
                       fabsf(R[6]) * h.x + fabsf(R[7]) * h.y + fabsf(R[8]) * h.z};
  const float big = fmaxf(fmaxf(hw[0], hw[1]), hw[2]);
  const float dist = fmaxf(fmaxf(fabsf(cw.x), fabsf(cw.y)), fabsf(cw.z));
  const float pad = 1e-3f * big + 1e-5f * dist + 1e-6f;
  const float cc[3] = {cw.x, cw.y, cw.z};
  for (int i = 0; i < 3; ++i) {
    b[i] = cc[i] - (hw[i] + pad);
    b[3 + i] = cc[i] + (hw[i] + pad);
  }
}

// Refits the top-level BVH of world w into `nodes` [Nt, 6] (one tile's rows):
// leaves from the live geom poses, then each parent as the union of its children,
// bottom-up (children have larger indices than their parent; validated on the
// host, and links that break it are read as empty). No world (w < 0): all empty.
FLYCUDA_HOST_DEVICE inline void refit_top(const Scene& sc, int64_t w, float* nodes) {
  for (int32_t j = sc.ntop - 1; j >= 0; --j) {
    float* b = nodes + 6 * static_cast<int64_t>(j);
    empty_box(b);
    if (w < 0) continue;
    const int32_t a = sc.top_index[2 * static_cast<int64_t>(j)], c = sc.top_index[2 * static_cast<int64_t>(j) + 1];
    if (c < 0) {
      if (a >= 0 && a < sc.ngeom) geom_box(sc, w, a, b);
      continue;
    }
    const int32_t kids[2] = {a, c};
    for (int i = 0; i < 2; ++i) {
      if (kids[i] <= j || kids[i] >= sc.ntop) continue;
      const float* k = nodes + 6 * static_cast<int64_t>(kids[i]);
      if (k[0] >= kInf) continue;  // an empty child
      const bool first = b[0] >= kInf;
      for (int e = 0; e < 3; ++e) {
        b[e] = first ? k[e] : fminf(b[e], k[e]);
        b[3 + e] = first ? k[3 + e] : fmaxf(b[3 + e], k[3 + e]);
      }
    }
  }
}

struct RayResult {
  int32_t k;  // render-list index of the nearest geom, -1 if none
  float t;
  V3 n;       // world normal, unit, facing the ray
};

// Does the ray (o, d) miss the sphere (c, r)? (d is a unit vector.)
FLYCUDA_HOST_DEVICE inline bool misses_sphere(V3 o, V3 d, V3 c, float r) {
  const V3 oc = sub(o, c);
  const float b = dot(oc, d), cc = dot(oc, oc) - r * r;
  return cc > 0.f && (b > 0.f || b * b < cc);
}

// Intersects render-list geom k of world w with the world ray (o, d); a hit nearer
// than r.t, or as near from a geom earlier in the render list, replaces r (normal
// still in world frame, not normalized): exact ties resolve as in render-list order
// whatever order the top level visits the geoms in. Returns whether it replaced r
// (any_hit callers stop there).
FLYCUDA_HOST_DEVICE inline bool test_geom(const Scene& sc, int64_t w, int64_t k, V3 o, V3 d, bool any_hit,
                                          RayResult& r) {
  const int32_t g = sc.geom_ids[k];
  const float* P = sc.geom_param + kParam * k;
  const float* xp = sc.xpos + w * sc.xpos_s0 + g * sc.xpos_s1;
  const V3 c = v3(xp[0], xp[1], xp[2]);
  if (P[10] > 0.f && misses_sphere(o, d, c, P[10])) return false;  // geom bounding sphere
  const float* R = sc.xmat + w * sc.xmat_s0 + g * sc.xmat_s1;
  const V3 ol = matTvec(R, sub(o, c)), dl = matTvec(R, d);
  // A mesh reports hits strictly nearer than its tmax: one float past r.t lets a tie
  // through (and stays kInf while there is no hit: a triangle's miss is kInf).
  const Hit h = hit_geom(sc.geom_info[2 * k], ol, dl, v3(P[0], P[1], P[2]), sc.geom_info[2 * k + 1],
                         sc.bounds, sc.index, sc.tris, sc.nnode, nextafterf(r.t, kInf), any_hit);
  if (!(h.t < r.t || (h.t == r.t && k < r.k))) return false;
  r.k = static_cast<int32_t>(k);
  r.t = h.t;
  r.n = matvec(R, h.n);
  return true;
}

// Nearest geom along the world ray (o, d) of world w; any_hit stops at the first hit.
// top: the tile's refit top-level boxes [Nt, 6] (refit_top), or null to test every geom.
FLYCUDA_HOST_DEVICE inline RayResult trace(const Scene& sc, int64_t w, const float* top, V3 o, V3 d,
                                           float tmax, bool any_hit) {
  RayResult r;
  r.k = -1;
  r.t = tmax;
  r.n = v3(0.f, 0.f, 1.f);
  if (top) {
    bool stop = false;
    for (int64_t u = 0; u < sc.nunbounded && !stop; ++u) {
      const int64_t k = sc.unbounded[u];
      if (k >= 0 && k < sc.ngeom) stop = test_geom(sc, w, k, o, d, any_hit, r) && any_hit;
    }
    if (!stop) {
      traverse<kTopStack>(o, d, top, sc.top_index, 0, sc.ntop, r.t, [&](int32_t first, int64_t count) {
        for (int64_t k = first; k < first + count; ++k) {
          if (k >= 0 && k < sc.ngeom && test_geom(sc, w, k, o, d, any_hit, r) && any_hit) return true;
        }
        return false;
      });
    }
  } else {
    for (int64_t k = 0; k < sc.ngeom; ++k) {
      if (test_geom(sc, w, k, o, d, any_hit, r) && any_hit) break;
    }
  }
  if (r.k >= 0) {
    r.n = normalize(r.n);
    if (dot(r.n, d) > 0.f) r.n = mul(r.n, -1.f);
  }
  return r;
}

// Index of the checker cell holding x (in cells): floor(x), and 0 where that is
// beyond +-2^30 or NaN (casting such floats to an integer is undefined).
FLYCUDA_HOST_DEVICE inline int64_t cell_index(float x) {
  const float f = floorf(x);
  return (f >= -1073741824.f && f <= 1073741824.f) ? static_cast<int64_t>(f) : 0;
}

// Shaded color of a hit (world ray o, d): base * (ambient + headlight + lights).
FLYCUDA_HOST_DEVICE inline V3 shade(const Scene& sc, int64_t w, const float* top, V3 o, V3 d,
                                    const RayResult& r, bool shadows) {
  const float* P = sc.geom_param + kParam * r.k;
  V3 base = v3(P[3], P[4], P[5]);
  const float cell = P[9];
  const V3 p = add(o, mul(d, r.t));
  if (cell > 0.f) {  // checkered plane: cells in the plane's local frame
    const int32_t g = sc.geom_ids[r.k];
    const float* xp = sc.xpos + w * sc.xpos_s0 + g * sc.xpos_s1;
    const V3 pl = matTvec(sc.xmat + w * sc.xmat_s0 + g * sc.xmat_s1, sub(p, v3(xp[0], xp[1], xp[2])));
    if ((cell_index(pl.x / cell) + cell_index(pl.y / cell)) & 1) base = v3(P[6], P[7], P[8]);
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
      if (trace(sc, w, top, so, mul(ld, -1.f), kInf, true).k >= 0) continue;
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

// [0, 1] to 0..255; NaN reads as 0 (a NaN-to-integer cast is undefined, and
// host and device would disagree on it).
FLYCUDA_HOST_DEVICE inline uint8_t to_u8(float c) {
  c = c > 0.f ? (c < 1.f ? c : 1.f) : 0.f;
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

// The world tile s shows: worlds[s], or -1 for an empty mosaic cell (s >= S) or a
// world id outside [0, W) (checked on the host, except in capture or with check=False).
FLYCUDA_HOST_DEVICE inline int64_t tile_world(const int32_t* worlds, int64_t s, int64_t S, int64_t W) {
  const int64_t w = s < S ? worlds[s] : -1;
  return (w >= 0 && w < W) ? w : -1;
}

// A pixel that shows no world: black; for a tile (s < S) also no depth and no geom.
FLYCUDA_HOST_DEVICE inline void clear_pixel(const Out& out, int64_t s, int64_t S, int64_t py, int64_t px,
                                            int64_t H, int64_t Wd) {
  if (out.rgb) {
    uint8_t* dst = rgb_at(out, s, py, px, H, Wd);
    dst[0] = dst[1] = dst[2] = 0;
  }
  if (s < S) {
    const int64_t pix = (s * H + py) * Wd + px;
    if (out.depth) out.depth[pix] = 0.f;
    if (out.seg) out.seg[pix] = -1;
  }
}

// Pixels per chunk: a CUDA block, or one CPU work item (the unit of the stage timers).
constexpr int64_t kChunk = 128;
// Stage timer columns: trace (primary rays), shade (lighting, shadow rays), total (chunk).
constexpr int kTimers = 3;

// A timestamp: clock64() cycles on the GPU, steady-clock nanoseconds on the CPU.
FLYCUDA_HOST_DEVICE inline int64_t now() {
#if defined(FLYCUDA_DEVICE_PATH)
  return static_cast<int64_t>(clock64());
#else
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

// Everything one pixel does: the kernel body of both impls. With `stage` (2 int64
// accumulators), the time spent tracing and shading is added to it.
FLYCUDA_HOST_DEVICE inline void render_pixel(const Scene& sc, const Out& out, int64_t s, int64_t w,
                                             int64_t py, int64_t px, int64_t H, int64_t Wd,
                                             const float* cam_pos, const float* cam_mat,
                                             float tan_half_fovy, float zfar, int64_t n, bool shadows,
                                             int64_t* stage) {
  const V3 o = v3(cam_pos[0], cam_pos[1], cam_pos[2]);
  const float* top = sc.top_bounds ? sc.top_bounds + 6 * sc.ntop * s : nullptr;
  V3 acc = v3(0.f, 0.f, 0.f);
  for (int64_t sy = 0; sy < n; ++sy) {
    for (int64_t sx = 0; sx < n; ++sx) {
      const V3 dc = camera_ray(px, py, sx, sy, n, Wd, H, tan_half_fovy);
      const V3 d = matvec(cam_mat, dc);
      const int64_t t0 = stage ? now() : 0;
      RayResult r = trace(sc, w, top, o, d, kInf, false);
      const int64_t t1 = stage ? now() : 0;
      if (r.k >= 0 && zfar > 0.f && r.t * -dc.z > zfar) r.k = -1;  // beyond the far plane
      if (sx == 0 && sy == 0) {  // depth and seg from the first sub-sample (as MuJoCo Warp)
        const int64_t pix = (s * H + py) * Wd + px;
        if (out.depth) out.depth[pix] = r.k >= 0 ? r.t * -dc.z : 0.f;
        if (out.seg) out.seg[pix] = r.k >= 0 ? sc.geom_ids[r.k] : -1;
      }
      if (out.rgb && r.k >= 0) acc = add(acc, shade(sc, w, top, o, d, r, shadows));
      if (stage) {
        stage[0] += t1 - t0;
        stage[1] += now() - t1;
      }
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
