// flycuda: what one pixel of the tile renderer does (host and device code): its
// camera ray(s), the nearest hit (bvh.h), shading (ambient + headlight + the
// model's directional lights, optional any-hit shadow rays) and the outputs.
// Conventions follow MuJoCo Warp's renderer: the camera looks along its -z axis
// with y up, row 0 is the top of the image, pixel centers are at +0.5, and depth is
// planar (distance along the optical axis). seg holds the geom id, or -1.
// Mirrored by flycuda/reference/render.py (float64).
#pragma once

#include "kernels/platform.h"
#include "bvh.h"
#include "layout.h"

#include <cmath>
#include <cstdint>
#if !defined(FLYCUDA_DEVICE_PATH)
#include <chrono>
#endif

namespace flycuda {
namespace render {

// Index of the checker cell holding x (in cells): floor(x), and 0 where that is
// beyond +-2^30 or NaN (casting such floats to an integer is undefined).
FLYCUDA_HOST_DEVICE inline int64_t cell_index(float x) {
  const float f = floorf(x);
  return (f >= -1073741824.f && f <= 1073741824.f) ? static_cast<int64_t>(f) : 0;
}

// Which lights (bit l: light l) are hidden from the hit point p (normal n) by
// another geom: one any-hit shadow ray each, for lights that cast shadows and face
// the surface. Only p, n and the mask stay live across the traces.
FLYCUDA_HOST_DEVICE inline uint32_t shadowed_lights(const Scene& sc, int32_t w, const float* top, V3 p, V3 n,
                                                     float t) {
  uint32_t mask = 0;
  const V3 so = add(p, mul(n, 1e-4f * fmaxf(1.f, t)));
  for (int32_t l = 0; l < sc.nlight && l < kMaxLights; ++l) {
    const float* L = sc.lights + kLightCols * l;
    const V3 ld = v3(L[kLightDir], L[kLightDir + 1], L[kLightDir + 2]);
    if (L[kLightShadow] > 0.f && -dot(n, ld) > 0.f && trace<true>(sc, w, top, so, mul(ld, -1.f), kInf).k >= 0) {
      mask |= 1u << l;
    }
  }
  return mask;
}

// Shaded color of hit b of the world ray (o, d) of the camera with orientation cm
// (row-major, camera to world): base * (ambient + headlight + lights). The headlight
// is MuJoCo's: a directional light along the camera's view axis (the same for every
// pixel, as MuJoCo's OpenGL renderer and MuJoCo Warp's light it), not along each ray.
FLYCUDA_HOST_DEVICE inline V3 shade(const Scene& sc, int32_t w, const float* top, V3 o, V3 d, const Best& b,
                                    bool shadows, const float* cm) {
  const V3 n = hit_normal(sc, w, o, d, b);
  const V3 p = add(o, mul(d, b.t));
  const float hd = fmaxf(0.f, dot(n, v3(cm[2], cm[5], cm[8])));  // the camera's backward axis (before the
  const uint32_t hidden = shadows ? shadowed_lights(sc, w, top, p, n, b.t) : 0u;  // shadow traces: 1 float)
  const float* H = sc.headlight;
  V3 light = v3(H[0] + H[3] * hd, H[1] + H[4] * hd, H[2] + H[5] * hd);
  for (int32_t l = 0; l < sc.nlight; ++l) {
    const float* L = sc.lights + kLightCols * l;
    light = add(light, v3(L[kLightAmbient], L[kLightAmbient + 1], L[kLightAmbient + 2]));
    const float diff = fmaxf(0.f, -dot(n, v3(L[kLightDir], L[kLightDir + 1], L[kLightDir + 2])));
    if (diff <= 0.f || (l < kMaxLights && ((hidden >> l) & 1u))) continue;
    light = add(light, mul(v3(L[kLightDiffuse], L[kLightDiffuse + 1], L[kLightDiffuse + 2]), diff));
  }
  const float* P = sc.geom_param + kParamCols * b.k;
  V3 base = v3(P[kParamRgb], P[kParamRgb + 1], P[kParamRgb + 2]);
  const float cell = P[kParamChecker];
  if (cell > 0.f) {  // checkered plane: cells in the plane's local frame
    const float* xp = geom_pos(sc, w, b.k);
    const V3 pl = matTvec(geom_mat(sc, w, b.k), sub(p, v3(xp[0], xp[1], xp[2])));
    if ((cell_index(fdiv(pl.x, cell)) + cell_index(fdiv(pl.y, cell))) & 1) {
      base = v3(P[kParamRgb2], P[kParamRgb2 + 1], P[kParamRgb2 + 2]);
    }
  }
  return v3(base.x * light.x, base.y * light.y, base.z * light.z);
}

// The colour of a ray (direction d) that hits nothing: the background looking up,
// blended into the one looking down by the ray's elevation.
FLYCUDA_HOST_DEVICE inline V3 background(const Scene& sc, V3 d) {
  const float* B = sc.background;
  const float up = fminf(fmaxf(0.5f + 0.5f * d.z, 0.f), 1.f);
  return v3(B[3] + (B[0] - B[3]) * up, B[4] + (B[1] - B[4]) * up, B[5] + (B[2] - B[5]) * up);
}

// Camera-frame direction of sub-sample (sx, sy) of pixel (px, py): MuJoCo Warp's compute_ray.
FLYCUDA_HOST_DEVICE inline V3 camera_ray(int32_t px, int32_t py, int32_t sx, int32_t sy, int32_t n,
                                         int32_t width, int32_t height, float tan_half_fovy) {
  const float w = static_cast<float>(width * n), h = static_cast<float>(height * n);
  const float hh = tan_half_fovy, hw = hh * fdiv(w, h);
  const float u = fdiv(static_cast<float>(px * n + sx) + 0.5f, w);
  const float v = fdiv(static_cast<float>(py * n + sy) + 0.5f, h);
  return normalize(v3(-hw + 2.f * hw * u, hh - 2.f * hh * v, -1.f));
}

// [0, 1] to 0..255; NaN reads as 0 (a NaN-to-integer cast is undefined, and
// host and device would disagree on it).
FLYCUDA_HOST_DEVICE inline uint8_t to_u8(float c) {
  c = c > 0.f ? (c < 1.f ? c : 1.f) : 0.f;
  return static_cast<uint8_t>(c * 255.f + 0.5f);
}

// Tiles one launch covers: S * C images, or every cell of the mosaic (the cells past
// the last image are painted black, so every output byte is defined).
FLYCUDA_HOST_DEVICE inline int64_t tiles_covered(const View& v) {
  const int64_t T = static_cast<int64_t>(v.nsel) * v.ncam;
  return (v.rgb && v.mosaic_cols > 0) ? ((T + v.mosaic_cols - 1) / v.mosaic_cols) * v.mosaic_cols : T;
}

// Pixels of one tile: the listed ones, or the whole image.
FLYCUDA_HOST_DEVICE inline int64_t tile_pixels(const View& v) {
  return v.npix > 0 ? v.npix : static_cast<int64_t>(v.height) * v.width;
}

// worlds[s] == kSkipImage: image s is skipped, its outputs left as they were (a partial
// re-render: flycuda.env redraws the eyes of the worlds it has just reset, not all).
constexpr int32_t kSkipImage = -1;

// Is tile t one of a skipped image's (never a mosaic's empty cell)?
FLYCUDA_HOST_DEVICE inline bool tile_skipped(const View& v, int32_t t) {
  const int32_t s = t / v.ncam;
  return s < v.nsel && v.worlds[s] == kSkipImage;
}

// The world tile t = s * C + c shows: worlds[s], or -1 for an empty mosaic cell or a
// world id outside [0, W) (checked on the host, except in capture or with check=False).
FLYCUDA_HOST_DEVICE inline int32_t tile_world(const View& v, int32_t t, int32_t nworld) {
  const int32_t s = t / v.ncam;
  const int32_t w = s < v.nsel ? v.worlds[s] : -1;
  return (w >= 0 && w < nworld) ? w : -1;
}

// Address of pixel q (= py * Wd + px, or a list position) of tile t in the rgb output.
FLYCUDA_HOST_DEVICE inline uint8_t* rgb_at(const View& v, int32_t t, int32_t q, int32_t py, int32_t px) {
  if (v.mosaic_cols > 0) {
    const int64_t row = t / v.mosaic_cols, col = t % v.mosaic_cols;
    return v.rgb + ((row * v.height + py) * (v.mosaic_cols * static_cast<int64_t>(v.width)) + col * v.width + px) * 3;
  }
  return v.rgb + (static_cast<int64_t>(t) * tile_pixels(v) + q) * 3;
}

// A pixel that shows no world: black; for an image (not an empty mosaic cell) also
// no depth and no geom.
FLYCUDA_HOST_DEVICE inline void clear_pixel(const View& v, int32_t t, int32_t q, int32_t py, int32_t px) {
  if (v.rgb) {
    uint8_t* dst = rgb_at(v, t, q, py, px);
    dst[0] = dst[1] = dst[2] = 0;
  }
  if (t < static_cast<int64_t>(v.nsel) * v.ncam) {
    const int64_t at = static_cast<int64_t>(t) * tile_pixels(v) + q;
    if (v.depth) v.depth[at] = 0.f;
    if (v.seg) v.seg[at] = -1;
  }
}

// Stage timer columns: trace (primary rays), shade (lighting, shadow rays), total (the
// block), and the primary rays' work: BVH nodes visited, triangles tested.
constexpr int kTimers = 5;

// A timestamp: clock64() cycles on the GPU, steady-clock nanoseconds on the CPU.
FLYCUDA_HOST_DEVICE inline int64_t now() {
#if defined(FLYCUDA_DEVICE_PATH)
  return static_cast<int64_t>(clock64());
#else
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

// The world ray of sub-sample (sx, sy) of pixel (px, py) of tile t (world w): origin
// o (the camera), unit direction d, and the planar depth per unit distance along it.
FLYCUDA_HOST_DEVICE inline void primary_ray(const View& v, int32_t t, int32_t w, int32_t py, int32_t px, int32_t sx,
                                            int32_t sy, V3& o, V3& d, float& planar) {
  const int32_t c = t % v.ncam;
  const float* cp = v.cam_pos + w * v.cp_s0 + c * v.cp_s1;
  const V3 dc = camera_ray(px, py, sx, sy, v.samples, v.width, v.height, v.tan_half_fovy[c]);
  d = matvec(v.cam_mat + w * v.cm_s0 + c * v.cm_s1, dc);
  o = v3(cp[0], cp[1], cp[2]);
  planar = -dc.z;
}

// What one sub-sample of pixel q of tile t (world w) makes of its trace b along the
// world ray (o, d) (planar: depth per unit distance): depth and seg from the first
// sub-sample (as MuJoCo Warp); returns its colour (the shaded hit or the background;
// nothing without an rgb output). top: the world's refit top level (shadow rays).
FLYCUDA_HOST_DEVICE inline V3 sample_colour(const Scene& sc, const View& v, int32_t t, int32_t w, int32_t q,
                                            bool first, V3 o, V3 d, float planar, Best b, const float* top) {
  if (b.k >= 0 && v.zfar > 0.f && b.t * planar > v.zfar) b.k = -1;  // beyond the far plane
  if (first) {
    const int64_t i = static_cast<int64_t>(t) * tile_pixels(v) + q;
    if (v.depth) v.depth[i] = b.k >= 0 ? b.t * planar : 0.f;
    if (v.seg) v.seg[i] = b.k >= 0 ? sc.geom_ids[b.k] : -1;
  }
  if (!v.rgb) return v3(0.f, 0.f, 0.f);
  if (b.k < 0) return background(sc, d);
  const float* cm = v.cam_mat + w * v.cm_s0 + (t % v.ncam) * v.cm_s1;
  return shade(sc, w, top, o, d, b, v.shadows, cm);
}

// The pixel's colour, the sum acc of its n x n sub-samples' colours, into rgb (if any).
FLYCUDA_HOST_DEVICE inline void write_rgb(const View& v, int32_t t, int32_t q, int32_t py, int32_t px, V3 acc) {
  if (!v.rgb) return;
  const float inv = fdiv(1.f, static_cast<float>(v.samples * v.samples));
  uint8_t* dst = rgb_at(v, t, q, py, px);
  dst[0] = to_u8(acc.x * inv);
  dst[1] = to_u8(acc.y * inv);
  dst[2] = to_u8(acc.z * inv);
}

// The world's refit top level (View::top_boxes) that tile t's rays walk.
FLYCUDA_HOST_DEVICE inline const float* tile_top(const Scene& sc, const View& v, int32_t t) {
  return v.top_boxes + static_cast<int64_t>(kBoxCols) * sc.ntop * (t / v.ncam);
}

// Everything one pixel (py, px) = list position or image pixel q of tile t (world w)
// does: the kernel body of both impls (the CPU twin runs four pixels at once through
// csrc/render/render_packet.h, with the same helpers). The pixel's cold state (where it is,
// its ray, the colour so far) waits in local memory while a ray is traced, so that
// only the sample counters stay in registers around the traversal (the register
// budget: tests/csrc/test_ptxas.py). Timed: the time spent tracing and shading is added
// to stage[0] and stage[1], the nodes and triangles of the primary rays to
// stage[2] and stage[3] (a separate instantiation: the untimed kernel carries no
// timer state). vis: the block's culling flags for the primary rays (cull.h), or null.
template <bool Timed>
FLYCUDA_HOST_DEVICE inline void render_pixel(const Scene& sc, const View& v, int32_t t, int32_t w, int32_t q,
                                             int32_t py, int32_t px, int64_t* stage, const uint8_t* vis) {
  FLYCUDA_PARKED int32_t at[5] = {t, w, q, py, px};
  FLYCUDA_PARKED float acc[3] = {0.f, 0.f, 0.f};
  FLYCUDA_PARKED float ray[7];  // o, d, planar depth per unit distance
  const int32_t n = v.samples;
  for (int32_t sy = 0; sy < n; ++sy) {
    for (int32_t sx = 0; sx < n; ++sx) {
      V3 o, d;
      float planar;
      primary_ray(v, at[0], at[1], at[3], at[4], sx, sy, o, d, planar);
      ray[0] = o.x; ray[1] = o.y; ray[2] = o.z; ray[3] = d.x; ray[4] = d.y; ray[5] = d.z; ray[6] = planar;
      const float* top = tile_top(sc, v, at[0]);
      const int64_t t0 = Timed ? now() : 0;
      const Best b = trace<false>(sc, at[1], top, v3(ray[0], ray[1], ray[2]), d, kInf, Timed ? stage + 2 : nullptr,
                                  vis);
      const int64_t t1 = Timed ? now() : 0;
      const V3 col = sample_colour(sc, v, at[0], at[1], at[2], sx == 0 && sy == 0, v3(ray[0], ray[1], ray[2]),
                                   v3(ray[3], ray[4], ray[5]), ray[6], b, top);
      if (v.rgb) {
        acc[0] = acc[0] + col.x;  // statements, not a comma list: C++20 deprecates using a volatile
        acc[1] = acc[1] + col.y;  // assignment's value (-Werror=volatile in the emulator's build)
        acc[2] = acc[2] + col.z;
      }
      if (Timed) {
        stage[0] += t1 - t0;
        stage[1] += now() - t1;
      }
    }
  }
  write_rgb(v, at[0], at[2], at[3], at[4], v3(acc[0], acc[1], acc[2]));
}

}  // namespace render
}  // namespace flycuda
