// flycuda: check macros and helpers shared by every kernel family.
//
// Every checker function defines `constexpr const char* kOpName = "<op>";` so
// that the macros below can prefix messages with the public op name, e.g.
//   flycuda.motion_to_ctrl: argument 'ctrl' must have dtype Float, got Double
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>

#define FLYCUDA_CHECK(cond, ...) \
  TORCH_CHECK(cond, "flycuda.", kOpName, ": ", __VA_ARGS__)
#define FLYCUDA_CHECK_VALUE(cond, ...) \
  TORCH_CHECK_VALUE(cond, "flycuda.", kOpName, ": ", __VA_ARGS__)

#define CHECK_DTYPE(x, dt)                                                   \
  FLYCUDA_CHECK((x).scalar_type() == (dt), "argument '" #x "' must have dtype ", \
                (dt), ", got ", (x).scalar_type())
#define CHECK_DIM(x, n)                                                    \
  FLYCUDA_CHECK((x).dim() == (n), "argument '" #x "' must be a ", (n),       \
                "-D tensor, got ", (x).dim(), "-D with shape ", (x).sizes())
#define CHECK_SIZE(x, i, n)                                                  \
  FLYCUDA_CHECK((x).size(i) == (n), "argument '" #x "' must have size ", (n), \
                " in dim ", (i), ", got shape ", (x).sizes())
#define CHECK_SAME_DEVICE(x, ref)                                            \
  FLYCUDA_CHECK((x).device() == (ref).device(), "argument '" #x               \
                "' must be on ", (ref).device(), " (the device of '" #ref      \
                "'), got ", (x).device())
#define CHECK_CONTIGUOUS(x)                                                  \
  FLYCUDA_CHECK((x).is_contiguous(), "argument '" #x                          \
                "' must be contiguous, got shape ", (x).sizes(), " strides ", \
                (x).strides())
#define CHECK_NO_OVERLAP(x)                                                  \
  FLYCUDA_CHECK(at::has_internal_overlap(x) != at::MemOverlap::Yes,            \
                "argument '" #x "' must not have overlapping memory (e.g. an " \
                "expanded tensor), got shape ", (x).sizes(), " strides ",    \
                (x).strides())
// An output must not share memory with an input: the kernels mark both
// __restrict__, and the CPU twins would read what they already wrote.
#define CHECK_NOT_ALIASED(out, in)                                             \
  FLYCUDA_CHECK(!::flycuda::may_share_memory(out, in), "argument '" #out        \
                "' must not share memory with argument '" #in "'")
#define CHECK_INDEX_DTYPE(x)                                                 \
  FLYCUDA_CHECK((x).scalar_type() == at::kInt || (x).scalar_type() == at::kLong, \
                "argument '" #x "' must have dtype Int or Long, got ",       \
                (x).scalar_type())

// The step counter: int64 [1] = {step}, or [2] = {step, reserved}. A [2] from
// new_step_counter also carries a hidden ticket beyond the view (its storage is
// kernels::kCounterBytes long) that lets motion_to_ctrl fuse its advance into one
// launch; see csrc/kernels/motion_to_ctrl.cuh.
#define CHECK_COUNTER(x)                                                     \
  FLYCUDA_CHECK((x).scalar_type() == at::kLong && (x).dim() == 1 &&            \
                    ((x).size(0) == 1 || (x).size(0) == 2) && (x).is_contiguous(), \
                "argument '" #x "' must be a contiguous int64 step counter of shape " \
                "[1] or [2] (see flycuda.new_step_counter), got ", (x).scalar_type(), \
                " of shape ", (x).sizes())

// The op namespace: `flycuda` for the installed extension. JIT builds of these
// sources (flycuda.dev.build) pass -DFLYCUDA_NS=flycuda_jit so both can live in
// one process. TORCH_LIBRARY stringifies its argument, so FLYCUDA_NS would not
// be expanded if passed directly (pytorch#127615); one more macro level does it.
#ifndef FLYCUDA_NS
#define FLYCUDA_NS flycuda
#endif
#define FLYCUDA_LIBRARY_EXPAND_(ns, m) TORCH_LIBRARY(ns, m)
#define FLYCUDA_LIBRARY(m) FLYCUDA_LIBRARY_EXPAND_(FLYCUDA_NS, m)
#define FLYCUDA_LIBRARY_IMPL_EXPAND_(ns, k, m) TORCH_LIBRARY_IMPL(ns, k, m)
#define FLYCUDA_LIBRARY_IMPL(k, m) FLYCUDA_LIBRARY_IMPL_EXPAND_(FLYCUDA_NS, k, m)

// FLYCUDA_HOST_DEVICE and friends (no ATen): see kernels/platform.h.
#include "kernels/platform.h"

namespace flycuda {

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Checks that every entry of the 1-D index tensor `ids` lies in [0, bound)
// and, when `unique`, that no entry repeats. Copies `ids` to the host when it
// lives on a device (callers skip this while a CUDA graph is being captured).
// A tensor that passed is remembered (by identity, version and data pointer),
// so an unchanged index tensor is validated once, not on every call (inference
// tensors, which have no version, every time). motion_to_ctrl and record_qpos
// skip out-of-range entries in their kernels, so a write that bypasses the
// version counter (e.g. through a Warp array) is never a memory error there.
void check_index_values(const char* op, const char* name, const at::Tensor& ids,
                        int64_t bound, const char* bound_name, bool unique);

// The same caching for two more checks of 1-D int32/int64 tensors: CSR offsets
// (offsets[0] == 0, non-decreasing, offsets[-1] == total) and a lower bound on
// every value.
void check_offsets_values(const char* op, const char* name, const at::Tensor& offsets, int64_t total,
                          const char* total_name);
void check_min_values(const char* op, const char* name, const at::Tensor& values, int64_t min);

// Do the byte ranges that a and b span (any strides) intersect in one storage?
bool may_share_memory(const at::Tensor& a, const at::Tensor& b);

}  // namespace flycuda
