// flycuda: the host side's one view of torch, and the check macros and helpers
// shared by every kernel family.
//
// The extension is built on PyTorch's stable ABI (torch/csrc/stable, targeting
// torch 2.10, TORCH_TARGET_VERSION in setup.py): one binary runs on every torch
// >= 2.10. Nothing here includes ATen or c10; `Tensor` is torch::stable::Tensor.
//
// Every checker function defines `constexpr const char* kOpName = "<op>";` so
// that the macros below can prefix messages with the public op name, e.g.
//   flycuda.motion_to_ctrl: argument 'ctrl' must have dtype Float, got Double
#pragma once

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

// torch 2.10's stable headers (the oldest this builds against) name the shim's error check
// TORCH_ERROR_CODE_CHECK; 2.11+ add STABLE_TORCH_ERROR_CODE_CHECK, which also carries the
// shim's own message. Either way the same check.
#ifndef STABLE_TORCH_ERROR_CODE_CHECK
#define STABLE_TORCH_ERROR_CODE_CHECK(call) TORCH_ERROR_CODE_CHECK(call)
#endif

namespace flycuda {

using Tensor = torch::stable::Tensor;
using TensorList = std::vector<Tensor>;  // a Tensor[] argument (taken by const&)
using torch::headeronly::ScalarType;
inline constexpr ScalarType kFloat = ScalarType::Float;
inline constexpr ScalarType kDouble = ScalarType::Double;
inline constexpr ScalarType kInt = ScalarType::Int;
inline constexpr ScalarType kLong = ScalarType::Long;
inline constexpr ScalarType kByte = ScalarType::Byte;
inline constexpr ScalarType kBool = ScalarType::Bool;

// "[2, 3]": a tensor's shape or strides as ATen prints them (errors quote them).
std::string sizes_of(const Tensor& t);
std::string strides_of(const Tensor& t);
std::string sizes_str(const std::vector<int64_t>& sizes);
// "cpu", "cuda:0".
std::string device_str(const torch::stable::Device& d);

// t's data as T* (the dtype checked by torch): what the kernels and CPU twins take.
template <typename T>
T* dptr(const Tensor& t) {
  return t.mutable_data_ptr<T>();
}

namespace detail {
// A message's pieces as text, appended to one string. No std::ostream: on the first
// GPU machine (torch 2.11, the extension built with another gcc than the one that built
// torch) the checks whose messages hold a device or a number crashed the process
// instead of raising, while messages of words alone raised; ostream's number formatting
// (the locale's facets, in whichever libstdc++ the process bound) is the likeliest
// cause, and nothing here needs it. Numbers are std::to_string's and "%g"'s (what an
// ostream prints by default), pointers "%p".
inline void append(std::string& s, std::string_view v) { s.append(v); }
inline void append(std::string& s, const std::string& v) { s.append(v); }
inline void append(std::string& s, const char* v) { s.append(v ? v : "(null)"); }
inline void append(std::string& s, char c) { s.push_back(c); }
inline void append(std::string& s, ScalarType t) { s.append(torch::headeronly::toString(t)); }
inline void append(std::string& s, const torch::stable::Device& d) { s.append(device_str(d)); }
inline void append(std::string& s, const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  s.append(buf);
}
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void append(std::string& s, T v) {
  s.append(std::to_string(v));
}
template <typename T, std::enable_if_t<std::is_enum_v<T>, int> = 0>  // a plain enum's constant, as a number
void append(std::string& s, T v) {
  s.append(std::to_string(static_cast<std::underlying_type_t<T>>(v)));
}
template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
void append(std::string& s, T v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  s.append(buf);
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}
}  // namespace detail

}  // namespace flycuda

// A failed check throws std::runtime_error (Python: RuntimeError) with the
// message alone; the _VALUE form throws std::invalid_argument, which torch <= 2.14
// raises as ValueError and 2.15 as RuntimeError: so the Python wrappers check the
// scalar options themselves (flycuda/ops/checks.py check_option), a ValueError on
// every torch, and these stay the backstop for direct torch.ops calls.
#define FLYCUDA_FAIL(...) throw std::runtime_error(::flycuda::detail::cat(__VA_ARGS__))
#define FLYCUDA_CHECK(cond, ...)                                              \
  do {                                                                       \
    if (!(cond)) FLYCUDA_FAIL("flycuda.", kOpName, ": ", __VA_ARGS__);        \
  } while (0)
#define FLYCUDA_CHECK_VALUE(cond, ...)                                        \
  do {                                                                       \
    if (!(cond))                                                             \
      throw std::invalid_argument(                                           \
          ::flycuda::detail::cat("flycuda.", kOpName, ": ", __VA_ARGS__));    \
  } while (0)

// AT_DISPATCH_INDEX_TYPES / AT_DISPATCH_FLOATING_TYPES without ATen: runs the
// lambda with `index_t` (int32/int64) or `scalar_t` (float/double) bound.
#define FLYCUDA_DISPATCH_TWO_(TYPE, NAME, ALIAS, K1, T1, K2, T2, WHAT, ...)     \
  [&] {                                                                      \
    switch (TYPE) {                                                          \
      case K1: {                                                             \
        using ALIAS = T1;                                                    \
        return __VA_ARGS__();                                                \
      }                                                                      \
      case K2: {                                                             \
        using ALIAS = T2;                                                    \
        return __VA_ARGS__();                                                \
      }                                                                      \
      default:                                                               \
        FLYCUDA_FAIL(NAME, ": expected ", WHAT, " dtype, got ", TYPE);         \
    }                                                                        \
  }()
#define FLYCUDA_DISPATCH_INDEX_TYPES(TYPE, NAME, ...)                                                  \
  FLYCUDA_DISPATCH_TWO_(TYPE, NAME, index_t, ::flycuda::kInt, int32_t, ::flycuda::kLong, int64_t,     \
                        "an Int or Long index", __VA_ARGS__)
#define FLYCUDA_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...)                                               \
  FLYCUDA_DISPATCH_TWO_(TYPE, NAME, scalar_t, ::flycuda::kFloat, float, ::flycuda::kDouble, double,   \
                        "a Float or Double", __VA_ARGS__)

#define CHECK_DTYPE(x, dt)                                                   \
  FLYCUDA_CHECK((x).scalar_type() == (dt), "argument '" #x "' must have dtype ", \
                (dt), ", got ", (x).scalar_type())
#define CHECK_DIM(x, n)                                                    \
  FLYCUDA_CHECK((x).dim() == (n), "argument '" #x "' must be a ", (n),       \
                "-D tensor, got ", (x).dim(), "-D with shape ", ::flycuda::sizes_of(x))
#define CHECK_SIZE(x, i, n)                                                  \
  FLYCUDA_CHECK((x).size(i) == (n), "argument '" #x "' must have size ", (n), \
                " in dim ", (i), ", got shape ", ::flycuda::sizes_of(x))
#define CHECK_SAME_DEVICE(x, ref)                                            \
  FLYCUDA_CHECK((x).device() == (ref).device(), "argument '" #x               \
                "' must be on ", (ref).device(), " (the device of '" #ref      \
                "'), got ", (x).device())
#define CHECK_CONTIGUOUS(x)                                                  \
  FLYCUDA_CHECK((x).is_contiguous(), "argument '" #x                          \
                "' must be contiguous, got shape ", ::flycuda::sizes_of(x),  \
                " strides ", ::flycuda::strides_of(x))
#define CHECK_NO_OVERLAP(x)                                                  \
  FLYCUDA_CHECK(!::flycuda::has_internal_overlap(x),                          \
                "argument '" #x "' must not have overlapping memory (e.g. an " \
                "expanded tensor; a copy is the way in), got shape ", ::flycuda::sizes_of(x), \
                " strides ", ::flycuda::strides_of(x))
// An output must not share memory with an input: the kernels mark both
// __restrict__, and the CPU twins would read what they already wrote.
#define CHECK_NOT_ALIASED(out, in)                                             \
  FLYCUDA_CHECK(!::flycuda::may_share_memory(out, in), "argument '" #out        \
                "' must not share memory with argument '" #in "'")
#define CHECK_INDEX_DTYPE(x)                                                 \
  FLYCUDA_CHECK((x).scalar_type() == ::flycuda::kInt || (x).scalar_type() == ::flycuda::kLong, \
                "argument '" #x "' must have dtype Int or Long, got ",       \
                (x).scalar_type())

// The op namespace: `flycuda` for the installed extension. JIT builds of these
// sources (flycuda.dev.build) pass -DFLYCUDA_NS=flycuda_jit so both can live in
// one process. STABLE_TORCH_LIBRARY stringifies its argument, so FLYCUDA_NS would
// not be expanded if passed directly (pytorch#127615); one more macro level does it.
#ifndef FLYCUDA_NS
#define FLYCUDA_NS flycuda
#endif
#define FLYCUDA_LIBRARY_EXPAND_(ns, m) STABLE_TORCH_LIBRARY(ns, m)
#define FLYCUDA_LIBRARY(m) FLYCUDA_LIBRARY_EXPAND_(FLYCUDA_NS, m)
#define FLYCUDA_LIBRARY_IMPL_EXPAND_(ns, k, m) STABLE_TORCH_LIBRARY_IMPL(ns, k, m)
#define FLYCUDA_LIBRARY_IMPL(k, m) FLYCUDA_LIBRARY_IMPL_EXPAND_(FLYCUDA_NS, k, m)

// FLYCUDA_HOST_DEVICE and friends (no ATen): see kernels/platform.h.
#include "kernels/platform.h"

namespace flycuda {

// The nbytes of t's storage (a step counter's hidden ticket lives past its view).
int64_t storage_nbytes(const Tensor& t);

// Copies `bytes` bytes of device memory at `src` to host memory at `dst`: a CUDA
// launcher's (cudaMemcpy on its stream, then a sync). Empty where the tensors are on the
// CPU. No torch call: an op never calls back into the dispatcher (on the first GPU
// machine, torch 2.11, the one op that did, render_tiles' check through
// torch::stable::to, crashed the process).
using CopyToHost = std::function<void(void* dst, const void* src, size_t bytes)>;

// A tensor's values on the host, to check them there: a CPU tensor's own (a contiguous
// copy if it is strided), a device tensor's copied through `copy` (it must be contiguous).
class HostValues {
 public:
  explicit HostValues(const Tensor& t, const CopyToHost& copy = {});
  HostValues(const HostValues&) = delete;  // data_ points into this object's own members
  HostValues& operator=(const HostValues&) = delete;
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  ScalarType scalar_type() const { return dtype_; }
  int64_t numel() const { return numel_; }
  int64_t size(int64_t d) const { return sizes_[static_cast<size_t>(d)]; }

 private:
  std::optional<Tensor> cpu_;          // a CPU tensor (held: data_ points into it), contiguous
  std::vector<unsigned char> bytes_;   // a device tensor's values
  const void* data_ = nullptr;
  ScalarType dtype_;
  int64_t numel_ = 0;
  std::vector<int64_t> sizes_;
};

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Checks that every entry of the 1-D index tensor `ids` lies in [0, bound)
// and, when `unique`, that no entry repeats. Copies `ids` to the host when it
// lives on a device (callers skip this while a CUDA graph is being captured).
// Nothing is remembered between calls: the stable ABI has no version counter to
// key a cache on. So the CPU impls (no copy: a scan of the index vector) check
// on every call, and the CUDA launchers never do: the Python wrappers check CUDA
// index tensors once per tensor version (flycuda/ops/_values.py), and every
// kernel skips out-of-range entries, so a bad index from a direct torch.ops call
// is never a memory error.
// `skip`: one value outside [0, bound) that the op also accepts (render_tiles' worlds: -1,
// an image skipped); none by default (INT64_MAX, never a valid index).
void check_index_values(const char* op, const char* name, const HostValues& ids,
                        int64_t bound, const char* bound_name, bool unique, int64_t skip = INT64_MAX);

// Do this op's C++ checks read its index values? Where `out` (the op's output) lives
// on the CPU, yes; on CUDA the Python wrappers do, once per tensor version.
inline bool checks_values_here(const Tensor& out) { return out.is_cpu(); }

// Two more checks of 1-D int32/int64 tensors: CSR offsets
// (offsets[0] == 0, non-decreasing, offsets[-1] == total) and a lower bound on
// every value.
void check_offsets_values(const char* op, const char* name, const Tensor& offsets, int64_t total,
                          const char* total_name);
void check_min_values(const char* op, const char* name, const Tensor& values, int64_t min);

// May some element of t repeat in memory? True for a stride 0 over a size > 1 (an expand) and for
// any as_strided overlap; also, conservatively, for the rare interleaved layout whose strides do
// not each pass the smaller dims' reach (common.cpp).
bool has_internal_overlap(const Tensor& t);

// Do the byte ranges that a and b span (any strides) intersect on one device?
bool may_share_memory(const Tensor& a, const Tensor& b);

// An op's tensor argument `name`: on `ref`'s device, of dtype dt and exactly `shape` (-1: any size
// there), contiguous; the message prefixed with `op`'s name.
void expect(const char* op, const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape,
            const Tensor& ref, const char* ref_name);
// No output shares memory with an input or with another output.
using Named = std::pair<const char*, const Tensor*>;
void check_disjoint(const char* op, const std::vector<Named>& inputs, const std::vector<Named>& outputs);

}  // namespace flycuda
