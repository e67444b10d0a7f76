// flycuda: the episode family (motion_at, scatter_actions, gather_columns,
// episode_step, reset_worlds) — argument checks, launch plans and the CPU impls.
// What each op computes: csrc/kernels/episode.cuh, whose per-element functions
// the CPU twins below call in loops (the CUDA kernels and the emulator call the same).
#include "episode.h"

#include "common.h"

#include <climits>
#include <cmath>
#include <vector>

namespace flycuda {
namespace {

// `t` on `ref`'s device, of dtype `dt`, `dim`-D; messages name both arguments.
void expect(const char* kOpName, const Tensor& t, const char* name, ScalarType dt, int64_t dim,
            const Tensor& ref, const char* ref_name) {
  FLYCUDA_CHECK(t.device() == ref.device(), "argument '", name, "' must be on ", ref.device(), " (the device of '",
                ref_name, "'), got ", t.device());
  FLYCUDA_CHECK(t.scalar_type() == dt, "argument '", name, "' must have dtype ", dt, ", got ", t.scalar_type());
  FLYCUDA_CHECK(t.dim() == dim, "argument '", name, "' must be a ", dim, "-D tensor, got ", t.dim(),
                "-D with shape ", sizes_of(t));
}

void expect_size(const char* kOpName, const Tensor& t, const char* name, int64_t i, int64_t n,
                 const char* what) {
  FLYCUDA_CHECK(t.size(i) == n, "argument '", name, "' must have size ", n, " (", what, ") in dim ", i,
                ", got shape ", sizes_of(t));
}

void expect_contiguous(const char* kOpName, const Tensor& t, const char* name) {
  FLYCUDA_CHECK(t.is_contiguous(), "argument '", name, "' must be contiguous, got shape ", sizes_of(t), " strides ",
                strides_of(t));
}

// An output: no overlapping memory, none shared with any of `others` (name, tensor).
void expect_output(const char* kOpName, const Tensor& out, const char* name,
                   std::initializer_list<std::pair<const char*, const Tensor*>> others) {
  FLYCUDA_CHECK(!has_internal_overlap(out), "argument '", name,
                "' must not have overlapping memory (e.g. an expanded tensor), got shape ", sizes_of(out), " strides ",
                strides_of(out));
  for (const auto& [other_name, other] : others) {
    FLYCUDA_CHECK(!may_share_memory(out, *other), "argument '", name, "' must not share memory with argument '",
                  other_name, "'");
  }
}

void expect_threads(const char* kOpName, int64_t threads, const char* what) {
  FLYCUDA_CHECK(threads <= INT32_MAX, what, " = ", threads, " must be < 2^31 (32-bit thread indices)");
}

}  // namespace

kernels::MotionAtPlan check_motion_at(const Tensor& frames, const Tensor& world_steps, const Tensor& out,
                                      const std::optional<Tensor>& offsets, double frames_per_step,
                                      std::string_view frame_mode) {
  constexpr const char* kOpName = "motion_at";
  FLYCUDA_CHECK(out.scalar_type() == kFloat && out.dim() == 2, "argument 'out' must be a float32 [W, D] "
                "tensor, got ", out.scalar_type(), " of shape ", sizes_of(out));
  const int64_t W = out.size(0), D = out.size(1);
  const bool cubic = frames.scalar_type() == kDouble;
  FLYCUDA_CHECK(frames.device() == out.device(), "argument 'frames' must be on ", out.device(),
                " (the device of 'out'), got ", frames.device());
  FLYCUDA_CHECK((frames.scalar_type() == kFloat && frames.dim() == 3) ||
                    (cubic && frames.dim() == 4 && frames.size(2) == 4),
                "argument 'frames' must be float32 [M, T, D] (recorded frames, linear) or float64 [M, T, 4, D] "
                "(cubic pieces, flycuda.spline_coeffs), got ", frames.scalar_type(), " of shape ", sizes_of(frames));
  expect_contiguous(kOpName, frames, "frames");
  FLYCUDA_CHECK(frames.size(0) == 1 || frames.size(0) == W, "argument 'frames' must have size 1 or W = ", W,
                " (out.size(0)) in dim 0, got shape ", sizes_of(frames));
  FLYCUDA_CHECK(frames.size(1) >= 1, "argument 'frames' must hold at least one frame (dim 1), got shape ",
                sizes_of(frames));
  expect_size(kOpName, frames, "frames", frames.dim() - 1, D, "D = out.size(1)");
  expect(kOpName, world_steps, "world_steps", kLong, 1, out, "out");
  expect_size(kOpName, world_steps, "world_steps", 0, W, "W = out.size(0)");
  expect_contiguous(kOpName, world_steps, "world_steps");
  if (offsets.has_value()) {
    const Tensor& o = *offsets;
    FLYCUDA_CHECK(o.device() == out.device() && (o.scalar_type() == kFloat || o.scalar_type() == kDouble) &&
                      o.dim() == 1 && o.size(0) == W && o.is_contiguous(),
                  "argument 'offsets' must be a contiguous float32/float64 [", W, "] tensor on ", out.device(),
                  ", got ", o.scalar_type(), " of shape ", sizes_of(o), " on ", o.device());
    expect_output(kOpName, out, "out", {{"offsets", &o}});
  }
  expect_output(kOpName, out, "out", {{"frames", &frames}, {"world_steps", &world_steps}});
  FLYCUDA_CHECK_VALUE(std::isfinite(frames_per_step), "argument 'frames_per_step' must be finite, got ",
                      frames_per_step);
  FLYCUDA_CHECK_VALUE(frame_mode == "clamp" || frame_mode == "loop",
                      "argument 'mode' must be 'clamp' or 'loop', got '", frame_mode, "'");
  expect_threads(kOpName, W * D, "W * D");
  kernels::MotionAtPlan p;
  p.W = W;
  p.D = D;
  p.out_s0 = out.stride(0);
  p.out_s1 = out.stride(1);
  p.frames_per_step = frames_per_step;
  p.loop = frame_mode == "loop";
  return p;
}

kernels::ScatterPlan check_scatter_actions(const Tensor& actions, const Tensor& act_ids,
                                           const Tensor& action_map, const Tensor& ctrl) {
  constexpr const char* kOpName = "scatter_actions";
  FLYCUDA_CHECK(ctrl.scalar_type() == kFloat && ctrl.dim() == 2, "argument 'ctrl' must be a float32 [W, nu] "
                "tensor, got ", ctrl.scalar_type(), " of shape ", sizes_of(ctrl));
  const int64_t W = ctrl.size(0);
  expect(kOpName, actions, "actions", kFloat, 2, ctrl, "ctrl");
  expect_size(kOpName, actions, "actions", 0, W, "W = ctrl.size(0)");
  const int64_t A = actions.size(1);
  FLYCUDA_CHECK(act_ids.device() == ctrl.device() &&
                    (act_ids.scalar_type() == kInt || act_ids.scalar_type() == kLong) && act_ids.dim() == 1 &&
                    act_ids.size(0) == A && act_ids.is_contiguous(),
                "argument 'act_ids' must be a contiguous int32/int64 [A] = [", A, "] tensor on ", ctrl.device(),
                ", got ", act_ids.scalar_type(), " of shape ", sizes_of(act_ids), " on ", act_ids.device());
  expect(kOpName, action_map, "action_map", kFloat, 2, ctrl, "ctrl");
  FLYCUDA_CHECK(action_map.size(0) == 4 && action_map.size(1) == A, "argument 'action_map' must have shape [4, ", A,
                "] (rows scale, offset, low, high), got ", sizes_of(action_map));
  expect_contiguous(kOpName, action_map, "action_map");
  expect_output(kOpName, ctrl, "ctrl", {{"actions", &actions}, {"act_ids", &act_ids}, {"action_map", &action_map}});
  expect_threads(kOpName, W * A, "W * A");
  if (checks_values_here(ctrl)) {
    check_index_values(kOpName, "act_ids", HostValues(act_ids), ctrl.size(1), "nu = ctrl.size(1)", true);
  }
  kernels::ScatterPlan p;
  p.W = W;
  p.A = A;
  p.nu = ctrl.size(1);
  p.act_s0 = actions.stride(0);
  p.act_s1 = actions.stride(1);
  p.ctrl_s0 = ctrl.stride(0);
  p.ctrl_s1 = ctrl.stride(1);
  return p;
}

kernels::GatherPlan check_gather_columns(const TensorList& sources, const Tensor& columns, const Tensor& out) {
  constexpr const char* kOpName = "gather_columns";
  FLYCUDA_CHECK(out.scalar_type() == kFloat && out.dim() == 2, "argument 'out' must be a float32 [W, O] "
                "tensor, got ", out.scalar_type(), " of shape ", sizes_of(out));
  const int64_t W = out.size(0), O = out.size(1);
  const int64_t n = static_cast<int64_t>(sources.size());
  FLYCUDA_CHECK(n >= 1 && n <= kernels::kMaxSources, "argument 'sources' must hold 1 to ", kernels::kMaxSources,
                " tensors, got ", n);
  kernels::GatherPlan p;
  for (int64_t k = 0; k < n; ++k) {
    const Tensor& s = sources[k];
    FLYCUDA_CHECK(s.device() == out.device() && s.scalar_type() == kFloat && s.dim() == 2 && s.size(0) == W,
                  "argument 'sources' must hold float32 [W = ", W, ", N] tensors on ", out.device(), "; sources[", k,
                  "] is ", s.scalar_type(), " of shape ", sizes_of(s), " on ", s.device());
    FLYCUDA_CHECK(!may_share_memory(out, s), "argument 'out' must not share memory with argument 'sources' (sources[",
                  k, "])");
    p.src[k] = dptr<float>(s);
    p.src_s0[k] = s.stride(0);
    p.src_s1[k] = s.stride(1);
    p.src_n[k] = s.size(1);
  }
  expect(kOpName, columns, "columns", kInt, 2, out, "out");
  FLYCUDA_CHECK(columns.size(0) == O && columns.size(1) == 2, "argument 'columns' must have shape [O, 2] = [", O,
                ", 2] (source, column), got ", sizes_of(columns));
  expect_contiguous(kOpName, columns, "columns");
  expect_output(kOpName, out, "out", {{"columns", &columns}});
  expect_threads(kOpName, W * O, "W * O");
  if (checks_values_here(out) && O > 0) {
    const int32_t* c = dptr<int32_t>(columns);  // contiguous, on the CPU
    for (int64_t o = 0; o < O; ++o) {
      FLYCUDA_CHECK(c[2 * o] >= 0 && c[2 * o] < n, "argument 'columns' row ", o, " names source ", c[2 * o],
                    "; there are ", n, " sources");
      FLYCUDA_CHECK(c[2 * o + 1] >= 0 && c[2 * o + 1] < p.src_n[c[2 * o]], "argument 'columns' row ", o,
                    " names column ", c[2 * o + 1], " of sources[", c[2 * o], "], which has ", p.src_n[c[2 * o]]);
    }
  }
  p.W = W;
  p.O = O;
  p.nsrc = n;
  p.out_s0 = out.stride(0);
  p.out_s1 = out.stride(1);
  return p;
}

kernels::EpisodePlan check_episode_step(const Tensor& world_steps, const Tensor& qpos, const Tensor& qvel,
                                        const Tensor& terminated, const Tensor& truncated, int64_t root_adr,
                                        double min_height, double max_height, double min_up, int64_t max_steps) {
  constexpr const char* kOpName = "episode_step";
  FLYCUDA_CHECK(world_steps.scalar_type() == kLong && world_steps.dim() == 1 && world_steps.is_contiguous(),
                "argument 'world_steps' must be a contiguous int64 [W] tensor, got ", world_steps.scalar_type(),
                " of shape ", sizes_of(world_steps));
  const int64_t W = world_steps.size(0);
  expect(kOpName, qpos, "qpos", kFloat, 2, world_steps, "world_steps");
  expect_size(kOpName, qpos, "qpos", 0, W, "W = world_steps.size(0)");
  expect(kOpName, qvel, "qvel", kFloat, 2, world_steps, "world_steps");
  expect_size(kOpName, qvel, "qvel", 0, W, "W = world_steps.size(0)");
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"terminated", &terminated},
                                {"truncated", &truncated}}) {
    expect(kOpName, *t, name, kBool, 1, world_steps, "world_steps");
    expect_size(kOpName, *t, name, 0, W, "W = world_steps.size(0)");
    expect_contiguous(kOpName, *t, name);
    expect_output(kOpName, *t, name, {{"qpos", &qpos}, {"qvel", &qvel}, {"world_steps", &world_steps}});
  }
  expect_output(kOpName, world_steps, "world_steps", {{"qpos", &qpos}, {"qvel", &qvel}});
  expect_output(kOpName, terminated, "terminated", {{"truncated", &truncated}});
  FLYCUDA_CHECK_VALUE(root_adr == -1 || (root_adr >= 0 && root_adr <= qpos.size(1) - 7),
                      "argument 'root_adr' must be -1 (no pose rules) or the qpos address of a free joint (7 "
                      "entries) in [0, ", qpos.size(1) - 7, "], got ", root_adr);
  FLYCUDA_CHECK_VALUE(!std::isnan(min_height) && !std::isnan(max_height) && !std::isnan(min_up),
                      "arguments 'min_height', 'max_height' and 'min_up' must not be NaN, got ", min_height, ", ",
                      max_height, ", ", min_up);
  FLYCUDA_CHECK_VALUE(max_steps >= 0, "argument 'max_steps' must be >= 0 (0: no time limit), got ", max_steps);
  expect_threads(kOpName, W, "W");
  kernels::EpisodePlan p;
  p.W = W;
  p.nq = qpos.size(1);
  p.nv = qvel.size(1);
  p.qpos_s0 = qpos.stride(0);
  p.qpos_s1 = qpos.stride(1);
  p.qvel_s0 = qvel.stride(0);
  p.qvel_s1 = qvel.stride(1);
  p.root_adr = root_adr;
  p.min_height = static_cast<float>(min_height);
  p.max_height = static_cast<float>(max_height);
  p.min_up = static_cast<float>(min_up);
  p.max_steps = max_steps;
  return p;
}

kernels::ResetPlan check_reset_worlds(const ResetArgs& a) {
  constexpr const char* kOpName = "reset_worlds";
  FLYCUDA_CHECK(a.done.scalar_type() == kBool && a.done.dim() == 1 && a.done.is_contiguous(),
                "argument 'done' must be a contiguous bool [W] tensor, got ", a.done.scalar_type(), " of shape ",
                sizes_of(a.done));
  const int64_t W = a.done.size(0);
  expect(kOpName, a.qpos, "qpos", kFloat, 2, a.done, "done");
  expect_size(kOpName, a.qpos, "qpos", 0, W, "W = done.size(0)");
  expect(kOpName, a.qvel, "qvel", kFloat, 2, a.done, "done");
  expect_size(kOpName, a.qvel, "qvel", 0, W, "W = done.size(0)");
  const int64_t nq = a.qpos.size(1), nv = a.qvel.size(1);
  expect(kOpName, a.init_qpos, "init_qpos", kFloat, 2, a.done, "done");
  const int64_t K = a.init_qpos.size(0);
  FLYCUDA_CHECK(K >= 1, "argument 'init_qpos' must hold at least one initial state [K >= 1, nq], got shape ",
                sizes_of(a.init_qpos));
  expect_size(kOpName, a.init_qpos, "init_qpos", 1, nq, "nq = qpos.size(1)");
  expect(kOpName, a.init_qvel, "init_qvel", kFloat, 2, a.done, "done");
  expect_size(kOpName, a.init_qvel, "init_qvel", 0, K, "K = init_qpos.size(0)");
  expect_size(kOpName, a.init_qvel, "init_qvel", 1, nv, "nv = qvel.size(1)");
  expect(kOpName, a.init_frames, "init_frames", kDouble, 1, a.done, "done");
  expect_size(kOpName, a.init_frames, "init_frames", 0, K, "K = init_qpos.size(0)");
  expect(kOpName, a.qpos_noise, "qpos_noise", kFloat, 1, a.done, "done");
  expect_size(kOpName, a.qpos_noise, "qpos_noise", 0, nq, "nq = qpos.size(1)");
  expect(kOpName, a.qvel_noise, "qvel_noise", kFloat, 1, a.done, "done");
  expect_size(kOpName, a.qvel_noise, "qvel_noise", 0, nv, "nv = qvel.size(1)");
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"init_qpos", &a.init_qpos},
                                {"init_qvel", &a.init_qvel}, {"init_frames", &a.init_frames},
                                {"qpos_noise", &a.qpos_noise}, {"qvel_noise", &a.qvel_noise}}) {
    expect_contiguous(kOpName, *t, name);
  }
  for (const auto& [name, t, dt] : {std::tuple<const char*, const Tensor*, ScalarType>{
                                        "world_steps", &a.world_steps, kLong},
                                    {"episodes", &a.episodes, kLong}, {"offsets", &a.offsets, kDouble}}) {
    expect(kOpName, *t, name, dt, 1, a.done, "done");
    expect_size(kOpName, *t, name, 0, W, "W = done.size(0)");
    expect_contiguous(kOpName, *t, name);
  }
  const std::initializer_list<std::pair<const char*, const Tensor*>> inputs = {
      {"done", &a.done}, {"init_qpos", &a.init_qpos}, {"init_qvel", &a.init_qvel}, {"init_frames", &a.init_frames},
      {"qpos_noise", &a.qpos_noise}, {"qvel_noise", &a.qvel_noise}};
  const std::pair<const char*, Tensor*> outputs[] = {{"qpos", &a.qpos}, {"qvel", &a.qvel},
                                                         {"world_steps", &a.world_steps},
                                                         {"episodes", &a.episodes}, {"offsets", &a.offsets}};
  for (size_t i = 0; i < 5; ++i) {
    expect_output(kOpName, *outputs[i].second, outputs[i].first, inputs);
    for (size_t j = i + 1; j < 5; ++j) {
      FLYCUDA_CHECK(!may_share_memory(*outputs[i].second, *outputs[j].second), "argument '", outputs[i].first,
                    "' must not share memory with argument '", outputs[j].first, "'");
    }
  }
  expect_threads(kOpName, W, "W");
  kernels::ResetPlan p;
  p.W = W;
  p.K = K;
  p.nq = nq;
  p.nv = nv;
  p.qpos_s0 = a.qpos.stride(0);
  p.qpos_s1 = a.qpos.stride(1);
  p.qvel_s0 = a.qvel.stride(0);
  p.qvel_s1 = a.qvel.stride(1);
  p.seed = static_cast<uint64_t>(a.seed);
  return p;
}

namespace {

// The CPU twins: the kernels' per-element functions over every element (worlds in
// parallel where elements are independent).
template <typename F>
void for_each(int64_t n, const F& f) {
  torch::stable::parallel_for(0, n, /*grain_size=*/2048, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

void motion_at_cpu(const Tensor& frames, const Tensor& world_steps, Tensor& out,
                   const std::optional<Tensor>& offsets, double frames_per_step, std::string_view frame_mode) {
  const kernels::MotionAtPlan p = check_motion_at(frames, world_steps, out, offsets, frames_per_step, frame_mode);
  const int64_t* steps = dptr<int64_t>(world_steps);
  float* o = dptr<float>(out);
  const auto run = [&](const auto& fr) {
    FLYCUDA_DISPATCH_FLOATING_TYPES(offsets.has_value() ? offsets->scalar_type() : kFloat, "motion_at_cpu", [&] {
      const scalar_t* off = offsets.has_value() ? dptr<scalar_t>(*offsets) : nullptr;
      for_each(p.threads(), [&](int64_t i) { kernels::motion_at_one(fr, steps, off, o, p, i); });
    });
  };
  if (frames.scalar_type() == kDouble) {
    run(SplineFrames{dptr<double>(frames), frames.size(0), frames.size(1), frames.size(3)});
  } else {
    run(LinearFrames{dptr<float>(frames), frames.size(0), frames.size(1), frames.size(2)});
  }
}

void scatter_actions_cpu(const Tensor& actions, const Tensor& act_ids, const Tensor& action_map,
                         Tensor& ctrl) {
  const kernels::ScatterPlan p = check_scatter_actions(actions, act_ids, action_map, ctrl);
  FLYCUDA_DISPATCH_INDEX_TYPES(act_ids.scalar_type(), "scatter_actions_cpu", [&] {
    const float* x = dptr<float>(actions);
    const index_t* ids = dptr<index_t>(act_ids);
    const float* map = dptr<float>(action_map);
    float* c = dptr<float>(ctrl);
    for_each(p.threads(), [&](int64_t i) { kernels::scatter_one(x, ids, map, c, p, i); });
  });
}

void gather_columns_cpu(const TensorList& sources, const Tensor& columns, Tensor& out) {
  const kernels::GatherPlan p = check_gather_columns(sources, columns, out);
  const int32_t* cols = dptr<int32_t>(columns);
  float* o = dptr<float>(out);
  for_each(p.threads(), [&](int64_t i) { kernels::gather_one(cols, o, p, i); });
}

void episode_step_cpu(Tensor& world_steps, const Tensor& qpos, const Tensor& qvel, Tensor& terminated,
                      Tensor& truncated, int64_t root_adr, double min_height, double max_height, double min_up,
                      int64_t max_steps) {
  const kernels::EpisodePlan p = check_episode_step(world_steps, qpos, qvel, terminated, truncated, root_adr,
                                                    min_height, max_height, min_up, max_steps);
  int64_t* steps = dptr<int64_t>(world_steps);
  const float* q = dptr<float>(qpos);
  const float* v = dptr<float>(qvel);
  bool* term = dptr<bool>(terminated);
  bool* trunc = dptr<bool>(truncated);
  for_each(p.threads(), [&](int64_t w) { kernels::episode_one(steps, q, v, term, trunc, p, w); });
}

void reset_worlds_cpu(const Tensor& done, const Tensor& init_qpos, const Tensor& init_qvel,
                      const Tensor& init_frames, const Tensor& qpos_noise, const Tensor& qvel_noise,
                      int64_t seed, Tensor& qpos, Tensor& qvel, Tensor& world_steps, Tensor& episodes,
                      Tensor& offsets) {
  const ResetArgs a{done, init_qpos, init_qvel, init_frames, qpos_noise, qvel_noise, seed,
                    qpos, qvel, world_steps, episodes, offsets};
  const kernels::ResetPlan p = check_reset_worlds(a);
  const bool* d = dptr<bool>(done);
  const float *iq = dptr<float>(init_qpos), *iv = dptr<float>(init_qvel);
  const double* fr = dptr<double>(init_frames);
  const float *nq = dptr<float>(qpos_noise), *nv = dptr<float>(qvel_noise);
  float *q = dptr<float>(qpos), *v = dptr<float>(qvel);
  int64_t *s = dptr<int64_t>(world_steps), *e = dptr<int64_t>(episodes);
  double* off = dptr<double>(offsets);
  for_each(p.threads(), [&](int64_t w) { kernels::reset_one(d, iq, iv, fr, nq, nv, q, v, s, e, off, p, w); });
}

}  // namespace

FLYCUDA_LIBRARY_IMPL(CPU, m) {
  m.impl("motion_at", TORCH_BOX(&motion_at_cpu));
  m.impl("scatter_actions", TORCH_BOX(&scatter_actions_cpu));
  m.impl("gather_columns", TORCH_BOX(&gather_columns_cpu));
  m.impl("episode_step", TORCH_BOX(&episode_step_cpu));
  m.impl("reset_worlds", TORCH_BOX(&reset_worlds_cpu));
}

}  // namespace flycuda
