// flycuda: the record family (record_qpos, record_chunk) — the CUDA launcher
// (kernel and plan: csrc/kernels/record.cuh).
#include "checks.h"
#include "common.h"
#include "cuda/launch.h"
#include "kernels/record.cuh"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace flycuda {
namespace {

// Launches record_kernel with a checked plan on the current stream; `name`,
// `cols_name` and `bound_name` name the op, its index argument and the bound
// for the messages (values checked once per tensor version, never in capture).
void launch_record(const char* name, const char* cols_name, const char* bound_name, const at::Tensor& src,
                   const at::Tensor& cols, at::Tensor& out, const at::Tensor& step,
                   const kernels::RecordPlan& p) {
  const c10::cuda::CUDAGuard guard(out.device());
  const cudaStream_t stream = cuda::stream_for_launch();
  if (!cuda::capturing(stream)) {
    check_index_values(name, cols_name, cols, p.N, bound_name, false);
  }
  if (p.threads() == 0 || p.limit == 0) return;
  AT_DISPATCH_INDEX_TYPES(cols.scalar_type(), "record_cuda", [&] {
    kernels::record_kernel<index_t><<<static_cast<unsigned int>(p.blocks()), kernels::kRecordThreads, 0, stream>>>(
        src.data_ptr<float>(), cols.data_ptr<index_t>(), out.data_ptr<float>(), step.data_ptr<int64_t>(), p);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void record_qpos_cuda(const at::Tensor& qpos,  // [W, nq]
                      const at::Tensor& adrs,  // [D]
                      at::Tensor& history,     // [W, R, D]
                      const at::Tensor& step,  // [1] or [2]
                      int64_t every) {
  const auto p = check_record_qpos(qpos, adrs, history, step, every, /*check_values=*/false);
  launch_record("record_qpos", "adrs", "nq = qpos.size(1)", qpos, adrs, history, step, p);
}

void record_chunk_cuda(const at::Tensor& source,   // [W, N]
                       const at::Tensor& columns,  // [D]
                       at::Tensor& chunks,         // [B, W, C, D]
                       const at::Tensor& step,     // [1] or [2]
                       int64_t every) {
  const auto p = check_record_chunk(source, columns, chunks, step, every, /*check_values=*/false);
  launch_record("record_chunk", "columns", "N = source.size(1)", source, columns, chunks, step, p);
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CUDA, m) {
  m.impl("record_qpos", &record_qpos_cuda);
  m.impl("record_chunk", &record_chunk_cuda);
}

}  // namespace flycuda
