// flycuda: what every CUDA launcher does around its launch (host code, nvcc only).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include "common.h"

// A failed CUDA runtime call (or kernel launch) throws, naming the call.
#define FLYCUDA_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudaError_t flycuda_err_ = (expr);                                              \
    if (flycuda_err_ != cudaSuccess)                                                      \
      FLYCUDA_FAIL("flycuda: CUDA error ", cudaGetErrorName(flycuda_err_), " (",          \
                   cudaGetErrorString(flycuda_err_), ") from ", #expr, " at ", __FILE__, ":", \
                   __LINE__);                                                             \
  } while (0)
#define FLYCUDA_LAUNCH_CHECK() FLYCUDA_CUDA_CHECK(cudaGetLastError())

namespace flycuda {
namespace cuda {

// torch's current CUDA stream on `device`. The stable ABI's CUDA stream getter
// (aoti_torch_get_current_cuda_stream) lives in libtorch_cuda.so, which a CPU
// build of torch does not have: linking it would keep this extension from loading
// there. So it is looked up in the libtorch_cuda.so that torch has already loaded
// (RTLD_NOLOAD), once, the first time a CUDA tensor reaches a launcher, which only
// a CUDA torch can hand us. (torch >= 2.13 has a device-generic
// torch_stream_native_handle; the 2.10 target does not.)
inline cudaStream_t current_stream(int32_t device) {
  using GetStream = AOTITorchError (*)(int32_t, void**);
  static const GetStream get = [] {
    void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    return lib ? reinterpret_cast<GetStream>(dlsym(lib, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  if (get == nullptr) {
    FLYCUDA_FAIL("flycuda: this torch has no CUDA stream getter (aoti_torch_get_current_cuda_stream in a loaded "
                 "libtorch_cuda.so); is it a CUDA build of torch?");
  }
  void* stream = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(get(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

// Is `stream` being captured into a CUDA graph? Then nothing may copy to the host.
// Asking about the legacy default stream while another stream is captured in
// global mode is itself an error (cudaErrorStreamCaptureImplicit): it means the
// op was called on the wrong stream, which is said plainly.
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  if (err == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    FLYCUDA_FAIL("flycuda: a CUDA graph is being captured on another stream while this op "
                 "launches on the legacy default stream; launch flycuda ops on the capturing stream "
                 "(e.g. inside `with flycuda.sim.streams.shared_stream(device):`)");
  }
  FLYCUDA_CUDA_CHECK(err);
  return status != cudaStreamCaptureStatusNone;
}

// The stream a launch goes to: torch's current stream on the current device
// (set by the launcher's DeviceGuard), the one Warp shares in flycuda's replay.
// Asking whether it is captured turns a launch on the legacy default stream during
// another stream's capture into the plain error above (not a failed launch).
inline cudaStream_t stream_for_launch() {
  const cudaStream_t stream = current_stream(torch::stable::accelerator::getCurrentDeviceIndex());
  (void)capturing(stream);
  return stream;
}

}  // namespace cuda
}  // namespace flycuda
