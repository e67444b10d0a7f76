// flycuda: what device code needs from its compiler, for the three ways it is
// compiled: by nvcc (csrc/cuda/*.cu), by the host compiler for the CPU twins
// (csrc/*.cpp: the per-element helpers only), and by the host compiler on the
// emulated grid (FLYCUDA_EMU, csrc/emu/: the __global__ kernels themselves, run
// on OS threads under sanitizers). No ATen here, so the emulator needs no torch.
#pragma once

#if defined(FLYCUDA_EMU)
#if defined(__CUDACC__)
#error "FLYCUDA_EMU is for host builds; nvcc compiles the real device code"
#endif
#include "../emu/cuda_emu.h"
#endif

// Functions that both the host and the device run. In the host compiler's build
// of the extension they are hidden: calls between them bind inside the library
// (no PLT hop for a helper the compiler chose not to inline, e.g. a BVH box test).
#if defined(__CUDACC__) || defined(FLYCUDA_EMU)
#define FLYCUDA_HOST_DEVICE __host__ __device__
#elif defined(__GNUC__)
#define FLYCUDA_HOST_DEVICE __attribute__((visibility("hidden")))
#else
#define FLYCUDA_HOST_DEVICE
#endif

// FLYCUDA_HOT (in place of `inline`): a small helper of the inner ray loops (a
// box or triangle test), inlined into its callers even where the compiler's
// heuristics would not.
#if defined(__CUDACC__)
#define FLYCUDA_HOT __forceinline__
#elif defined(__GNUC__)
#define FLYCUDA_HOT inline __attribute__((always_inline))
#else
#define FLYCUDA_HOT inline
#endif

// FLYCUDA_UNROLL: `#pragma unroll` for nvcc (a fixed trip count unrolled into registers); nothing
// for the host compiler and the emulator (g++ -Werror would stop on the unknown pragma).
#if defined(__CUDACC__)
#define FLYCUDA_UNROLL _Pragma("unroll")
#else
#define FLYCUDA_UNROLL
#endif

// FLYCUDA_DEVICE_PATH: defined where the device branch of a shared helper is
// compiled (nvcc's device pass, or the emulator), so that the emulator runs
// the same branch the GPU runs (e.g. the _rn intrinsics, clock64()).
#if defined(__CUDA_ARCH__) || defined(FLYCUDA_EMU)
#define FLYCUDA_DEVICE_PATH 1
#endif

// FLYCUDA_NOINLINE: a function the device code calls rather than inlines (e.g. the
// ray traversal, called for primary and shadow rays: one copy each, with its own
// register allocation, instead of inlined copies that add up in the kernel).
#if defined(__CUDACC__)
#define FLYCUDA_NOINLINE __noinline__
#elif defined(__GNUC__)
#define FLYCUDA_NOINLINE __attribute__((noinline))
#else
#define FLYCUDA_NOINLINE
#endif

// FLYCUDA_SHARED(T, name, n): a block's static shared array `T name[n]` inside a
// kernel (nvcc: __shared__; the emulator: a slice of the block's arena, see
// emu/cuda_emu.h). Undefined for the CPU twins, which keep block-wide state on
// their own stack.
#if defined(__CUDACC__)
#define FLYCUDA_SHARED(T, name, n) __shared__ T name[n]
#elif defined(FLYCUDA_EMU)
#define FLYCUDA_SHARED(T, name, n) T* name = ::flycuda_emu::shared_array<T>(n)
#endif

// FLYCUDA_PARKED: the qualifier of a small local array whose values a device
// function parks in local memory across a long call (volatile keeps nvcc from
// holding them in registers: the register budget, tests/csrc/test_ptxas.py). The CPU
// twins have no such budget, and volatile there would only force a memory round
// trip per access and block common subexpressions, so it is plain on the host.
// (The emulator follows the device: its build has FLYCUDA_DEVICE_PATH.)
#if defined(FLYCUDA_DEVICE_PATH)
#define FLYCUDA_PARKED volatile
#else
#define FLYCUDA_PARKED
#endif

// Launch templates. Each family's kernels/<family>.cuh ends with launch_<op>(launch, args..., plan):
// a function template that states every launch of the op (which kernels, their grid, block,
// dynamic shared memory and argument list) once, as launch(kernel, grid, block, smem, args...).
// The CUDA launcher (cuda/<family>.cu) passes cuda::Launcher (cuda/launch.h:
// kernel<<<grid, block, smem, stream>>>(args...), then the launch check), the emulator's driver
// (emu/emu_main.cpp) flycuda_emu::Launcher (emu/cuda_emu.h: the emulated grid). So the emulator
// runs exactly the launcher's launches, and a kernel whose arguments change without its launch
// template (or a template whose arguments change without both callers) fails to compile.
// Like the kernels, they are compiled by nvcc and the emulator only, never for the CPU twins.
