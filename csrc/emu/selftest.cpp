// flycuda emu: kernels with deliberate bugs, one per mode, to show that the
// emulator and the sanitizers catch each kind (tests/csrc/test_emu.py runs them and
// expects the report). Not part of flycuda.
//
//   flycuda_emu_selftest MODE   (oob | race | shared_race | divergent | overflow | clean)
#include "kernels/platform.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

__global__ void oob_kernel(float* a, int n) {  // no `if (i < n)`: the last block writes past a[n-1]
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  a[i] = static_cast<float>(n);
}

__global__ void race_kernel(int* cells, int* out) {  // no __syncthreads() between write and read
  cells[threadIdx.x] = static_cast<int>(threadIdx.x);
  if (threadIdx.x == 0) {
    int sum = 0;
    for (unsigned int t = 0; t < blockDim.x; ++t) sum += cells[t];
    out[blockIdx.x] = sum;
  }
}

__global__ void divergent_kernel(int* out) {  // thread 0 leaves, the others wait at a barrier
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void overflow_kernel(int* out, int big) {  // signed overflow: undefined
  out[threadIdx.x] = big + static_cast<int>(threadIdx.x) + 1;
}

__global__ void clean_kernel(int* cells, int* out) {  // the race kernel, fixed
  cells[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) {
    int sum = 0;
    for (unsigned int t = 0; t < blockDim.x; ++t) sum += cells[blockIdx.x * blockDim.x + t];
    atomicAdd(out, sum);
  }
}

__global__ void shared_race_kernel(int* out) {  // shared memory written and read with no barrier
  FLYCUDA_SHARED(int, cells, 64);
  cells[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = cells[(threadIdx.x + 1) % blockDim.x];
}

// Each block's shared array is its own (blocks run two at a time here) and starts
// undefined (the emulator's poison, all 0x00 or all 0xFF bytes): out[b] = 1 when both hold.
__global__ void shared_clean_kernel(int* out) {
  FLYCUDA_SHARED(int, cells, 64);
  const bool poisoned = cells[threadIdx.x] == 0 || cells[threadIdx.x] == -1;
  __syncthreads();
  cells[threadIdx.x] = static_cast<int>(blockIdx.x);
  __syncthreads();
  bool mine = true;
  for (unsigned int t = 0; t < blockDim.x; ++t) mine = mine && cells[t] == static_cast<int>(blockIdx.x);
  if (!(mine && poisoned)) atomicExch(out + blockIdx.x, 0);
}

}  // namespace

int main(int argc, char** argv) {
  using flycuda_emu::launch;
  const char* mode = argc > 1 ? argv[1] : "";
  if (!std::strcmp(mode, "oob")) {
    std::vector<float> a(100);
    launch(dim3(4), dim3(32), 0, nullptr, oob_kernel, a.data(), 100);
  } else if (!std::strcmp(mode, "race")) {
    std::vector<int> cells(64), out(4);
    launch(dim3(4), dim3(64), 0, nullptr, race_kernel, cells.data(), out.data());
  } else if (!std::strcmp(mode, "shared_race")) {
    std::vector<int> out(64);
    launch(dim3(2), dim3(64), 0, nullptr, shared_race_kernel, out.data());
  } else if (!std::strcmp(mode, "divergent")) {
    std::vector<int> out(32);
    launch(dim3(1), dim3(32), 0, nullptr, divergent_kernel, out.data());
  } else if (!std::strcmp(mode, "overflow")) {
    std::vector<int> out(8);
    launch(dim3(1), dim3(8), 0, nullptr, overflow_kernel, out.data(), 2147483647 - 3);
  } else if (!std::strcmp(mode, "clean")) {
    std::vector<int> cells(4 * 64), out(1);
    launch(dim3(4), dim3(64), 0, nullptr, clean_kernel, cells.data(), out.data());
    if (out[0] != 4 * (63 * 64 / 2)) return 3;
    std::vector<int> ok(8, 1);
    launch(dim3(8), dim3(64), 0, nullptr, shared_clean_kernel, ok.data());
    for (int v : ok) {
      if (v != 1) return 4;
    }
  } else {
    std::fprintf(stderr, "usage: flycuda_emu_selftest oob|race|shared_race|divergent|overflow|clean\n");
    return 2;
  }
  return 0;
}
