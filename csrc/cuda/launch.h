// flycuda: what every CUDA launcher does around its launches (host code, nvcc only).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <utility>

#include "common.h"

// A failed CUDA runtime call (or kernel launch) throws, naming the call. The error is
// taken off the runtime's last-error slot first (cudaGetLastError), so that the next op
// does not report it under its own name. The slot is this extension's own: the runtime is
// linked statically, so torch's and Warp's errors never land in it, nor ours in theirs. (A
// sticky error, such as an illegal address from an earlier kernel, stays with the context:
// every later call reports it, as CUDA does; CUDA_LAUNCH_BLOCKING=1 shows where it arose.)
#define FLYCUDA_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudaError_t flycuda_err_ = (expr);                                              \
    if (flycuda_err_ != cudaSuccess) {                                                    \
      (void)cudaGetLastError();                                                           \
      FLYCUDA_FAIL("flycuda: CUDA error ", cudaGetErrorName(flycuda_err_), " (",          \
                   cudaGetErrorString(flycuda_err_), ") from ", #expr, " at ", __FILE__, ":", \
                   __LINE__);                                                             \
    }                                                                                     \
  } while (0)
#define FLYCUDA_LAUNCH_CHECK() FLYCUDA_CUDA_CHECK(cudaGetLastError())

namespace flycuda {
namespace cuda {

// torch's current CUDA stream on `device`, through PyTorch's stable C shim.
//
// torch >= 2.13: aoti_torch_get_current_stream (device-generic, in libtorch_cpu, declared
// for the 2.10 target too) and torch_stream_native_handle (2.13's, the stream's cudaStream_t).
// The 2.10 target this extension is built for does not declare the latter, and linking it
// would keep the extension from loading on torch 2.10-2.12, so it is looked up by name in
// the loaded libtorch_cpu.so; its type is the one shim.h declares for 2.13.
//
// torch 2.10-2.12: aoti_torch_get_current_cuda_stream, which lives in libtorch_cuda.so, a
// library a CPU build of torch does not have (linking it would keep the extension from
// loading there): looked up in the libtorch_cuda.so that torch has already loaded
// (RTLD_NOLOAD). Both lookups happen once, the first time a CUDA tensor reaches a launcher,
// which only a CUDA build of torch can hand us.
using NativeHandle = AOTITorchError (*)(StreamHandle, void**);  // torch_stream_native_handle (shim.h, 2.13)
using CudaStreamGetter = AOTITorchError (*)(int32_t, void**);   // aoti_torch_get_current_cuda_stream

// A symbol of a torch library that torch has already loaded (RTLD_NOLOAD: never loads one),
// or null. torch loads its libraries RTLD_LOCAL, so they are asked by handle, not RTLD_DEFAULT.
inline void* loaded_symbol(const char* library, const char* symbol) {
  void* lib = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  return lib ? dlsym(lib, symbol) : nullptr;
}

inline cudaStream_t current_stream(int32_t device) {
  static const NativeHandle native =
      reinterpret_cast<NativeHandle>(loaded_symbol("libtorch_cpu.so", "torch_stream_native_handle"));
  if (native != nullptr) {
    StreamHandle handle = nullptr;
    if (aoti_torch_get_current_stream(device, &handle) == TORCH_SUCCESS) {
      void* stream = nullptr;
      const AOTITorchError err = native(handle, &stream);
      (void)aoti_torch_delete_stream(handle);  // ours: the getter returns a new reference
      if (err == TORCH_SUCCESS) return static_cast<cudaStream_t>(stream);
    }  // else: the CUDA-specific getter below, which names the failure
  }
  static const CudaStreamGetter get =
      reinterpret_cast<CudaStreamGetter>(loaded_symbol("libtorch_cuda.so", "aoti_torch_get_current_cuda_stream"));
  if (get == nullptr) {
    FLYCUDA_FAIL("flycuda: this torch has no CUDA stream getter (torch_stream_native_handle, or "
                 "aoti_torch_get_current_cuda_stream in a loaded libtorch_cuda.so); is it a CUDA build of torch?");
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

// A copy of device memory to the host, in order on `stream` (after what the stream
// already holds), then waited for: what an op's value checks read (common.h CopyToHost).
inline CopyToHost copy_to_host(cudaStream_t stream) {
  return [stream](void* dst, const void* src, size_t bytes) {
    FLYCUDA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    FLYCUDA_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
}

// The launcher of the kernels' launch templates (kernels/platform.h, "launch templates") on
// the GPU: kernel<<<grid, block, smem, stream>>>(args...), the arguments converted to the
// kernel's parameters as in a direct launch, then the launch check. The emulator's:
// flycuda_emu::Launcher (emu/cuda_emu.h).
struct Launcher {
  cudaStream_t stream;
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) const {
    static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    FLYCUDA_LAUNCH_CHECK();
  }
};

}  // namespace cuda
}  // namespace flycuda
