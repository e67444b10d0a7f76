// flycuda: odor_intensity — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/odor_intensity.cuh. The CUDA kernel and the emulator run its
// odor_element, one output element a thread; the CPU twin below loops over the worlds and sensors,
// evaluates each source's field once (odor_source_field) for all k odor dimensions, and sums the
// same terms in the same order as odor_element (so the two are bitwise equal).
#include "odor_intensity.h"

#include "common.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace flycuda {
namespace {

constexpr const char* kOpName = "odor_intensity";
constexpr double kPi = 3.14159265358979323846;

// t: float32 on out's device, of `dim` dimensions.
void expect_float(const Tensor& t, const char* name, int64_t dim, const char* shape, const Tensor& out) {
  FLYCUDA_CHECK(t.device() == out.device(), "argument '", name, "' must be on ", out.device(),
                " (the device of 'out'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == kFloat, "argument '", name, "' must have dtype Float, got ", t.scalar_type());
  FLYCUDA_CHECK(t.dim() == dim, "argument '", name, "' must be a ", dim, "-D tensor ", shape, ", got shape ",
                sizes_of(t));
}

void check_shapes(const OdorArgs& a) {
  expect_float(a.out, "out", 3, "[W, k, s]", a.out);
  const Tensor& out = a.out;  // the macros name the argument by its variable
  CHECK_NO_OVERLAP(out);
  const int64_t W = a.out.size(0), k = a.out.size(1), s = a.out.size(2);
  expect_float(a.sources, "sources", 3, "[W, n, 3]", a.out);
  FLYCUDA_CHECK(a.sources.size(0) == W && a.sources.size(2) == 3, "argument 'sources' must have shape [W, n, 3] "
                "with W = out.size(0) = ", W, ", got ", sizes_of(a.sources));
  const int64_t n = a.sources.size(1);
  FLYCUDA_CHECK(a.peaks.dim() == 2 || a.peaks.dim() == 3, "argument 'peaks' must be a 2-D tensor [n, k] or a "
                "3-D tensor [W, n, k], got shape ", sizes_of(a.peaks));
  expect_float(a.peaks, "peaks", a.peaks.dim(), a.peaks.dim() == 2 ? "[n, k]" : "[W, n, k]", a.out);
  const int64_t d = a.peaks.dim() - 2;  // 1: per world
  FLYCUDA_CHECK((d == 0 || a.peaks.size(0) == W) && a.peaks.size(d) == n && a.peaks.size(d + 1) == k,
                "argument 'peaks' must have shape ", d ? "[W, n, k]" : "[n, k]", " with W = ", W,
                ", n = sources.size(1) = ", n, " and k = out.size(1) = ", k, ", got ", sizes_of(a.peaks));
  expect_float(a.sensors, "sensors", 3, "[W, s, 3]", a.out);
  FLYCUDA_CHECK(a.sensors.size(0) == W && a.sensors.size(1) == s && a.sensors.size(2) == 3,
                "argument 'sensors' must have shape [W, s, 3] with W = out.size(0) = ", W, " and s = out.size(2) = ",
                s, ", got ", sizes_of(a.sensors));
  if (a.wind.has_value()) {
    expect_float(*a.wind, "wind", 2, "[W, 2]", a.out);
    FLYCUDA_CHECK(a.wind->size(0) == W && a.wind->size(1) == 2, "argument 'wind' must have shape [W, 2] with W = "
                  "out.size(0) = ", W, ", got ", sizes_of(*a.wind));
    const Tensor& wind = *a.wind;
    CHECK_NOT_ALIASED(out, wind);
  }
  const Tensor &sources = a.sources, &peaks = a.peaks, &sensors = a.sensors;
  CHECK_NOT_ALIASED(out, sources);
  CHECK_NOT_ALIASED(out, peaks);
  CHECK_NOT_ALIASED(out, sensors);
  FLYCUDA_CHECK(W * k * s <= INT32_MAX, "W * k * s = ", W * k * s, " must be < 2^31 (32-bit thread indices)");
}

int check_options(const OdorArgs& a) {
  const bool power = a.field == "power", plume = a.field == "advection_diffusion";
  FLYCUDA_CHECK_VALUE(power || plume, "argument 'field' must be 'power' or 'advection_diffusion', got '", a.field,
                      "'");
  if (power) {
    FLYCUDA_CHECK_VALUE(std::isfinite(a.exponent) && a.exponent >= 0.0,
                        "argument 'exponent' must be finite and >= 0, got ", a.exponent);
    FLYCUDA_CHECK_VALUE(!a.wind.has_value(), "argument 'wind' must be None with field 'power' (it applies to field "
                        "'advection_diffusion' only), got a wind");
  } else {
    FLYCUDA_CHECK_VALUE(std::isfinite(a.diffusivity) && a.diffusivity > 0.0,
                        "argument 'diffusivity' must be finite and > 0, got ", a.diffusivity);
    FLYCUDA_CHECK_VALUE(std::isfinite(a.decay) && a.decay > 0.0, "argument 'decay' must be finite and > 0, got ",
                        a.decay);
  }
  return power ? kernels::kOdorPower : kernels::kOdorAdvectionDiffusion;
}

}  // namespace

kernels::OdorPlan check_odor_intensity(const OdorArgs& a) {
  check_shapes(a);
  kernels::OdorPlan p;
  p.field = check_options(a);
  p.W = a.out.size(0), p.k = a.out.size(1), p.s = a.out.size(2), p.n = a.sources.size(1);
  p.exponent = a.exponent, p.diffusivity = a.diffusivity, p.decay = a.decay;
  p.log_c0 = std::log(1.0 / (2.0 * kPi * a.diffusivity));
  p.src_s0 = a.sources.stride(0), p.src_s1 = a.sources.stride(1), p.src_s2 = a.sources.stride(2);
  const int64_t d = a.peaks.dim() - 2;
  p.peak_s0 = d ? a.peaks.stride(0) : 0, p.peak_s1 = a.peaks.stride(d), p.peak_s2 = a.peaks.stride(d + 1);
  p.sen_s0 = a.sensors.stride(0), p.sen_s1 = a.sensors.stride(1), p.sen_s2 = a.sensors.stride(2);
  p.has_wind = a.wind.has_value();
  if (p.has_wind) p.wind_s0 = a.wind->stride(0), p.wind_s1 = a.wind->stride(1);
  p.out_s0 = a.out.stride(0), p.out_s1 = a.out.stride(1), p.out_s2 = a.out.stride(2);
  return p;
}

namespace {

// Worlds [begin, end): each source's field once per sensor (formula Form, fixed for the call),
// then odor_element's sum over the sources for each odor dimension, term for term.
template <int Form>
void odor_worlds(const float* x, const float* pk, const float* sen, const float* u, float* o,
                 const kernels::OdorPlan& p, int64_t begin, int64_t end) {
  std::vector<double> f(static_cast<size_t>(p.n));
  for (int64_t w = begin; w < end; ++w) {
    for (int64_t ss = 0; ss < p.s; ++ss) {
      const kernels::OdorSensor at = kernels::odor_sensor(sen, u, p, w, ss);
      for (int64_t i = 0; i < p.n; ++i) f[i] = kernels::odor_source_field<Form>(x, at, p, w, i);
      for (int64_t kk = 0; kk < p.k; ++kk) {
        double acc = 0.0;
        for (int64_t i = 0; i < p.n; ++i) acc = acc + kernels::odor_peak(pk, p, w, i, kk) * f[i];
        o[w * p.out_s0 + kk * p.out_s1 + ss * p.out_s2] = static_cast<float>(acc);
      }
    }
  }
}

void odor_intensity_cpu(const Tensor& sources, const Tensor& peaks, const Tensor& sensors, Tensor& out,
                        std::string_view field, double exponent, const std::optional<Tensor>& wind,
                        double diffusivity, double decay) {  // shapes: OdorArgs
  const OdorArgs a{sources, peaks, sensors, out, field, exponent, wind, diffusivity, decay};
  const kernels::OdorPlan p = check_odor_intensity(a);
  if (p.threads() == 0) return;
  // The pointers once (each dptr is a call through the stable ABI).
  const float *x = dptr<float>(sources), *pk = dptr<float>(peaks), *sen = dptr<float>(sensors);
  const float* u = p.has_wind ? dptr<float>(*wind) : nullptr;
  float* o = dptr<float>(out);
  auto run = [&](auto worlds) {
    const int64_t grain = std::max<int64_t>(1, 1024 / (p.k * p.s));  // about 1024 elements a task
    torch::stable::parallel_for(0, p.W, grain, [&](int64_t begin, int64_t end) {
      worlds(x, pk, sen, u, o, p, begin, end);
    });
  };
  switch (kernels::odor_form(p)) {
    case kernels::kOdorInvSquare: return run(odor_worlds<kernels::kOdorInvSquare>);
    case kernels::kOdorInv: return run(odor_worlds<kernels::kOdorInv>);
    case kernels::kOdorPow: return run(odor_worlds<kernels::kOdorPow>);
    default: return run(odor_worlds<kernels::kOdorPlume>);
  }
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) { m.impl("odor_intensity", TORCH_BOX(&odor_intensity_cpu)); }

}  // namespace flycuda
