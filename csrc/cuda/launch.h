// flycuda: what every CUDA launcher does around its launch (host code, nvcc only).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

namespace flycuda {
namespace cuda {

// The stream a launch goes to: torch's current stream on the current device
// (set by the launcher's CUDAGuard), the one Warp shares in flycuda's replay.
inline cudaStream_t stream_for_launch() { return c10::cuda::getCurrentCUDAStream(); }

// Is `stream` being captured into a CUDA graph? Then nothing may copy to the host.
// Asking about the legacy default stream while another stream is captured in
// global mode is itself an error (cudaErrorStreamCaptureImplicit): it means the
// op was called on the wrong stream, which is said plainly.
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    TORCH_CHECK(false, "flycuda: a CUDA graph is being captured on another stream while this op "
                "launches on the legacy default stream; launch flycuda ops on the capturing stream "
                "(e.g. inside `with flycuda.sim.streams.shared_stream(device):`)");
  }
  C10_CUDA_CHECK(err);
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace cuda
}  // namespace flycuda
