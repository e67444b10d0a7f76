// flycuda: host-side helpers shared by the kernel families.
#include "common.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <c10/core/UndefinedTensorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace flycuda {

namespace {

// Index tensors that passed check_index_values, as they were then.
struct Validated {
  std::optional<c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>> impl;
  uint32_t version = 0;
  const void* data = nullptr;
  int64_t numel = -1, bound = -1;
  bool unique = false;
  int kind = 0;  // which check passed: kIndexCheck, kOffsetsCheck, kMinCheck
};

constexpr int kIndexCheck = 0, kOffsetsCheck = 1, kMinCheck = 2;

class ValidatedCache {
 public:
  // The key of `ids` as it is now. Inference tensors have no version counter:
  // they get no key and are validated on every call.
  static std::optional<Validated> key(const at::Tensor& ids, int64_t bound, bool unique, int kind = kIndexCheck) {
    if (ids.is_inference()) return std::nullopt;
    Validated v = make(ids, bound, unique);
    v.kind = kind;
    return v;
  }
  bool contains(const Validated& key, const at::Tensor& ids) {
    std::lock_guard<std::mutex> lock(m_);
    for (const Validated& v : entries_) {
      if (same(v, key, ids)) return true;
    }
    return false;
  }
  void add(Validated key) {
    std::lock_guard<std::mutex> lock(m_);
    entries_[next_++ % entries_.size()] = std::move(key);
  }

 private:
  static Validated make(const at::Tensor& ids, int64_t bound, bool unique) {
    Validated v;
    v.impl.emplace(ids.getIntrusivePtr());
    v.version = ids._version();
    v.data = ids.const_data_ptr();
    v.numel = ids.numel();
    v.bound = bound;
    v.unique = unique;
    return v;
  }
  // The weak pointer pins the TensorImpl's address, so an equal address is the
  // same tensor (not a new one allocated where a dead one was).
  static bool same(const Validated& v, const Validated& k, const at::Tensor& ids) {
    return v.impl && !v.impl->expired() && v.impl->_unsafe_get_target() == ids.unsafeGetTensorImpl() &&
           v.version == k.version && v.data == k.data && v.numel == k.numel &&
           v.bound == k.bound && v.kind == k.kind && (v.unique || !k.unique);
  }
  std::mutex m_;
  std::array<Validated, 64> entries_;
  size_t next_ = 0;
};

ValidatedCache& validated() {
  static ValidatedCache cache;
  return cache;
}

}  // namespace

namespace {

// [first byte, one past the last byte] that t's elements span.
std::pair<uintptr_t, uintptr_t> byte_span(const at::Tensor& t) {
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

bool may_share_memory(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.has_storage() || !b.has_storage()) return false;
  if (!a.storage().is_alias_of(b.storage())) return false;
  const auto [a0, a1] = byte_span(a);
  const auto [b0, b1] = byte_span(b);
  return a0 < b1 && b0 < a1;
}

void check_index_values(const char* op, const char* name, const at::Tensor& ids,
                        int64_t bound, const char* bound_name, bool unique) {
  const char* kOpName = op;
  // The key is taken before the values are read, so a change in between makes
  // the stored key stale rather than marking unchecked values as checked.
  std::optional<Validated> key = ValidatedCache::key(ids, bound, unique);
  if (key && validated().contains(*key, ids)) return;
  // Read the (small) index vector on the host: in place when it is already a
  // contiguous CPU tensor, else through one copy.
  const at::Tensor host = ids.is_cpu() ? ids.contiguous() : ids.to(at::kCPU).contiguous();
  const int64_t n = host.numel();
  std::vector<int64_t> first_seen(static_cast<size_t>(bound > 0 ? bound : 0), -1);
  AT_DISPATCH_INDEX_TYPES(host.scalar_type(), "check_index_values", [&] {
    const index_t* p = host.data_ptr<index_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = static_cast<int64_t>(p[i]);
      FLYCUDA_CHECK(v >= 0 && v < bound, "argument '", name, "' must hold indices in [0, ",
                    bound, ") (", bound_name, " = ", bound, "), got ", name, "[", i,
                    "] = ", v);
      if (unique) {
        FLYCUDA_CHECK(first_seen[v] < 0, "argument '", name,
                      "' must not repeat an index, got ", v, " at positions ",
                      first_seen[v], " and ", i);
        first_seen[v] = i;
      }
    }
  });
  if (key) validated().add(std::move(*key));
}

namespace {

// Runs `check(values, n)` on the host copy of the 1-D int32/int64 tensor `t`,
// unless `t` passed the same check (`kind`, `bound`) unchanged before.
template <typename F>
void check_values_once(const at::Tensor& t, int64_t bound, int kind, F&& check) {
  std::optional<Validated> key = ValidatedCache::key(t, bound, false, kind);
  if (key && validated().contains(*key, t)) return;
  const at::Tensor host = t.is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous();
  AT_DISPATCH_INDEX_TYPES(host.scalar_type(), "check_values_once",
                          [&] { check(host.data_ptr<index_t>(), host.numel()); });
  if (key) validated().add(std::move(*key));
}

}  // namespace

void check_offsets_values(const char* op, const char* name, const at::Tensor& offsets, int64_t total,
                          const char* total_name) {
  const char* kOpName = op;
  check_values_once(offsets, total, kOffsetsCheck, [&](const auto* p, int64_t n) {
    FLYCUDA_CHECK(n >= 1 && p[0] == 0, "argument '", name, "' must start at 0, got ", name, "[0] = ",
                  n >= 1 ? static_cast<int64_t>(p[0]) : -1);
    for (int64_t i = 1; i < n; ++i) {
      FLYCUDA_CHECK(p[i] >= p[i - 1], "argument '", name, "' must be non-decreasing, got ", name, "[", i,
                    "] = ", static_cast<int64_t>(p[i]), " < ", name, "[", i - 1, "] = ", static_cast<int64_t>(p[i - 1]));
    }
    FLYCUDA_CHECK(p[n - 1] == total, "argument '", name, "' must end at ", total_name, " = ", total, ", got ", name,
                  "[", n - 1, "] = ", static_cast<int64_t>(p[n - 1]));
  });
}

void check_min_values(const char* op, const char* name, const at::Tensor& values, int64_t min) {
  const char* kOpName = op;
  check_values_once(values, min, kMinCheck, [&](const auto* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      FLYCUDA_CHECK(p[i] >= min, "argument '", name, "' must hold values >= ", min, ", got ", name, "[", i,
                    "] = ", static_cast<int64_t>(p[i]));
    }
  });
}

}  // namespace flycuda
