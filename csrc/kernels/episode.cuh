// flycuda: the episode family — the device code of a batched environment's step
// (flycuda.env), and its launch plans. Three compilers read this file, as every
// family's: nvcc (csrc/cuda/episode.cu: kernels and plans), the host compiler for
// the CPU twins (csrc/episode.cpp: the per-element functions and the plans, which
// the twins call in loops) and the emulator (FLYCUDA_EMU: everything). No ATen.
//
//   motion_at        out[w, d] = the recording at world w's own step counter (as
//                    motion_to_ctrl / spline_to_ctrl at the global counter: same bits)
//   scatter_actions  ctrl[w, act_ids[a]] = clamp(actions[w, a] * scale[a] + offset[a], low[a], high[a])
//   gather_columns   out[w, o] = sources[src[o]][w, col[o]]  (up to kMaxSources [W, N] sources)
//   episode_step     world_steps[w] += 1; terminated[w], truncated[w] from the rules
//   reset_worlds     for the worlds marked done: a new initial state (one of K, picked
//                    with a counter-based hash of (seed, world, episode)) plus seeded
//                    noise, world_steps[w] = 0, episodes[w] += 1, offsets[w] = its frame
//
// Every per-element function below is run by the CUDA kernel, the CPU twin and
// the emulator alike, so the three agree bit for bit; float arithmetic uses the
// _rn intrinsics on the device (no FMA contraction), as motion_to_ctrl.cuh does.
#pragma once

#include "motion_to_ctrl.cuh"
#include "platform.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flycuda {

#if defined(FLYCUDA_DEVICE_PATH)
#define FLYCUDA_FMUL(a, b) __fmul_rn((a), (b))
#define FLYCUDA_FADD(a, b) __fadd_rn((a), (b))
#define FLYCUDA_FSUB(a, b) __fsub_rn((a), (b))
#else
#define FLYCUDA_FMUL(a, b) ((a) * (b))
#define FLYCUDA_FADD(a, b) ((a) + (b))
#define FLYCUDA_FSUB(a, b) ((a) - (b))
#endif

namespace kernels {

constexpr int kEpisodeThreads = 256;  // every op of the family: threads per block
constexpr int kMaxSources = 8;        // gather_columns: sources per launch

FLYCUDA_HOST_DEVICE inline int64_t episode_blocks(int64_t threads) {
  return (threads + kEpisodeThreads - 1) / kEpisodeThreads;
}

// --- motion_at ----------------------------------------------------------------------

struct MotionAtPlan {
  int64_t W = 0, D = 0;
  int64_t out_s0 = 0, out_s1 = 0;  // out [W, D], any strides
  double frames_per_step = 1.0;
  bool loop = false;
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * D; }
};

// out[w, d] for thread idx = w * D + d; `steps` [W] int64 (each world's counter),
// `offsets` [W] (float or double) or null.
template <typename Frames, typename offset_t>
FLYCUDA_HOST_DEVICE inline void motion_at_one(const Frames& frames, const int64_t* steps,
                                              const offset_t* offsets, float* out, const MotionAtPlan& p,
                                              int64_t idx) {
  const int64_t w = idx / p.D;
  const int64_t d = idx - w * p.D;
  const double offset = offsets ? static_cast<double>(offsets[w]) : 0.0;
  const FrameSample fs = sample_frame(offset, steps[w], p.frames_per_step, frames.T, p.loop);
  out[w * p.out_s0 + d * p.out_s1] = frames.at(w, fs, d);
}

// --- scatter_actions ----------------------------------------------------------------

struct ScatterPlan {
  int64_t W = 0, A = 0, nu = 0;
  int64_t act_s0 = 0, act_s1 = 0;    // actions [W, A], any strides
  int64_t ctrl_s0 = 0, ctrl_s1 = 0;  // ctrl [W, nu], any strides
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * A; }
};

// clamp(x * scale + offset, low, high) in float32, rounded after each operation; a NaN
// becomes `low` (fmaxf), +-inf the bound on its side.
FLYCUDA_HOST_DEVICE inline float action_to_ctrl(float x, float scale, float offset, float low, float high) {
  const float v = FLYCUDA_FADD(FLYCUDA_FMUL(x, scale), offset);
  return fminf(fmaxf(v, low), high);
}

// `map` float32 [4, A] contiguous: rows scale, offset, low, high.
template <typename index_t>
FLYCUDA_HOST_DEVICE inline void scatter_one(const float* actions, const index_t* act_ids, const float* map,
                                            float* ctrl, const ScatterPlan& p, int64_t idx) {
  const int64_t w = idx / p.A;
  const int64_t a = idx - w * p.A;
  const int64_t c = static_cast<int64_t>(act_ids[a]);
  if (c < 0 || c >= p.nu) return;  // ids are checked on the host (once), except in capture
  const float x = actions[w * p.act_s0 + a * p.act_s1];
  ctrl[w * p.ctrl_s0 + c * p.ctrl_s1] = action_to_ctrl(x, map[a], map[p.A + a], map[2 * p.A + a], map[3 * p.A + a]);
}

// --- gather_columns -----------------------------------------------------------------

struct GatherPlan {
  int64_t W = 0, O = 0, nsrc = 0;
  const float* src[kMaxSources] = {};  // sources [W, N_k], any strides
  int64_t src_s0[kMaxSources] = {}, src_s1[kMaxSources] = {}, src_n[kMaxSources] = {};
  int64_t out_s0 = 0, out_s1 = 0;      // out [W, O], any strides
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W * O; }
};

// `columns` int32 [O, 2] contiguous: (source, column) of each output column.
FLYCUDA_HOST_DEVICE inline void gather_one(const int32_t* columns, float* out, const GatherPlan& p, int64_t idx) {
  const int64_t w = idx / p.O;
  const int64_t o = idx - w * p.O;
  const int64_t k = columns[2 * o], c = columns[2 * o + 1];
  if (k < 0 || k >= p.nsrc || c < 0 || c >= p.src_n[k]) return;  // checked on the host, except in capture
  out[w * p.out_s0 + o * p.out_s1] = p.src[k][w * p.src_s0[k] + c * p.src_s1[k]];
}

// --- episode_step ---------------------------------------------------------------------

struct EpisodePlan {
  int64_t W = 0, nq = 0, nv = 0;
  int64_t qpos_s0 = 0, qpos_s1 = 0, qvel_s0 = 0, qvel_s1 = 0;  // any strides
  int64_t root_adr = -1;     // qpos address of the free joint whose pose the rules read; -1: none
  float min_height = 0.0f;   // terminated when the root's z < min_height ...
  float max_height = 0.0f;   // ... or > max_height ...
  float min_up = 0.0f;       // ... or its body z axis' world z < min_up (upside down: -1)
  int64_t max_steps = 0;     // truncated when the world's step reaches max_steps (0: never)
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W; }
};

// The world z of a body's z axis from its quaternion (w, x, y, z), unit length:
// 1 - 2 (x^2 + y^2).
FLYCUDA_HOST_DEVICE inline float up_z(float qx, float qy) {
  return FLYCUDA_FSUB(1.0f, FLYCUDA_FMUL(2.0f, FLYCUDA_FADD(FLYCUDA_FMUL(qx, qx), FLYCUDA_FMUL(qy, qy))));
}

// Is x finite? Its exponent bits, read the same way by every compiler (no isfinite overloads).
FLYCUDA_HOST_DEVICE inline bool finite_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return (u & 0x7F800000u) != 0x7F800000u;
}

// One world: its counter advanced, then whether its episode ends. A non-finite qpos or
// qvel entry always terminates (so does a NaN height or orientation).
FLYCUDA_HOST_DEVICE inline void episode_one(int64_t* steps, const float* qpos, const float* qvel,
                                            bool* terminated, bool* truncated, const EpisodePlan& p, int64_t w) {
  const int64_t s = steps[w] + 1;
  steps[w] = s;
  bool bad = false;
  const float* q = qpos + w * p.qpos_s0;
  for (int64_t j = 0; j < p.nq; ++j) bad |= !finite_bits(q[j * p.qpos_s1]);
  const float* v = qvel + w * p.qvel_s0;
  for (int64_t j = 0; j < p.nv; ++j) bad |= !finite_bits(v[j * p.qvel_s1]);
  if (p.root_adr >= 0) {
    const float z = q[(p.root_adr + 2) * p.qpos_s1];
    const float up = up_z(q[(p.root_adr + 4) * p.qpos_s1], q[(p.root_adr + 5) * p.qpos_s1]);
    bad |= !(z >= p.min_height && z <= p.max_height && up >= p.min_up);
  }
  terminated[w] = bad;
  truncated[w] = p.max_steps > 0 && s >= p.max_steps;
}

// --- reset_worlds ---------------------------------------------------------------------

struct ResetPlan {
  int64_t W = 0, K = 0, nq = 0, nv = 0;
  int64_t qpos_s0 = 0, qpos_s1 = 0, qvel_s0 = 0, qvel_s1 = 0;  // any strides
  uint64_t seed = 0;
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W; }
};

// splitmix64's finalizer: a bijective 64-bit mix (Steele, Lea and Flood 2014).
FLYCUDA_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The hash of (seed, world, episode) every draw of that reset starts from.
FLYCUDA_HOST_DEVICE inline uint64_t reset_key(uint64_t seed, int64_t w, int64_t episode) {
  const uint64_t a = mix64(seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(w) + 1));
  return mix64(a ^ (0xD1B54A32D192ED03ull * (static_cast<uint64_t>(episode) + 1)));
}

// Draw j of a reset: uniform in [-1, 1) on a grid of 2^-23 (exact in float32).
FLYCUDA_HOST_DEVICE inline float reset_uniform(uint64_t key, int64_t j) {
  const uint64_t h = mix64(key + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(j) + 1));
  return static_cast<float>(static_cast<int64_t>(h >> 40) - (int64_t{1} << 23)) * (1.0f / 8388608.0f);
}

// Which of the K initial states a reset takes: the key's top 32 bits scaled to [0, K).
FLYCUDA_HOST_DEVICE inline int64_t reset_pick(uint64_t key, int64_t K) {
  return static_cast<int64_t>(((key >> 32) * static_cast<uint64_t>(K)) >> 32);
}

// x + noise * u, and exactly x where noise is 0.
FLYCUDA_HOST_DEVICE inline float jitter(float x, float noise, float u) {
  return noise == 0.0f ? x : FLYCUDA_FADD(x, FLYCUDA_FMUL(noise, u));
}

// One world: nothing unless done[w]. Draw 0.. nq-1 jitter qpos, nq.. nq+nv-1 qvel.
FLYCUDA_HOST_DEVICE inline void reset_one(const bool* done, const float* init_qpos, const float* init_qvel,
                                          const double* init_frames, const float* qpos_noise,
                                          const float* qvel_noise, float* qpos, float* qvel, int64_t* steps,
                                          int64_t* episodes, double* offsets, const ResetPlan& p, int64_t w) {
  if (!done[w]) return;
  const int64_t e = episodes[w];
  const uint64_t key = reset_key(p.seed, w, e);
  const int64_t k = reset_pick(key, p.K);
  float* q = qpos + w * p.qpos_s0;
  for (int64_t j = 0; j < p.nq; ++j) {
    q[j * p.qpos_s1] = jitter(init_qpos[k * p.nq + j], qpos_noise[j], reset_uniform(key, j));
  }
  float* v = qvel + w * p.qvel_s0;
  for (int64_t j = 0; j < p.nv; ++j) {
    v[j * p.qvel_s1] = jitter(init_qvel[k * p.nv + j], qvel_noise[j], reset_uniform(key, p.nq + j));
  }
  steps[w] = 0;
  episodes[w] = e + 1;
  offsets[w] = init_frames[k];
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)  // the kernels: nvcc and the emulator

// The flat thread index, compared unsigned against the plan's count (the host keeps
// it <= INT32_MAX), or -1 past the end.
__device__ inline int64_t episode_index(int64_t threads) {
  const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
  return t < static_cast<unsigned int>(threads) ? static_cast<int64_t>(t) : -1;
}

template <typename Frames, typename offset_t>
__global__ void motion_at_kernel(const Frames frames, const int64_t* __restrict__ steps,
                                 const offset_t* __restrict__ offsets, float* __restrict__ out,
                                 const MotionAtPlan p) {
  const int64_t idx = episode_index(p.threads());
  if (idx >= 0) motion_at_one(frames, steps, offsets, out, p, idx);
}

template <typename index_t>
__global__ void scatter_actions_kernel(const float* __restrict__ actions, const index_t* __restrict__ act_ids,
                                       const float* __restrict__ map, float* __restrict__ ctrl,
                                       const ScatterPlan p) {
  const int64_t idx = episode_index(p.threads());
  if (idx >= 0) scatter_one(actions, act_ids, map, ctrl, p, idx);
}

__global__ void gather_columns_kernel(const int32_t* __restrict__ columns, float* __restrict__ out,
                                      const GatherPlan p) {
  const int64_t idx = episode_index(p.threads());
  if (idx >= 0) gather_one(columns, out, p, idx);
}

__global__ void episode_step_kernel(int64_t* __restrict__ steps, const float* __restrict__ qpos,
                                    const float* __restrict__ qvel, bool* __restrict__ terminated,
                                    bool* __restrict__ truncated, const EpisodePlan p) {
  const int64_t w = episode_index(p.threads());
  if (w >= 0) episode_one(steps, qpos, qvel, terminated, truncated, p, w);
}

__global__ void reset_worlds_kernel(const bool* __restrict__ done, const float* __restrict__ init_qpos,
                                    const float* __restrict__ init_qvel, const double* __restrict__ init_frames,
                                    const float* __restrict__ qpos_noise, const float* __restrict__ qvel_noise,
                                    float* __restrict__ qpos, float* __restrict__ qvel,
                                    int64_t* __restrict__ steps, int64_t* __restrict__ episodes,
                                    double* __restrict__ offsets, const ResetPlan p) {
  const int64_t w = episode_index(p.threads());
  if (w >= 0) {
    reset_one(done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise, qpos, qvel, steps, episodes,
              offsets, p, w);
  }
}

// --- the launches (platform.h, "launch templates"): one thread per element of the plan's
// threads(), kEpisodeThreads a block; none without any.

template <class Launcher, typename Kernel, typename Plan, typename... Args>
void launch_episode_kernel(Launcher&& launch, Kernel kernel, const Plan& p, Args... args) {
  if (p.threads() > 0) {
    launch(kernel, dim3(static_cast<unsigned int>(episode_blocks(p.threads()))), dim3(kEpisodeThreads), 0, args...,
           p);
  }
}

template <class Launcher, typename Frames, typename offset_t>
void launch_motion_at(Launcher&& launch, const Frames& frames,  // [M, T, (4,) D]
                      const int64_t* steps,                     // [W]
                      const offset_t* offsets,                  // [W] or null
                      float* out,                               // [W, D]
                      const MotionAtPlan& p) {
  launch_episode_kernel(launch, motion_at_kernel<Frames, offset_t>, p, frames, steps, offsets, out);
}

template <class Launcher, typename index_t>
void launch_scatter_actions(Launcher&& launch, const float* actions,  // [W, A]
                            const index_t* act_ids,                   // [A]
                            const float* map,                         // [4, A]
                            float* ctrl,                              // [W, nu]
                            const ScatterPlan& p) {
  launch_episode_kernel(launch, scatter_actions_kernel<index_t>, p, actions, act_ids, map, ctrl);
}

template <class Launcher>
void launch_gather_columns(Launcher&& launch, const int32_t* columns,  // [O, 2]
                           float* out,                                 // [W, O]
                           const GatherPlan& p) {                      // + the sources [W, N_k]
  launch_episode_kernel(launch, gather_columns_kernel, p, columns, out);
}

template <class Launcher>
void launch_episode_step(Launcher&& launch, int64_t* steps,  // [W]
                         const float* qpos,                  // [W, nq]
                         const float* qvel,                  // [W, nv]
                         bool* terminated,                   // [W]
                         bool* truncated,                    // [W]
                         const EpisodePlan& p) {
  launch_episode_kernel(launch, episode_step_kernel, p, steps, qpos, qvel, terminated, truncated);
}

template <class Launcher>
void launch_reset_worlds(Launcher&& launch, const bool* done,  // [W]
                         const float* init_qpos,               // [K, nq]
                         const float* init_qvel,               // [K, nv]
                         const double* init_frames,            // [K]
                         const float* qpos_noise,              // [nq]
                         const float* qvel_noise,              // [nv]
                         float* qpos,                          // [W, nq]
                         float* qvel,                          // [W, nv]
                         int64_t* steps,                       // [W]
                         int64_t* episodes,                    // [W]
                         double* offsets,                      // [W]
                         const ResetPlan& p) {
  launch_episode_kernel(launch, reset_worlds_kernel, p, done, init_qpos, init_qvel, init_frames, qpos_noise,
                        qvel_noise, qpos, qvel, steps, episodes, offsets);
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
