// flycuda: the record family (record_qpos, record_chunk) — the CUDA launcher
// (kernel, plan and launch: csrc/kernels/record.cuh).
#include "record.h"

#include "common.h"
#include "cuda/launch.h"

namespace flycuda {
namespace {

// Launches record_kernel with a checked plan on the current stream (the column
// ids' values: the Python wrappers check them once per tensor version; the kernel
// skips out-of-range ones).
void launch_record(const Tensor& src,   // [W, N]
                   const Tensor& cols,  // [D]
                   Tensor& out,         // [B, W, C, D]
                   const Tensor& step,  // [1] or [2]
                   const kernels::RecordPlan& p) {
  const torch::stable::accelerator::DeviceGuard guard(out.get_device_index());
  const cudaStream_t stream = cuda::stream_for_launch();
  FLYCUDA_DISPATCH_INDEX_TYPES(cols.scalar_type(), "record_cuda", [&] {
    kernels::launch_record(cuda::Launcher{stream}, dptr<float>(src), dptr<index_t>(cols), dptr<float>(out),
                           dptr<int64_t>(step), p);
  });
}

void record_qpos_cuda(const Tensor& qpos,  // [W, nq]
                      const Tensor& adrs,  // [D]
                      Tensor& history,     // [W, R, D]
                      const Tensor& step,  // [1] or [2]
                      int64_t every) {
  const auto p = check_record_qpos(qpos, adrs, history, step, every);
  launch_record(qpos, adrs, history, step, p);
}

void record_chunk_cuda(const Tensor& source,   // [W, N]
                       const Tensor& columns,  // [D]
                       Tensor& chunks,         // [B, W, C, D]
                       const Tensor& step,     // [1] or [2]
                       int64_t every) {
  const auto p = check_record_chunk(source, columns, chunks, step, every);
  launch_record(source, columns, chunks, step, p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("record_qpos", TORCH_BOX(&record_qpos_cuda));
  m.impl("record_chunk", TORCH_BOX(&record_chunk_cuda));
}

}  // namespace flycuda
