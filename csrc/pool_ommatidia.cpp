// flycuda: pool_ommatidia — argument checks, the launch plan and the CPU impl.
//
//   readouts[s, e, o, column[o]]     = float32(acc / 255), acc = sum over the
//     entries j of ommatidium o, in order, of float64(pixels[s, e, omm_pixels[j],
//     channel[o]]) / float64(count[o]);
//   readouts[s, e, o, 1 - column[o]] = 0
//
// FlyGym's Retina.fisheye_image_to_hex_pxls per eye image (see
// kernels/pool_ommatidia.cuh). The CPU twin below, the CUDA launcher and the
// emulator run the same kernel body (kernels::pool_one) over the same PoolPlan.
#include "pool_ommatidia.h"

#include "common.h"

#include <climits>

namespace flycuda {

namespace {

constexpr const char* kOpName = "pool_ommatidia";

// An int32 map array: contiguous 1-D of `n` entries on `out`'s device.
void check_map_array(const Tensor& t, const char* name, int64_t n, const char* n_name,
                     const Tensor& readouts) {
  FLYCUDA_CHECK(t.device() == readouts.device(), "argument '", name, "' must be on ", readouts.device(),
                " (the device of 'readouts'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == kInt, "argument '", name, "' must have dtype Int, got ", t.scalar_type());
  FLYCUDA_CHECK(t.dim() == 1, "argument '", name, "' must be a 1-D tensor [", n_name, "], got ", t.dim(),
                "-D with shape ", sizes_of(t));
  FLYCUDA_CHECK(n < 0 || t.size(0) == n, "argument '", name, "' must have shape [", n, "] ([", n_name, "]), got ",
                sizes_of(t));
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous, got strides ", strides_of(t));
  FLYCUDA_CHECK(!may_share_memory(readouts, t), "argument 'readouts' must not share memory with argument '",
                name, "'");
}

// pixels: uint8 [S, E, P, 3], contiguous, on readouts' device.
void check_pixels(const Tensor& pixels, const Tensor& readouts) {
  CHECK_SAME_DEVICE(pixels, readouts);
  CHECK_DTYPE(pixels, kByte);
  FLYCUDA_CHECK(pixels.dim() == 4 && pixels.size(3) == 3, "argument 'pixels' must be a 4-D tensor [S, E, P, 3] "
                "(RGB), got shape ", sizes_of(pixels));
  FLYCUDA_CHECK(pixels.size(0) == readouts.size(0) && pixels.size(1) == readouts.size(1), "argument 'pixels' must "
                "have shape [S, E, P, 3] with [S, E] = [", readouts.size(0), ", ", readouts.size(1),
                "] (the readouts'), got ", sizes_of(pixels));
  CHECK_CONTIGUOUS(pixels);
  CHECK_NOT_ALIASED(readouts, pixels);
  FLYCUDA_CHECK(pixels.size(2) * 3 <= INT32_MAX, "P * 3 = ", pixels.size(2) * 3,
                " must be < 2^31 (32-bit pixel offsets in an image)");
}

// The map's values (see check_pool_ommatidia).
void check_map_values(const Tensor& omm_ptr, const Tensor& omm_pixels, const Tensor& omm_channel,
                      const Tensor& omm_column, const Tensor& omm_count, const kernels::PoolPlan& p) {
  check_offsets_values(kOpName, "omm_ptr", omm_ptr, p.nnz, "nnz = omm_pixels.size(0)");
  check_index_values(kOpName, "omm_pixels", HostValues(omm_pixels), p.P, "P = pixels.size(2)", false);
  check_index_values(kOpName, "omm_channel", HostValues(omm_channel), 3, "RGB channels", false);
  check_index_values(kOpName, "omm_column", HostValues(omm_column), 2, "readout columns", false);
  check_min_values(kOpName, "omm_count", omm_count, 1);
}

}  // namespace

kernels::PoolPlan check_pool_ommatidia(FLYCUDA_POOL_OMMATIDIA_PARAMS) {
  // readouts: [S, E, O, 2] float32, any strides, no overlap.
  CHECK_DTYPE(readouts, kFloat);
  FLYCUDA_CHECK(readouts.dim() == 4 && readouts.size(3) == 2, "argument 'readouts' must be a 4-D tensor "
                "[S, E, O, 2], got shape ", sizes_of(readouts));
  CHECK_NO_OVERLAP(readouts);
  check_pixels(pixels, readouts);
  // The map: omm_ptr [O + 1], omm_pixels [nnz], omm_channel/column/count [O].
  const int64_t O = readouts.size(2);
  check_map_array(omm_ptr, "omm_ptr", O + 1, "O + 1", readouts);
  check_map_array(omm_pixels, "omm_pixels", -1, "nnz", readouts);
  check_map_array(omm_channel, "omm_channel", O, "O", readouts);
  check_map_array(omm_column, "omm_column", O, "O", readouts);
  check_map_array(omm_count, "omm_count", O, "O", readouts);
  kernels::PoolPlan p;
  p.S = readouts.size(0);
  p.E = readouts.size(1);
  p.O = O;
  p.P = pixels.size(2);
  p.nnz = omm_pixels.size(0);
  FLYCUDA_CHECK(p.threads() <= INT32_MAX && O < INT32_MAX, "S * E * O = ", p.threads(), " and O = ", O,
                " must be < 2^31 (32-bit thread indices)");
  FLYCUDA_CHECK(p.nnz <= INT32_MAX, "argument 'omm_pixels' must have < 2^31 entries (int32 offsets), got ", p.nnz);
  p.out_s0 = readouts.stride(0);
  p.out_s1 = readouts.stride(1);
  p.out_s2 = readouts.stride(2);
  p.out_s3 = readouts.stride(3);
  if (checks_values_here(readouts)) check_map_values(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, p);
  return p;
}

kernels::PoolMap pool_map(const Tensor& omm_ptr, const Tensor& omm_pixels, const Tensor& omm_channel,
                          const Tensor& omm_column, const Tensor& omm_count) {
  return kernels::PoolMap{dptr<int32_t>(omm_ptr), dptr<int32_t>(omm_pixels),
                          dptr<int32_t>(omm_channel), dptr<int32_t>(omm_column),
                          dptr<int32_t>(omm_count)};
}

namespace {

// The CPU twin of kernels::pool_ommatidia_kernel: the same body per (image, o).
void pool_ommatidia_cpu(FLYCUDA_POOL_OMMATIDIA_PARAMS) {
  const kernels::PoolPlan p = check_pool_ommatidia(FLYCUDA_POOL_OMMATIDIA_ARGS);
  if (p.threads() == 0) return;
  const kernels::PoolMap m = pool_map(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count);
  const uint8_t* px = dptr<uint8_t>(pixels);
  float* out = dptr<float>(readouts);
  torch::stable::parallel_for(0, p.threads(), /*grain_size=*/256, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t image = idx / p.O;
      kernels::pool_one(p, px, m, out, image, static_cast<int32_t>(idx - image * p.O));
    }
  });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("pool_ommatidia", TORCH_BOX(&pool_ommatidia_cpu)); }

}  // namespace flycuda
