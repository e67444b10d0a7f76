// flycuda: the record family — argument checks, launch plans and the CPU impls.
//
// record_qpos:  if step >= 0, step % every == 0 and k = step / every < R:
//                 history[w, k, d] = qpos[w, adrs[d]]      for all w, d
// record_chunk: if step >= 0 and step % every == 0, with k = step / every:
//                 chunks[(k / C) % B, w, k % C, d] = source[w, columns[d]]
// otherwise nothing is written. Both run kernels::record_kernel's plan (see
// kernels/record.cuh): the CPU twin below, the CUDA launcher and the
// emulator walk the same RecordPlan.
#include "record.h"

#include "common.h"

#include <climits>

namespace flycuda {

namespace {

// Checks shared by both ops: the source [W, N], the column ids [D], the
// counter, `every`; returns the plan's source part. `out` is the output.
kernels::RecordPlan check_source(const char* kOpName, const Tensor& src, const char* src_name,
                                 const Tensor& cols, const char* cols_name, const Tensor& out,
                                 const Tensor& step, int64_t every, int64_t W, int64_t D,
                                 const char* out_name) {
  FLYCUDA_CHECK(src.device() == out.device(), "argument '", src_name, "' must be on ", out.device(),
                " (the device of '", out_name, "'), got ", src.device());
  FLYCUDA_CHECK(src.scalar_type() == kFloat, "argument '", src_name, "' must have dtype Float, got ",
                src.scalar_type());
  FLYCUDA_CHECK(src.dim() == 2, "argument '", src_name, "' must be a 2-D tensor [W, N], got ", src.dim(),
                "-D with shape ", sizes_of(src));
  FLYCUDA_CHECK(src.size(0) == W, "argument '", src_name, "' must have size ", W, " (worlds) in dim 0, got shape ",
                sizes_of(src));
  FLYCUDA_CHECK(cols.device() == out.device(), "argument '", cols_name, "' must be on ", out.device(),
                " (the device of '", out_name, "'), got ", cols.device());
  FLYCUDA_CHECK(cols.scalar_type() == kInt || cols.scalar_type() == kLong, "argument '", cols_name,
                "' must have dtype Int or Long, got ", cols.scalar_type());
  FLYCUDA_CHECK(cols.dim() == 1 && cols.size(0) == D, "argument '", cols_name, "' must have shape [", D,
                "], got ", sizes_of(cols));
  FLYCUDA_CHECK(cols.is_contiguous(), "argument '", cols_name, "' must be contiguous, got strides ",
                strides_of(cols));
  FLYCUDA_CHECK(step.device() == out.device(), "argument 'step' must be on ", out.device(), " (the device of '",
                out_name, "'), got ", step.device());
  CHECK_COUNTER(step);
  FLYCUDA_CHECK(!may_share_memory(out, src), "argument '", out_name, "' must not share memory with argument '",
                src_name, "'");
  FLYCUDA_CHECK(!may_share_memory(out, cols), "argument '", out_name, "' must not share memory with argument '",
                cols_name, "'");
  FLYCUDA_CHECK(!may_share_memory(out, step), "argument '", out_name, "' must not share memory with argument 'step'");
  FLYCUDA_CHECK_VALUE(every >= 1, "argument 'every' must be >= 1, got ", every);
  FLYCUDA_CHECK(W * D <= INT32_MAX, "W * D = ", W * D, " must be < 2^31 (32-bit thread indices)");
  kernels::RecordPlan p;
  p.W = W;
  p.D = D;
  p.N = src.size(1);
  p.every = every;
  p.src_s0 = src.stride(0);
  p.src_s1 = src.stride(1);
  return p;
}

}  // namespace

kernels::RecordPlan check_record_qpos(const Tensor& qpos, const Tensor& adrs,
                                      const Tensor& history, const Tensor& step, int64_t every) {
  constexpr const char* kOpName = "record_qpos";
  // history: [W, R, D] float32, any strides.
  CHECK_DTYPE(history, kFloat);
  CHECK_DIM(history, 3);
  CHECK_NO_OVERLAP(history);
  // qpos: [W, nq] float32, any strides; adrs: [D]; step: [1] or [2].
  kernels::RecordPlan p = check_source(kOpName, qpos, "qpos", adrs, "adrs", history, step, every,
                                       history.size(0), history.size(2), "history");
  p.B = 1;
  p.C = std::max<int64_t>(history.size(1), 1);
  p.limit = history.size(1);
  p.out_sw = history.stride(0);
  p.out_sr = history.stride(1);
  p.out_sd = history.stride(2);
  if (checks_values_here(history)) {
    check_index_values(kOpName, "adrs", HostValues(adrs), p.N, "nq = qpos.size(1)", false);
  }
  return p;
}

kernels::RecordPlan check_record_chunk(const Tensor& source, const Tensor& columns,
                                       const Tensor& chunks, const Tensor& step, int64_t every) {
  constexpr const char* kOpName = "record_chunk";
  // chunks: [B, W, C, D] float32, any strides, B >= 1 and C >= 1.
  CHECK_DTYPE(chunks, kFloat);
  CHECK_DIM(chunks, 4);
  CHECK_NO_OVERLAP(chunks);
  FLYCUDA_CHECK(chunks.size(0) >= 1 && chunks.size(2) >= 1, "argument 'chunks' must be [B, W, C, D] with B >= 1 "
                "chunks of C >= 1 rows, got shape ", sizes_of(chunks));
  // source: [W, N] float32, any strides; columns: [D]; step: [1] or [2].
  kernels::RecordPlan p = check_source(kOpName, source, "source", columns, "columns", chunks, step, every,
                                       chunks.size(1), chunks.size(3), "chunks");
  p.B = chunks.size(0);
  p.C = chunks.size(2);
  p.limit = INT64_MAX;
  p.out_sb = chunks.stride(0);
  p.out_sw = chunks.stride(1);
  p.out_sr = chunks.stride(2);
  p.out_sd = chunks.stride(3);
  if (checks_values_here(chunks)) {
    check_index_values(kOpName, "columns", HostValues(columns), p.N, "N = source.size(1)", false);
  }
  return p;
}

namespace {

// The CPU twin of kernels::record_kernel: the same plan, worlds in parallel.
template <typename index_t>
void record_cpu_kernel(const float* src, const index_t* cols, float* out, int64_t s,
                       const kernels::RecordPlan& p) {
  const int64_t base = kernels::record_base(p, s);
  if (base < 0) return;
  torch::stable::parallel_for(0, p.W, /*grain_size=*/64, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      for (int64_t d = 0; d < p.D; ++d) {
        const int64_t a = static_cast<int64_t>(cols[d]);
        if (a >= 0 && a < p.N) out[base + w * p.out_sw + d * p.out_sd] = src[w * p.src_s0 + a * p.src_s1];
      }
    }
  });
}

void record_cpu(const Tensor& src, const Tensor& cols, Tensor& out, const Tensor& step,
                const kernels::RecordPlan& p) {
  if (p.threads() == 0) return;
  FLYCUDA_DISPATCH_INDEX_TYPES(cols.scalar_type(), "record_cpu", [&] {
    record_cpu_kernel<index_t>(dptr<float>(src), dptr<index_t>(cols), dptr<float>(out),
                               dptr<int64_t>(step)[0], p);
  });
}

void record_qpos_cpu(const Tensor& qpos,  // [W, nq]
                     const Tensor& adrs,  // [D]
                     Tensor& history,     // [W, R, D]
                     const Tensor& step,  // [1] or [2]
                     int64_t every) {
  record_cpu(qpos, adrs, history, step, check_record_qpos(qpos, adrs, history, step, every));
}

void record_chunk_cpu(const Tensor& source,   // [W, N]
                      const Tensor& columns,  // [D]
                      Tensor& chunks,         // [B, W, C, D]
                      const Tensor& step,     // [1] or [2]
                      int64_t every) {
  record_cpu(source, columns, chunks, step, check_record_chunk(source, columns, chunks, step, every));
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("record_qpos", TORCH_BOX(&record_qpos_cpu));
  m.impl("record_chunk", TORCH_BOX(&record_chunk_cpu));
}

}  // namespace flycuda
