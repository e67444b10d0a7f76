// flycuda: hybrid_senses — the sensory inputs of FlyGym's hybrid walking controllers
// (HybridControllerObservation.from_sim) for every world, read on the device from MuJoCo
// Warp's Data, and the launch plan. nvcc (csrc/cuda/hybrid_senses.cu), the host compiler (the
// CPU twin, csrc/hybrid_senses.cpp) and the emulator compile this one file. No ATen.
//
// Two launches:
//   bodies (one thread per world): thorax_z = xpos[w, body_ids[0], z], tarsus5_z[l] =
//     xpos[w, body_ids[1 + l], z], heading = column 0 of xmat[w, body_ids[0]] (the thorax's
//     x axis in the world frame), all widened to float64; stumbling_forces[w] = 0;
//   contacts (one thread per contact slot, those below nacon): a contact between a leg segment's
//     geom (geom_segment[g] = leg * 3 + link, link tibia/tarsus1/tarsus2) and a ground geom
//     (geom_segment[g] = kGround), whose constraint is in the solver (efc_address >= 0), adds the
//     ground's force on the segment to stumbling_forces[world, leg, link]: FlyGym's
//     get_bodysegment_contact_forces(ground_only=True). The force is MuJoCo Warp's
//     contact_force (support.py: the pyramid decoded, or the elliptic cone's rows; minus the
//     contact's adhesion) turned into the world frame (f @ frame), in float64; it counts
//     negatively when the segment is the contact's first geom (the force on geom 2), as FlyGym's.
// On the device the sums are atomicAdd(double): their order, so their last bit, varies from
// run to run, as MuJoCo Warp's contact order does. The CPU twin adds in slot order.
#pragma once

#include "motion_to_ctrl.cuh"  // FLYCUDA_DMUL / DADD / DSUB
#include "platform.h"

#include <cstdint>

namespace flycuda {
namespace kernels {

constexpr int kSensesThreads = 128;  // worlds, or contact slots, per block
constexpr int kSenseBodies = 7;      // body_ids: the thorax, then the six tarsus5 (LEGS' order)
constexpr int kSenseLinks = 3;       // tibia, tarsus1, tarsus2
constexpr int kSenseSegments = 6 * kSenseLinks;
constexpr int kForceRow = kSenseSegments * 3;  // stumbling_forces [W, 6, 3, 3]: a world's 54 values
constexpr int kGround = -2;          // geom_segment: a ground geom; -1: neither; 0..17: a leg segment
constexpr int kConePyramidal = 0, kConeElliptic = 1;  // MuJoCo's opt.cone

struct SensesPlan {
  int64_t W = 0, nbody = 0, ngeom = 0;
  int64_t slots = 0;      // naconmax: the contact arrays' first dimension
  int64_t efc_cols = 0;   // contact_efc_address [slots, efc_cols]
  int64_t njmax = 0;      // efc_force [W, njmax]
  int64_t friction_cols = 0;  // contact_friction [slots, friction_cols] (5)
  int cone = kConePyramidal;
  FLYCUDA_HOST_DEVICE int64_t threads() const { return W; }
};

// World w's bodies: heights and heading; its forces zeroed. Ids outside [0, nbody) read NaN.
template <typename index_t>
FLYCUDA_HOST_DEVICE inline void senses_bodies(const float* xpos, const float* xmat, const index_t* body_ids,
                                              double* thorax_z, double* tarsus5_z, double* forces, double* heading,
                                              const SensesPlan& p, int64_t w) {
  double z[kSenseBodies];
  for (int b = 0; b < kSenseBodies; ++b) {
    const int64_t id = static_cast<int64_t>(body_ids[b]);
    z[b] = (id >= 0 && id < p.nbody) ? static_cast<double>(xpos[(w * p.nbody + id) * 3 + 2]) : NAN;
  }
  thorax_z[w] = z[0];
  for (int l = 0; l < 6; ++l) tarsus5_z[w * 6 + l] = z[1 + l];
  const int64_t thorax = static_cast<int64_t>(body_ids[0]);
  const bool ok = thorax >= 0 && thorax < p.nbody;
  for (int i = 0; i < 3; ++i) heading[w * 3 + i] = ok ? static_cast<double>(xmat[(w * p.nbody + thorax) * 9 + i * 3]) : NAN;
  for (int i = 0; i < kForceRow; ++i) forces[w * kForceRow + i] = 0.0;
}

// Contact slot c's share: whether it counts, and if so where (world * kForceRow + segment * 3)
// and the ground's force on the segment in the world frame (f[3]). Slots with a world, geom or
// constraint row outside the arrays are skipped (MuJoCo Warp's own bounds: rows past njmax read 0).
FLYCUDA_HOST_DEVICE inline bool contact_share(const int* geom, const int* worldid, const float* frame,
                                              const float* friction, const int* dim, const int* efc_address,
                                              const float* adhesion, const float* efc_force, const int* geom_segment,
                                              const SensesPlan& p, int64_t c, int64_t* at, double* f) {
  const int64_t w = worldid[c], g1 = geom[2 * c], g2 = geom[2 * c + 1];
  if (w < 0 || w >= p.W || g1 < 0 || g1 >= p.ngeom || g2 < 0 || g2 >= p.ngeom) return false;
  const int s1 = geom_segment[g1], s2 = geom_segment[g2];
  const bool first = s1 >= 0 && s1 < kSenseSegments && s2 == kGround;
  const bool second = s2 >= 0 && s2 < kSenseSegments && s1 == kGround;
  const int64_t adr = efc_address[c * p.efc_cols];
  if (!(first || second) || adr < 0) return false;
  const int condim = dim[c];
  const float* row = efc_force + w * p.njmax;
  double local[3] = {0.0, 0.0, 0.0};  // the force in the contact frame (normal, tangent 1, tangent 2)
  if (p.cone == kConePyramidal) {
    if (condim == 1) {
      local[0] = adr < p.njmax ? static_cast<double>(row[adr]) : 0.0;
    } else {
      for (int i = 0; i < condim - 1 && i < 5; ++i) {
        const int64_t a = adr + 2 * i;
        const double d1 = a < p.njmax ? static_cast<double>(row[a]) : 0.0;
        const double d2 = a + 1 < p.njmax ? static_cast<double>(row[a + 1]) : 0.0;
        local[0] = FLYCUDA_DADD(local[0], FLYCUDA_DADD(d1, d2));
        if (i < 2) local[i + 1] = FLYCUDA_DMUL(FLYCUDA_DSUB(d1, d2), static_cast<double>(friction[c * p.friction_cols + i]));
      }
    }
  } else {
    for (int i = 0; i < condim && i < 3 && i < p.efc_cols; ++i) {
      const int64_t a = efc_address[c * p.efc_cols + i];
      if (a >= 0 && a < p.njmax) local[i] = static_cast<double>(row[a]);
    }
  }
  local[0] = FLYCUDA_DSUB(local[0], static_cast<double>(adhesion[c]));
  const float* F = frame + c * 9;  // rows: normal, tangent 1, tangent 2
  for (int j = 0; j < 3; ++j) {
    double v = FLYCUDA_DMUL(local[0], static_cast<double>(F[j]));
    v = FLYCUDA_DADD(v, FLYCUDA_DMUL(local[1], static_cast<double>(F[3 + j])));
    v = FLYCUDA_DADD(v, FLYCUDA_DMUL(local[2], static_cast<double>(F[6 + j])));
    f[j] = first ? -v : v;
  }
  *at = w * kForceRow + static_cast<int64_t>(first ? s1 : s2) * 3;
  return true;
}

#if defined(__CUDACC__) || defined(FLYCUDA_EMU)

template <typename index_t>
__global__ void senses_bodies_kernel(const float* __restrict__ xpos, const float* __restrict__ xmat,
                                     const index_t* __restrict__ body_ids, double* __restrict__ thorax_z,
                                     double* __restrict__ tarsus5_z, double* __restrict__ forces,
                                     double* __restrict__ heading, const SensesPlan p) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w < p.W) senses_bodies(xpos, xmat, body_ids, thorax_z, tarsus5_z, forces, heading, p, w);
}

__global__ void senses_contacts_kernel(const int* __restrict__ geom, const int* __restrict__ worldid,
                                       const float* __restrict__ frame, const float* __restrict__ friction,
                                       const int* __restrict__ dim, const int* __restrict__ efc_address,
                                       const float* __restrict__ adhesion, const float* __restrict__ efc_force,
                                       const int* __restrict__ nacon, const int* __restrict__ geom_segment,
                                       double* __restrict__ forces, const SensesPlan p) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = nacon[0];
  if (c >= p.slots || c >= n) return;
  int64_t at = 0;
  double f[3];
  if (contact_share(geom, worldid, frame, friction, dim, efc_address, adhesion, efc_force, geom_segment, p, c, &at, f)) {
    for (int j = 0; j < 3; ++j) atomicAdd(forces + at + j, f[j]);
  }
}

// The launch (platform.h, "launch templates"): the bodies (one thread per world, which also
// zeroes the forces), then the contacts (one thread per slot) on the same stream.
template <class Launcher, typename index_t>
void launch_hybrid_senses(Launcher&& launch, const float* xpos,  // [W, nbody, 3]
                          const float* xmat,                     // [W, nbody, 3, 3]
                          const index_t* body_ids,               // [7]
                          const int* geom,                       // [slots, 2]
                          const int* worldid,                    // [slots]
                          const float* frame,                    // [slots, 3, 3]
                          const float* friction,                 // [slots, friction_cols]
                          const int* dim,                        // [slots]
                          const int* efc_address,                // [slots, efc_cols]
                          const float* adhesion,                 // [slots]
                          const float* efc_force,                // [W, njmax]
                          const int* nacon,                      // [1]
                          const int* geom_segment,               // [ngeom]
                          double* thorax_z, double* tarsus5_z, double* forces, double* heading,
                          const SensesPlan& p) {
  if (p.W <= 0) return;
  const unsigned int blocks = static_cast<unsigned int>((p.W + kSensesThreads - 1) / kSensesThreads);
  launch(senses_bodies_kernel<index_t>, dim3(blocks), dim3(kSensesThreads), 0, xpos, xmat, body_ids, thorax_z,
         tarsus5_z, forces, heading, p);
  if (p.slots > 0) {
    const unsigned int cblocks = static_cast<unsigned int>((p.slots + kSensesThreads - 1) / kSensesThreads);
    launch(senses_contacts_kernel, dim3(cblocks), dim3(kSensesThreads), 0, geom, worldid, frame, friction, dim,
           efc_address, adhesion, efc_force, nacon, geom_segment, forces, p);
  }
}

#endif  // __CUDACC__ || FLYCUDA_EMU

}  // namespace kernels
}  // namespace flycuda
