// flycuda: hybrid_senses — argument checks, the launch plan and the CPU impl. What the op
// computes: csrc/kernels/hybrid_senses.cuh, whose per-world and per-contact functions the CPU
// twin below calls in loops (the CUDA kernels and the emulator call the same); the twin adds
// the contacts' forces in slot order, the kernel with atomics.
#include "hybrid_senses.h"

#include "common.h"
#include "hybrid_step.h"  // walking:: the checks the walking ops share

#include <algorithm>
#include <climits>
#include <utility>

namespace flycuda {
namespace {

constexpr const char* kOpName = "hybrid_senses";
constexpr const char* kContactNames[kContactFields] = {
    "contacts[0] (geom)", "contacts[1] (worldid)", "contacts[2] (frame)", "contacts[3] (friction)",
    "contacts[4] (dim)", "contacts[5] (efc_address)", "contacts[6] (adhesion)", "contacts[7] (efc_force)",
    "contacts[8] (nacon)"};

// t: on xpos's device, of dtype dt and exactly `shape` (-1: any size there), contiguous.
void expect(const Tensor& t, const char* name, ScalarType dt, std::vector<int64_t> shape, const Tensor& xpos) {
  walking::expect(kOpName, t, name, dt, std::move(shape), xpos, "xpos");
}

}  // namespace

kernels::SensesPlan check_hybrid_senses(const SensesArgs& a) {
  FLYCUDA_CHECK(a.xpos.scalar_type() == kFloat && a.xpos.dim() == 3 && a.xpos.size(2) == 3,
                "argument 'xpos' must be a float32 [W, nbody, 3] tensor (MuJoCo Warp's Data.xpos), got ",
                a.xpos.scalar_type(), " of shape ", sizes_of(a.xpos));
  const int64_t W = a.xpos.size(0), nbody = a.xpos.size(1);
  expect(a.xpos, "xpos", kFloat, {W, nbody, 3}, a.xpos);
  expect(a.xmat, "xmat", kFloat, {W, nbody, 3, 3}, a.xpos);
  FLYCUDA_CHECK(a.body_ids.scalar_type() == kInt || a.body_ids.scalar_type() == kLong,
                "argument 'body_ids' must have dtype Int or Long, got ", a.body_ids.scalar_type());
  expect(a.body_ids, "body_ids", a.body_ids.scalar_type(), {kernels::kSenseBodies}, a.xpos);
  FLYCUDA_CHECK(static_cast<int64_t>(a.contacts.size()) == kContactFields, "argument 'contacts' must hold ",
                static_cast<int64_t>(kContactFields), " tensors (flycuda.ops.launch_plan.CONTACT_FIELDS), got ",
                static_cast<int64_t>(a.contacts.size()));
  const TensorList& c = a.contacts;
  FLYCUDA_CHECK(c[kContactGeom].dim() == 2, "argument '", kContactNames[kContactGeom],
                "' must have shape [slots, 2], got ", sizes_of(c[kContactGeom]));
  const int64_t slots = c[kContactGeom].size(0);
  FLYCUDA_CHECK(c[kContactEfcAddress].dim() == 2 && c[kContactEfcForce].dim() == 2 && c[kContactFriction].dim() == 2,
                "arguments '", kContactNames[kContactEfcAddress], "', '", kContactNames[kContactFriction], "' and '",
                kContactNames[kContactEfcForce], "' must be 2-D, got ", sizes_of(c[kContactEfcAddress]), ", ",
                sizes_of(c[kContactFriction]), " and ", sizes_of(c[kContactEfcForce]));
  const int64_t efc_cols = c[kContactEfcAddress].size(1), njmax = c[kContactEfcForce].size(1);
  const int64_t friction_cols = c[kContactFriction].size(1);
  const std::pair<ScalarType, std::vector<int64_t>> want[kContactFields] = {
      {kInt, {slots, 2}}, {kInt, {slots}}, {kFloat, {slots, 3, 3}}, {kFloat, {slots, friction_cols}},
      {kInt, {slots}}, {kInt, {slots, efc_cols}}, {kFloat, {slots}}, {kFloat, {W, njmax}}, {kInt, {1}}};
  for (int i = 0; i < kContactFields; ++i) expect(c[i], kContactNames[i], want[i].first, want[i].second, a.xpos);
  FLYCUDA_CHECK(efc_cols >= 1 && friction_cols >= 2, "argument '", kContactNames[kContactEfcAddress],
                "' needs >= 1 column and '", kContactNames[kContactFriction], "' >= 2 (MuJoCo Warp: 6 and 5), got ",
                efc_cols, " and ", friction_cols);
  FLYCUDA_CHECK(a.geom_segment.dim() == 1, "argument 'geom_segment' must be 1-D [ngeom], got ",
                sizes_of(a.geom_segment));
  expect(a.geom_segment, "geom_segment", kInt, {-1}, a.xpos);
  FLYCUDA_CHECK(a.cone == kernels::kConePyramidal || a.cone == kernels::kConeElliptic,
                "argument 'cone' must be MuJoCo's opt.cone, 0 (pyramidal) or 1 (elliptic), got ", a.cone);
  expect(a.thorax_z, "thorax_z", kDouble, {W}, a.xpos);
  expect(a.tarsus5_z, "tarsus5_z", kDouble, {W, 6}, a.xpos);
  expect(a.stumbling_forces, "stumbling_forces", kDouble, {W, 6, 3, 3}, a.xpos);
  expect(a.heading, "heading", kDouble, {W, 3}, a.xpos);
  std::vector<walking::Named> ins = {
      {"xpos", &a.xpos}, {"xmat", &a.xmat}, {"body_ids", &a.body_ids}, {"geom_segment", &a.geom_segment}};
  for (int i = 0; i < kContactFields; ++i) ins.emplace_back(kContactNames[i], &c[i]);
  walking::check_disjoint(kOpName, ins, {{"thorax_z", &a.thorax_z}, {"tarsus5_z", &a.tarsus5_z},
                                         {"stumbling_forces", &a.stumbling_forces}, {"heading", &a.heading}});
  FLYCUDA_CHECK(W <= INT32_MAX && slots <= INT32_MAX, "W = ", W, " and slots = ", slots,
                " must be < 2^31 (32-bit thread indices)");
  if (checks_values_here(a.thorax_z)) {
    check_index_values(kOpName, "body_ids", HostValues(a.body_ids), nbody, "nbody = xpos.size(1)", false);
  }
  kernels::SensesPlan p;
  p.W = W, p.nbody = nbody, p.ngeom = a.geom_segment.size(0), p.slots = slots, p.efc_cols = efc_cols;
  p.njmax = njmax, p.friction_cols = friction_cols, p.cone = static_cast<int>(a.cone);
  return p;
}

namespace {

void hybrid_senses_cpu(const Tensor& xpos, const Tensor& xmat, const Tensor& body_ids, const TensorList& contacts,
                       const Tensor& geom_segment, int64_t cone, Tensor& thorax_z, Tensor& tarsus5_z,
                       Tensor& stumbling_forces, Tensor& heading) {  // shapes: SensesArgs
  const SensesArgs a{xpos, xmat, body_ids, contacts, geom_segment, cone, thorax_z, tarsus5_z, stumbling_forces,
                     heading};
  const kernels::SensesPlan p = check_hybrid_senses(a);
  double *tz = dptr<double>(thorax_z), *t5 = dptr<double>(tarsus5_z), *f = dptr<double>(stumbling_forces);
  double* hd = dptr<double>(heading);
  // The pointers once (each dptr is a call through the stable ABI).
  const float *xp = dptr<float>(xpos), *xm = dptr<float>(xmat);
  FLYCUDA_DISPATCH_INDEX_TYPES(body_ids.scalar_type(), "hybrid_senses_cpu", [&] {
    const index_t* ids = dptr<index_t>(body_ids);
    torch::stable::parallel_for(0, p.W, /*grain_size=*/256, [&](int64_t begin, int64_t end) {
      for (int64_t w = begin; w < end; ++w) kernels::senses_bodies(xp, xm, ids, tz, t5, f, hd, p, w);
    });
  });
  int* ip[kContactFields];
  float* fp[kContactFields];
  for (int i = 0; i < kContactFields; ++i) {
    const bool is_float = contacts[i].scalar_type() == kFloat;
    ip[i] = is_float ? nullptr : dptr<int>(contacts[i]);
    fp[i] = is_float ? dptr<float>(contacts[i]) : nullptr;
  }
  const int* segment = dptr<int>(geom_segment);
  const int64_t n = std::min<int64_t>(ip[kContactNacon][0], p.slots);
  for (int64_t s = 0; s < n; ++s) {  // in slot order: the sums' order is fixed here
    int64_t at = 0;
    double share[3];
    if (kernels::contact_share(ip[kContactGeom], ip[kContactWorldid], fp[kContactFrame], fp[kContactFriction],
                               ip[kContactDim], ip[kContactEfcAddress], fp[kContactAdhesion], fp[kContactEfcForce],
                               segment, p, s, &at, share)) {
      for (int j = 0; j < 3; ++j) f[at + j] += share[j];
    }
  }
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("hybrid_senses", TORCH_BOX(&hybrid_senses_cpu));
}

}  // namespace flycuda
