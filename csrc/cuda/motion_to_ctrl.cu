// flycuda: motion_to_ctrl — the CUDA impl.
//
// One thread per (world w, DOF d), flattened as idx = w * D + d, 256 threads a
// block. Consecutive threads read consecutive floats of one frame row and
// write one ctrl row, so a warp touches one or two rows of each array.
//
// Fused advance (advance > 0), race-free in ONE launch: every thread reads the
// counter first; then each block, after __syncthreads, takes a ticket from a
// device-global slot; the block that takes the last ticket (all other blocks
// have finished reading) writes step + advance and resets the ticket. The slot
// is picked from the counter's address, so different counters rarely share
// one; two fused launches with counters in the same slot must not run at the
// same time on different streams (one replay stream never does).
#include "checks.h"
#include "common.h"
#include "motion_to_ctrl.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>

namespace flycuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTicketSlots = 256;
__device__ unsigned int g_tickets[kTicketSlots];  // zero at module load

template <typename index_t, typename offset_t>
__global__ void motion_to_ctrl_kernel(const float* __restrict__ motion,     // [M, T, D]
                                      int64_t* step,                        // [1]
                                      float* __restrict__ ctrl,             // [W, nu]
                                      const index_t* __restrict__ act_ids,  // [D]
                                      const offset_t* __restrict__ offsets, // [W] or null
                                      int64_t W, int64_t M, int64_t T, int64_t D,
                                      int64_t nu, int64_t ctrl_s0, int64_t ctrl_s1,
                                      double frames_per_step, bool loop,
                                      int64_t advance) {
  const int64_t s = *step;  // read by every thread before any advance
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < W * D) {
    const int64_t w = idx / D;
    const int64_t d = idx - w * D;
    const double offset = offsets ? static_cast<double>(offsets[w]) : 0.0;
    const FrameSample fs = sample_frame(offset, s, frames_per_step, T, loop);
    const float* rec = motion + (M == 1 ? 0 : w) * T * D;
    const int64_t c = static_cast<int64_t>(act_ids[d]);
    if (c >= 0 && c < nu) {  // ids are checked on the host, except in capture
      ctrl[w * ctrl_s0 + c * ctrl_s1] = blend(rec[fs.i0 * D + d], rec[fs.i1 * D + d], fs.a);
    }
  }
  if (advance != 0) {
    __syncthreads();  // every thread of this block has read the counter
    if (threadIdx.x == 0) {
      unsigned int* ticket =
          &g_tickets[(reinterpret_cast<uintptr_t>(step) / sizeof(int64_t)) % kTicketSlots];
      __threadfence();
      const unsigned int taken = atomicAdd(ticket, 1u);
      if (taken == gridDim.x - 1) {  // the last block: all reads are done
        __threadfence();
        *step = s + advance;
        atomicExch(ticket, 0u);
      }
    }
  }
}

void motion_to_ctrl_cuda(const at::Tensor& motion,   // [M, T, D]
                         at::Tensor& step,           // [1]
                         at::Tensor& ctrl,           // [W, nu]
                         const at::Tensor& act_ids,  // [D]
                         const c10::optional<at::Tensor>& offsets,  // [W]
                         double frames_per_step, c10::string_view mode,
                         int64_t advance) {
  // Check inputs (shapes, dtypes, devices) before touching the device.
  const FrameMode fm = check_motion_to_ctrl(motion, step, ctrl, act_ids, offsets,
                                            frames_per_step, mode, advance,
                                            /*check_values=*/false);
  // Guard the device. Check act_ids values unless the stream is being
  // captured (that check copies act_ids to the host).
  const c10::cuda::CUDAGuard guard(ctrl.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture == cudaStreamCaptureStatusNone) {
    check_index_values("motion_to_ctrl", "act_ids", act_ids, ctrl.size(1),
                       "nu = ctrl.size(1)", true);
  }
  // Extract sizes.
  const int64_t W = ctrl.size(0), M = motion.size(0), T = motion.size(1),
                D = motion.size(2), nu = ctrl.size(1);
  const int64_t n = W * D;
  if (n == 0 && advance == 0) return;
  // Launch the kernel (at least one block, so that an advance still happens).
  const int64_t blocks = n > 0 ? cdiv(n, kThreads) : 1;
  TORCH_CHECK(blocks <= INT32_MAX, "flycuda.motion_to_ctrl: W * D = ", n, " is too large");
  const at::ScalarType offset_type = offsets.has_value() ? offsets->scalar_type() : at::kFloat;
  AT_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "motion_to_ctrl_cuda", [&] {
    AT_DISPATCH_FLOATING_TYPES(offset_type, "motion_to_ctrl_cuda", [&] {
      motion_to_ctrl_kernel<index_t, scalar_t><<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
          motion.data_ptr<float>(), step.data_ptr<int64_t>(), ctrl.data_ptr<float>(),
          act_ids.data_ptr<index_t>(),
          offsets.has_value() ? offsets->data_ptr<scalar_t>() : nullptr, W, M, T, D, nu,
          ctrl.stride(0), ctrl.stride(1), frames_per_step, fm == FrameMode::Loop, advance);
    });
  });
  // Check the launch.
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) { m.impl("motion_to_ctrl", &motion_to_ctrl_cuda); }

}  // namespace flycuda
