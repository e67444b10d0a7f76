// flycuda: record_qpos — the CUDA impl. One thread per (world w, DOF d),
// idx = w * D + d. Every thread reads the device-side counter and returns at
// once when this step is not recorded, so the launch is graph-capturable.
#include "checks.h"
#include "common.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

constexpr int kThreads = 256;

template <typename index_t>
__global__ void record_qpos_kernel(const float* __restrict__ qpos,     // [W, nq]
                                   const index_t* __restrict__ adrs,   // [D]
                                   float* __restrict__ history,        // [W, R, D]
                                   const int64_t* __restrict__ step,   // [1]
                                   int64_t every, int64_t W, int64_t R, int64_t D,
                                   int64_t nq, int64_t q_s0, int64_t q_s1,
                                   int64_t h_s0, int64_t h_s1, int64_t h_s2) {
  const int64_t s = *step;
  if (s < 0 || s % every != 0 || s / every >= R) return;
  const int64_t k = s / every;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= W * D) return;
  const int64_t w = idx / D;
  const int64_t d = idx - w * D;
  const int64_t a = static_cast<int64_t>(adrs[d]);
  if (a < 0 || a >= nq) return;  // adrs are checked on the host, except in capture
  history[w * h_s0 + k * h_s1 + d * h_s2] = qpos[w * q_s0 + a * q_s1];
}

void record_qpos_cuda(const at::Tensor& qpos,  // [W, nq]
                      const at::Tensor& adrs,  // [D]
                      at::Tensor& history,     // [W, R, D]
                      const at::Tensor& step,  // [1]
                      int64_t every) {
  // Check inputs (shapes, dtypes, devices) before touching the device.
  check_record_qpos(qpos, adrs, history, step, every, /*check_values=*/false);
  // Guard the device. Check adrs values unless the stream is being captured
  // (that check copies adrs to the host).
  const c10::cuda::CUDAGuard guard(history.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture == cudaStreamCaptureStatusNone) {
    check_index_values("record_qpos", "adrs", adrs, qpos.size(1), "nq = qpos.size(1)",
                       false);
  }
  // Extract sizes.
  const int64_t W = history.size(0), R = history.size(1), D = history.size(2);
  const int64_t n = W * D;
  if (n == 0 || R == 0) return;
  // Launch the kernel and check the launch.
  const int64_t blocks = cdiv(n, kThreads);
  TORCH_CHECK(blocks <= INT32_MAX, "flycuda.record_qpos: W * D = ", n, " is too large");
  AT_DISPATCH_INDEX_TYPES(adrs.scalar_type(), "record_qpos_cuda", [&] {
    record_qpos_kernel<index_t><<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
        qpos.data_ptr<float>(), adrs.data_ptr<index_t>(), history.data_ptr<float>(),
        step.data_ptr<int64_t>(), every, W, R, D, qpos.size(1), qpos.stride(0),
        qpos.stride(1), history.stride(0), history.stride(1), history.stride(2));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("record_qpos", &record_qpos_cuda); }

}  // namespace flycuda
