// flycuda: host-side helpers shared by the kernel families.
#include "common.h"

#include <algorithm>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flycuda {

namespace {

std::string array_str(const int64_t* v, int64_t n) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s.append(i ? ", " : "").append(std::to_string(v[i]));
  return s.append("]");
}

}  // namespace

std::string sizes_of(const Tensor& t) { return array_str(t.sizes().data(), t.dim()); }
std::string strides_of(const Tensor& t) { return array_str(t.strides().data(), t.dim()); }
std::string sizes_str(const std::vector<int64_t>& sizes) {
  return array_str(sizes.data(), static_cast<int64_t>(sizes.size()));
}

std::string device_str(const torch::stable::Device& d) {
  // c10::DeviceTypeName's lower-case names, in torch::headeronly::DeviceType's order.
  static const char* const kNames[] = {"cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip",
                                       "fpga", "maia", "xla", "vulkan", "metal", "xpu", "mps",
                                       "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone"};
  const auto type = static_cast<int>(d.type());
  std::string s = type >= 0 && type < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))
                      ? std::string(kNames[type])
                      : "device type " + std::to_string(type);
  if (!d.is_cpu() && d.has_index()) s.append(":").append(std::to_string(static_cast<int>(d.index())));
  return s;
}

int64_t storage_nbytes(const Tensor& t) {
  int64_t nbytes = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_storage_size(t.get(), &nbytes));
  return nbytes;
}

HostValues::HostValues(const Tensor& t, const CopyToHost& copy)
    : dtype_(t.scalar_type()), numel_(t.numel()), sizes_(t.sizes().begin(), t.sizes().end()) {
  constexpr const char* kOpName = "host_values";
  if (t.is_cpu()) {
    cpu_ = t.is_contiguous() ? t : torch::stable::contiguous(t);
    data_ = cpu_->const_data_ptr();
    return;
  }
  FLYCUDA_CHECK(copy && t.is_contiguous(), "internal: a ", t.device(), " tensor's values need a contiguous "
                "tensor and a copy to the host (got ", copy ? "a strided tensor" : "no copy", ")");
  bytes_.resize(static_cast<size_t>(numel_ * t.element_size()));
  if (!bytes_.empty()) copy(bytes_.data(), t.const_data_ptr(), bytes_.size());
  data_ = bytes_.data();
}

bool has_internal_overlap(const Tensor& t) {
  if (t.is_contiguous()) return false;
  // The dims of size > 1 by stride: every stride must pass the farthest reach of the smaller ones
  // (stride[i] > sum_j<i stride[j] (size[j] - 1)), which makes every index's address distinct.
  // This refuses any overlap (an expand's stride 0, or as_strided's) and, rarely, a layout that
  // interleaves without overlapping (sizes [3, 2], strides [2, 3]): a copy is then the way in.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return false;
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

namespace {

// [first byte, one past the last byte] that t's elements span.
std::pair<uintptr_t, uintptr_t> byte_span(const Tensor& t) {
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? lo : hi) += reach;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const auto item = static_cast<intptr_t>(t.element_size());
  return {base + lo * item, base + (hi + 1) * item};
}

}  // namespace

// Without storages to compare (the stable ABI has none), two tensors share memory
// when their byte spans intersect on one device: addresses are unique within a
// device's address space (and CUDA's is unified with the host's).
bool may_share_memory(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !(a.device() == b.device())) return false;
  if (a.const_data_ptr() == nullptr || b.const_data_ptr() == nullptr) return false;  // no data (meta)
  const auto [a0, a1] = byte_span(a);
  const auto [b0, b1] = byte_span(b);
  return a0 < b1 && b0 < a1;
}

void check_index_values(const char* op, const char* name, const HostValues& host,
                        int64_t bound, const char* bound_name, bool unique, int64_t skip) {
  const char* kOpName = op;
  const int64_t n = host.numel();
  std::vector<int64_t> first_seen(static_cast<size_t>(bound > 0 ? bound : 0), -1);
  FLYCUDA_DISPATCH_INDEX_TYPES(host.scalar_type(), "check_index_values", [&] {
    const index_t* p = host.data<index_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(p[i]);
      if (v == skip) continue;
      FLYCUDA_CHECK(v >= 0 && v < bound, "argument '", name, "' must hold indices in [0, ",
                    bound, ") (", bound_name, " = ", bound, ")",
                    skip == INT64_MAX ? std::string() : " or " + std::to_string(skip), ", got ", name, "[", i,
                    "] = ", v);
      if (unique) {
        FLYCUDA_CHECK(first_seen[v] < 0, "argument '", name,
                      "' must not repeat an index, got ", v, " at positions ",
                      first_seen[v], " and ", i);
        first_seen[v] = i;
      }
    }
  });
}

namespace {

// Runs `check(values, n)` on the host copy of the 1-D int32/int64 tensor `t`.
template <typename F>
void check_values(const Tensor& t, F&& check) {
  const HostValues host(t);  // the CPU ops' own inputs
  FLYCUDA_DISPATCH_INDEX_TYPES(host.scalar_type(), "check_values",
                               [&] { check(host.data<index_t>(), host.numel()); });
}

}  // namespace

void check_offsets_values(const char* op, const char* name, const Tensor& offsets, int64_t total,
                          const char* total_name) {
  const char* kOpName = op;
  check_values(offsets, [&](const auto* p, int64_t n) {
    FLYCUDA_CHECK(n >= 1 && p[0] == 0, "argument '", name, "' must start at 0, got ", name, "[0] = ",
                  n >= 1 ? static_cast<int64_t>(p[0]) : -1);
    for (int64_t i = 1; i < n; ++i) {
      FLYCUDA_CHECK(p[i] >= p[i - 1], "argument '", name, "' must be non-decreasing, got ", name, "[", i,
                    "] = ", static_cast<int64_t>(p[i]), " < ", name, "[", i - 1, "] = ",
                    static_cast<int64_t>(p[i - 1]));
    }
    FLYCUDA_CHECK(p[n - 1] == total, "argument '", name, "' must end at ", total_name, " = ", total, ", got ", name,
                  "[", n - 1, "] = ", static_cast<int64_t>(p[n - 1]));
  });
}

void check_min_values(const char* op, const char* name, const Tensor& values, int64_t min) {
  const char* kOpName = op;
  check_values(values, [&](const auto* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      FLYCUDA_CHECK(p[i] >= min, "argument '", name, "' must hold values >= ", min, ", got ", name, "[", i,
                    "] = ", static_cast<int64_t>(p[i]));
    }
  });
}

// The checks of ops with many same-device contiguous tensors (walking controllers, brain_step).
void expect(const char* op, const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape,
            const Tensor& ref, const char* ref_name) {
  const char* kOpName = op;
  FLYCUDA_CHECK(t.device() == ref.device(), "argument '", name, "' must be on ", ref.device(), " (the device of '",
                ref_name, "'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ", t.scalar_type());
  bool same = t.dim() == static_cast<int64_t>(shape.size()), any = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    any = any || shape[i] < 0;
    same = same && (shape[i] < 0 || t.size(static_cast<int64_t>(i)) == shape[i]);
  }
  FLYCUDA_CHECK(same, "argument '", name, "' must have shape ", sizes_str(shape), any ? " (-1: any)" : "", ", got ",
                sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous, got shape ", sizes_of(t), " strides ",
                strides_of(t));
}

void check_disjoint(const char* op, const std::vector<Named>& inputs, const std::vector<Named>& outputs) {
  const char* kOpName = op;
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (const auto& [in_name, in] : inputs) {
      FLYCUDA_CHECK(!may_share_memory(*out->second, *in), "argument '", out->first,
                    "' must not share memory with argument '", in_name, "'");
    }
    for (auto other = std::next(out); other != outputs.end(); ++other) {
      FLYCUDA_CHECK(!may_share_memory(*out->second, *other->second), "argument '", out->first,
                    "' must not share memory with argument '", other->first, "'");
    }
  }
}

}  // namespace flycuda
