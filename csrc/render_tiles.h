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
  const float* bounds;       // [N, 6]
  const int32_t* index;      // [N, 2]
  int32_t nnode;             // N
  const float* tris;         // [Ntri, 9]
  const float* lights;       // [L, kLight]
  int64_t nlight;
  const float* headlight;    // [6] ambient rgb, diffuse rgb
  const float* world_bounds; // [S, 4] sphere around each selected world's bounded geoms, or null
};

// The sphere (center, radius) enclosing the bounding spheres of world w's
// bounded geoms (all but planes): rays that miss it skip those geoms. Exact
// culling: it never changes an image, only how many geoms a ray tests.
FLYCUDA_HOST_DEVICE inline void world_bound(const Scene& sc, int64_t w, float* out4) {
  if (w < 0) {  // no world (a bad id): no sphere, nothing culled
    out4[0] = out4[1] = out4[2] = 0.f;
    out4[3] = -1.f;
    return;
  }
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
// cull: the world's culling sphere (world_bound), or null.
FLYCUDA_HOST_DEVICE inline RayResult trace(const Scene& sc, int64_t w, const float* cull, V3 o, V3 d,
                                           float tmax, bool any_hit) {
  RayResult r;
  r.k = -1;
  r.t = tmax;
  r.n = v3(0.f, 0.f, 1.f);
  bool skip_bounded = false;
  if (cull) {  // world-level reject of every bounded geom
    skip_bounded = cull[3] < 0.f || misses_sphere(o, d, v3(cull[0], cull[1], cull[2]), cull[3]);
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
                           sc.bounds, sc.index, sc.tris, sc.nnode, r.t, any_hit);
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

// Index of the checker cell holding x (in cells): floor(x), and 0 where that is
// beyond +-2^30 or NaN (casting such floats to an integer is undefined).
FLYCUDA_HOST_DEVICE inline int64_t cell_index(float x) {
  const float f = floorf(x);
  return (f >= -1073741824.f && f <= 1073741824.f) ? static_cast<int64_t>(f) : 0;
}

// Shaded color of a hit (world ray o, d): base * (ambient + headlight + lights).
FLYCUDA_HOST_DEVICE inline V3 shade(const Scene& sc, int64_t w, const float* cull, V3 o, V3 d,
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
      if (trace(sc, w, cull, so, mul(ld, -1.f), kInf, true).k >= 0) continue;
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
  const float* cull = sc.world_bounds ? sc.world_bounds + 4 * s : nullptr;
  V3 acc = v3(0.f, 0.f, 0.f);
  for (int64_t sy = 0; sy < n; ++sy) {
    for (int64_t sx = 0; sx < n; ++sx) {
      const V3 dc = camera_ray(px, py, sx, sy, n, Wd, H, tan_half_fovy);
      const V3 d = matvec(cam_mat, dc);
      const int64_t t0 = stage ? now() : 0;
      RayResult r = trace(sc, w, cull, o, d, kInf, false);
      const int64_t t1 = stage ? now() : 0;
      if (r.k >= 0 && zfar > 0.f && r.t * -dc.z > zfar) r.k = -1;  // beyond the far plane
      if (sx == 0 && sy == 0) {  // depth and seg from the first sub-sample (as MuJoCo Warp)
        const int64_t pix = (s * H + py) * Wd + px;
        if (out.depth) out.depth[pix] = r.k >= 0 ? r.t * -dc.z : 0.f;
        if (out.seg) out.seg[pix] = r.k >= 0 ? sc.geom_ids[r.k] : -1;
      }
      if (out.rgb && r.k >= 0) acc = add(acc, shade(sc, w, cull, o, d, r, shadows));
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
