// flycuda: host-side helpers shared by the kernel families.
#include "common.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <vector>

namespace flycuda {

void check_index_values(const char* op, const char* name, const at::Tensor& ids,
                        int64_t bound, const char* bound_name, bool unique) {
  const char* kOpName = op;
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
}

}  // namespace flycuda
