// flycuda gpu-check's sanitizer self-test: one deliberately broken kernel per class
// of bug that a compute-sanitizer tool of the self-check must catch, and a clean
// kernel that every tool must pass. Shipped with the package (gpu-check builds it
// with the toolkit's nvcc) so that an installed flycuda can show each tool working.
//
//   gpucheck_selftest clean        in-bounds, initialized, uniform barrier: no report
//   gpucheck_selftest oob          writes one float past a cudaMalloc'd buffer (memcheck)
//   gpucheck_selftest badmask      __syncwarp with a mask that leaves out the calling lane (synccheck)
//   gpucheck_selftest uninit       reads device memory nothing wrote (initcheck)
//
// Exit status 0 when the kernel ran (the tool's own exit status, with
// --error-exitcode, says whether it reported); 2 on bad usage or a CUDA error.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

constexpr int kN = 256;

__global__ void clean_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0.f;
  if (i < n) v = in[i] * 2.f;
  __syncthreads();  // reached by every thread of the block
  if (i < n) out[i] = v;
}

__global__ void oob_kernel(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.f;  // the bound is off by one: out[n] is past the buffer
}

__global__ void badmask_kernel(float* out, int n) {
  // Every lane calls __syncwarp with the mask of lane 0 alone: lanes 1-31 name a mask without
  // themselves, which the PTX ISA leaves undefined (bar.warp.sync: the executing thread must be in
  // membermask) and synccheck reports as a barrier error (invalid arguments). The first two forms
  // failed on an H200: a warp-aligned split at __syncthreads() is legal from Volta on (synccheck
  // rightly passed it), and each half of every warp at its own __syncthreads() hung synccheck
  // past 60 s. Not yet run on a GPU in this form; gpu-check gives it 60 s.
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.f;
  __syncwarp(1u);
  if (i < n) out[i] += 2.f;
}

__global__ void uninit_kernel(const float* never_written, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = never_written[i];
}

int check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gpucheck_selftest: %s: %s\n", what, cudaGetErrorString(e));
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpucheck_selftest clean|oob|badmask|uninit\n");
    return 2;
  }
  const char* mode = argv[1];
  float *in = nullptr, *out = nullptr;
  if (check(cudaMalloc(&in, kN * sizeof(float)), "cudaMalloc") ||
      check(cudaMalloc(&out, kN * sizeof(float)), "cudaMalloc") ||
      check(cudaMemset(out, 0, kN * sizeof(float)), "cudaMemset")) {
    return 2;
  }
  if (std::strcmp(mode, "clean") == 0) {
    if (check(cudaMemset(in, 0, kN * sizeof(float)), "cudaMemset")) return 2;
    clean_kernel<<<2, kN / 2>>>(in, out, kN);
  } else if (std::strcmp(mode, "oob") == 0) {
    oob_kernel<<<2, kN / 2 + 1>>>(out, kN);
  } else if (std::strcmp(mode, "badmask") == 0) {
    badmask_kernel<<<2, kN / 2>>>(out, kN);
  } else if (std::strcmp(mode, "uninit") == 0) {
    uninit_kernel<<<2, kN / 2>>>(in, out, kN);  // `in` was never written
  } else {
    std::fprintf(stderr, "gpucheck_selftest: unknown mode '%s'\n", mode);
    return 2;
  }
  const cudaError_t launch = cudaGetLastError();
  const cudaError_t sync = cudaDeviceSynchronize();
  std::printf("gpucheck_selftest %s: launch %s, sync %s\n", mode, cudaGetErrorString(launch),
              cudaGetErrorString(sync));
  cudaFree(in);
  cudaFree(out);
  return 0;
}
