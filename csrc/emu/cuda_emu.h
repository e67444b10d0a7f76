// flycuda's emulation of the CUDA execution model, for a host build of the real
// kernel source (csrc/kernels/*.cuh, compiled with -DFLYCUDA_EMU) so that every
// __global__ function runs in CI without a GPU, under ASan/UBSan and TSan.
// It is a test instrument, kept small on purpose.
//
// What it models:
//   - threadIdx, blockIdx, blockDim, gridDim (thread-local builtins);
//   - one OS thread per CUDA thread of a block, so a missing barrier or a race
//     is a real race that ThreadSanitizer sees;
//   - __syncthreads(): a real barrier of the block's threads. A barrier reached
//     by some threads while others have returned (divergent barrier, undefined
//     behaviour in CUDA) aborts with a message instead of hanging;
//   - blocks run concurrently: up to FLYCUDA_EMU_BLOCKS (default 2) at a time,
//     in a shuffled order (FLYCUDA_EMU_SEED, default 1); the rest wait for a
//     free slot, as blocks wait for an SM;
//   - atomicAdd/atomicExch/atomicCAS/atomicInc on std::atomic_ref (acq_rel);
//     __threadfence() (a seq_cst read-modify-write on one global atomic);
//   - it COUNTS the atomic operations of every launch, per block (launch_log():
//     blocks, atomics, the most atomics any one block made), so that tests can
//     hold a kernel to a number of atomics per block (an atomic is one call of an
//     atomic function, as it is one instruction on the GPU; __threadfence is not
//     counted);
//   - clock64() (steady-clock nanoseconds); the _rn intrinsics the kernels use
//     (plain IEEE operations: build with -ffp-contract=off so that nothing is
//     fused, which is what _rn means); the math functions come from <cmath>;
//   - static shared memory, declared with FLYCUDA_SHARED(type, name, count)
//     (platform.h): one arena per resident block (kSharedBytes, 48 KiB as a
//     GPU's static limit), poisoned before each block (shared memory starts
//     undefined) with 0x00 and 0xFF bytes in turn (zero flags and counts, NaN
//     floats: a read before a write shows), carved in declaration order, which
//     every thread of a block runs alike;
//   - __device__ globals (ordinary globals) and __host__ __device__ functions;
//   - launch(grid, block, smem, stream, kernel, args...) in place of
//     kernel<<<grid, block, smem, stream>>>(args...): it converts the arguments
//     to the kernel's parameter types, runs the whole grid and returns
//     (streams are synchronous; launches from two host threads overlap);
//     Launcher, the same as the launcher the kernels' launch templates take
//     (kernels/platform.h), in place of csrc/cuda/launch.h's cuda::Launcher.
//
// What it does not model: warp-level lockstep, shuffles, votes and warp
// reductions; the GPU's weaker memory model (atomics here are acq_rel, so a
// missing __threadfence goes unseen); dynamic shared memory and the banks'
// timing; real clock64() cycles; textures, __ldg,
// cooperative groups; launch bounds and occupancy. A kernel that uses any of
// these fails to compile here (the names are left undefined), or, for dynamic
// shared memory, the launch aborts: nothing runs wrongly in silence.
#pragma once

#if defined(__CUDACC__)
#error "cuda_emu.h is for host builds only"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = struct flycuda_emu_stream*;  // launches are synchronous

namespace flycuda_emu {

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "flycuda emu: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

// A barrier of n threads. Every arrival says why it waits (a __syncthreads of
// the kernel, or the end of a block); a generation whose arrivals disagree is
// a divergent barrier.
class Barrier {
 public:
  enum Why : int { kSyncthreads = 0, kBlockStart = 1, kBlockEnd = 2 };
  explicit Barrier(unsigned int n) : n_(n) {}
  void wait(Why why) {
    std::unique_lock<std::mutex> lock(m_);
    if (arrived_ == 0) {
      why_ = why;
    } else if (why != why_) {
      fail("divergent __syncthreads(): some threads of a block wait at a barrier that others "
           "never reach (they returned or took another branch)");
    }
    const uint64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  const unsigned int n_;
  unsigned int arrived_ = 0;
  uint64_t gen_ = 0;
  Why why_ = kSyncthreads;
};

inline thread_local Barrier* tl_block_barrier = nullptr;

// Static shared memory: the arena of the thread's current block and how much of
// it this thread's kernel has declared so far.
constexpr size_t kSharedBytes = 48 * 1024;
inline thread_local unsigned char* tl_shared_arena = nullptr;
inline thread_local size_t tl_shared_used = 0;

// The next `count` T of the block's arena (FLYCUDA_SHARED).
template <typename T>
T* shared_array(size_t count) {
  if (!tl_shared_arena) fail("shared memory outside a kernel launch");
  const size_t at = (tl_shared_used + alignof(T) - 1) / alignof(T) * alignof(T);
  if (at + count * sizeof(T) > kSharedBytes) fail("shared memory: more than 48 KiB declared in one block");
  tl_shared_used = at + count * sizeof(T);
  return reinterpret_cast<T*>(tl_shared_arena + at);
}
inline std::atomic<unsigned int> g_fence{0};

// Atomic operations per launch. Each emulated thread points at its current
// block's count; every atomic function adds one to it.
struct LaunchStats {
  uint64_t blocks;          // blocks of the grid
  uint64_t atomics;         // atomic operations, all blocks
  uint64_t max_per_block;   // the most any one block made
};
inline thread_local std::atomic<uint64_t>* tl_block_atomics = nullptr;
inline std::mutex g_launch_log_mutex;
inline std::vector<LaunchStats> g_launch_log;

inline void count_atomic() {
  if (tl_block_atomics) tl_block_atomics->fetch_add(1, std::memory_order_relaxed);
}

// The launches so far, in the order they finished (and clears the log).
inline std::vector<LaunchStats> take_launch_log() {
  std::lock_guard<std::mutex> lock(g_launch_log_mutex);
  std::vector<LaunchStats> out;
  out.swap(g_launch_log);
  return out;
}

inline int resident_blocks() {
  const char* env = std::getenv("FLYCUDA_EMU_BLOCKS");
  const int n = env ? std::atoi(env) : 2;
  return n >= 1 ? n : 1;
}

// The order blocks are started in: a permutation of [0, n), shuffled with a
// fixed seed (FLYCUDA_EMU_SEED), so that no kernel can rely on block order.
inline std::vector<uint64_t> block_order(uint64_t n) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) order[i] = i;
  const char* env = std::getenv("FLYCUDA_EMU_SEED");
  uint64_t x = env ? std::strtoull(env, nullptr, 10) : 1;
  for (uint64_t i = n; i > 1; --i) {  // Fisher-Yates with an LCG
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(order[i - 1], order[(x >> 33) % i]);
  }
  return order;
}

}  // namespace flycuda_emu

// The builtins each emulated thread sees.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

inline void __syncthreads() {
  if (!flycuda_emu::tl_block_barrier) flycuda_emu::fail("__syncthreads() outside a kernel launch");
  flycuda_emu::tl_block_barrier->wait(flycuda_emu::Barrier::kSyncthreads);
}

inline void __threadfence() { flycuda_emu::g_fence.fetch_add(1u, std::memory_order_seq_cst); }

inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Atomics: the CUDA overloads, no others (an unsupported type fails to compile).
namespace flycuda_emu {
template <typename T>
constexpr bool kAtomicType = std::is_same_v<T, int> || std::is_same_v<T, unsigned int> ||
                             std::is_same_v<T, unsigned long long> || std::is_same_v<T, float> ||
                             std::is_same_v<T, double>;
}  // namespace flycuda_emu

template <typename T, typename = std::enable_if_t<flycuda_emu::kAtomicType<T>>>
inline T atomicAdd(T* address, T val) {
  flycuda_emu::count_atomic();
  return std::atomic_ref<T>(*address).fetch_add(val, std::memory_order_acq_rel);
}
template <typename T, typename = std::enable_if_t<flycuda_emu::kAtomicType<T>>>
inline T atomicExch(T* address, T val) {
  flycuda_emu::count_atomic();
  return std::atomic_ref<T>(*address).exchange(val, std::memory_order_acq_rel);
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && flycuda_emu::kAtomicType<T>>>
inline T atomicCAS(T* address, T compare, T val) {
  flycuda_emu::count_atomic();
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, val, std::memory_order_acq_rel);
  return compare;  // the old value, as CUDA returns it
}
// ((old >= val) ? 0 : old + 1), returns old.
// One atomic (one instruction on the GPU), whatever loop emulates it here.
inline unsigned int atomicInc(unsigned int* address, unsigned int val) {
  flycuda_emu::count_atomic();
  std::atomic_ref<unsigned int> a(*address);
  unsigned int old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old >= val ? 0u : old + 1u, std::memory_order_acq_rel)) {
  }
  return old;
}

// Round-to-nearest intrinsics: one IEEE operation each (no contraction, given
// -ffp-contract=off).
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }

namespace flycuda_emu {

// kernel<<<grid, block, smem, stream>>>(args...): runs every block of the grid
// (up to resident_blocks() at a time, one OS thread per CUDA thread) and returns
// when all have finished.
template <typename... Params, typename... Args>
void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t /*stream*/, void (*kernel)(Params...),
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
  if (smem != 0) fail("launch: dynamic shared memory is not modelled");
  const uint64_t nthreads = uint64_t{block.x} * block.y * block.z;
  const uint64_t nblocks = uint64_t{grid.x} * grid.y * grid.z;
  if (nthreads == 0 || nthreads > 1024) fail("launch: a block must have 1 to 1024 threads");
  if (nblocks == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u)
    fail("launch: invalid grid dimensions");
  const std::tuple<Params...> params(std::forward<Args>(args)...);  // converted as nvcc does
  const std::vector<uint64_t> order = block_order(nblocks);
  std::atomic<uint64_t> next{0};
  std::vector<std::atomic<uint64_t>> atomics(nblocks);  // per block
  const uint64_t slots = std::min<uint64_t>(nblocks, static_cast<uint64_t>(resident_blocks()));
  std::vector<std::thread> threads;
  threads.reserve(slots * nthreads);
  for (uint64_t slot = 0; slot < slots; ++slot) {
    // One slot = one resident block at a time: its threads take blocks in turn.
    auto barrier = std::make_shared<Barrier>(static_cast<unsigned int>(nthreads));
    auto current = std::make_shared<uint64_t>(0);
    auto arena = std::make_shared<std::vector<unsigned char>>(kSharedBytes);
    auto poison = std::make_shared<unsigned char>(0xFF);
    for (uint64_t t = 0; t < nthreads; ++t) {
      threads.emplace_back([=, &next, &params, &order, &atomics] {
        threadIdx = uint3{static_cast<unsigned int>(t % block.x),
                          static_cast<unsigned int>((t / block.x) % block.y),
                          static_cast<unsigned int>(t / (uint64_t{block.x} * block.y))};
        blockDim = block;
        gridDim = grid;
        tl_block_barrier = barrier.get();
        tl_shared_arena = arena->data();
        for (;;) {
          if (t == 0) {  // the slot's other threads wait at the barrier: no block runs
            const uint64_t k = next.fetch_add(1);
            *current = k < nblocks ? order[k] : nblocks;
            *poison = static_cast<unsigned char>(~*poison);  // 0x00, 0xFF, 0x00, ...
            std::fill(arena->begin(), arena->end(), *poison);
          }
          barrier->wait(Barrier::kBlockStart);
          const uint64_t b = *current;
          if (b >= nblocks) break;
          blockIdx = uint3{static_cast<unsigned int>(b % grid.x),
                           static_cast<unsigned int>((b / grid.x) % grid.y),
                           static_cast<unsigned int>(b / (uint64_t{grid.x} * grid.y))};
          tl_block_atomics = &atomics[b];
          tl_shared_used = 0;
          std::apply(kernel, params);
          tl_block_atomics = nullptr;
          barrier->wait(Barrier::kBlockEnd);
        }
        tl_block_barrier = nullptr;
        tl_shared_arena = nullptr;
      });
    }
  }
  for (auto& th : threads) th.join();
  LaunchStats stats{nblocks, 0, 0};
  for (const auto& a : atomics) {
    const uint64_t n = a.load();
    stats.atomics += n;
    stats.max_per_block = std::max(stats.max_per_block, n);
  }
  std::lock_guard<std::mutex> lock(g_launch_log_mutex);
  g_launch_log.push_back(stats);
}

// launch(kernel, grid, block, smem, args...): the launcher of the kernels' launch templates
// (kernels/<family>.cuh launch_*), as cuda::Launcher is on the GPU.
struct Launcher {
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) const {
    launch(grid, block, smem, nullptr, kernel, std::forward<Args>(args)...);
  }
};

}  // namespace flycuda_emu
