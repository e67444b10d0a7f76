// flycuda emu: runs flycuda's real CUDA kernels (csrc/kernels/*.cuh) on the
// emulated grid of cuda_emu.h, on cases written by tests/csrc/test_emu.py, so that
// CI executes every __global__ function without a GPU, under ASan+UBSan or TSan.
//
//   flycuda_emu CASE_DIR...
//
// A case directory holds case.txt ("op NAME" then "key value" lines) and the
// op's arrays as NAME.npy; strided tensors come as their whole base buffer plus
// offset and strides. Each op runs its family's launch template (kernels/<family>.cuh
// launch_*), the one its csrc/cuda/*.cu launcher runs, with the emulated grid's
// launcher; the outputs are written back as out_NAME.npy.
// Exit status: 0 when every case ran; a sanitizer report or an emulator error
// (e.g. a divergent __syncthreads) aborts with its message.
#include "kernels/advance_step.cuh"
#include "kernels/episode.cuh"
#include "kernels/hybrid_step.cuh"
#include "kernels/hybrid_senses.cuh"
#include "kernels/brain_step.cuh"
#include "kernels/connectome_step.cuh"
#include "kernels/odor_intensity.cuh"
#include "kernels/odor_plume.cuh"
#include "kernels/rule_step.cuh"
#include "kernels/motion_to_ctrl.cuh"
#include "kernels/pool_ommatidia.cuh"
#include "kernels/record.cuh"
#include "kernels/render_tiles.cuh"
#include "emu/npy.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
namespace k = flycuda::kernels;
using flycuda_emu::Array;
const flycuda_emu::Launcher kLaunch{};  // the launch templates' launcher: the emulated grid

namespace {

struct Case {
  fs::path dir;
  std::string op;
  std::map<std::string, std::string> scalars;
  std::map<std::string, Array> arrays;

  explicit Case(const fs::path& d) : dir(d) {
    std::ifstream f(d / "case.txt");
    if (!f) throw std::runtime_error("no case.txt in " + d.string());
    std::string key, value;
    while (f >> key >> value) scalars[key] = value;
    op = scalars.at("op");
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() == ".npy" && name.rfind("out_", 0) != 0) {
        arrays[e.path().stem().string()] = flycuda_emu::read_npy(e.path().string());
      }
    }
  }
  int64_t i64(const std::string& k) const { return std::stoll(need(k)); }
  double f64(const std::string& k) const { return std::strtod(need(k).c_str(), nullptr); }
  bool has(const std::string& name) const { return arrays.count(name) > 0; }
  Array& arr(const std::string& name) {
    auto it = arrays.find(name);
    if (it == arrays.end()) throw std::runtime_error(op + ": missing array " + name);
    return it->second;
  }
  template <typename T>
  T* ptr(const std::string& name) {  // null when the array is absent (an optional input)
    return has(name) ? arr(name).data<T>() : nullptr;
  }
  void save(const std::string& name) { flycuda_emu::write_npy((dir / ("out_" + name + ".npy")).string(), arr(name)); }

 private:
  const std::string& need(const std::string& k) const {
    auto it = scalars.find(k);
    if (it == scalars.end()) throw std::runtime_error(op + ": missing scalar " + k);
    return it->second;
  }
};

// Calls f with a null pointer of the index type named by the array's dtype.
template <typename F>
void with_index_type(const Array& a, F&& f) {
  if (a.descr == "<i4") f(static_cast<int32_t*>(nullptr));
  else if (a.descr == "<i8") f(static_cast<int64_t*>(nullptr));
  else throw std::runtime_error("index dtype must be int32 or int64, got " + a.descr);
}
#include "emu/episode_cases.h"  // the episode family (needs Case and with_index_type)


// As csrc/cuda/motion_to_ctrl.cu: the launch plan of csrc/kernels/motion_to_ctrl.cuh
// and its launch (fused with the advance when the counter carries the hidden ticket,
// else followed by a one-thread advance). `counter` is the counter's whole storage of
// `counter_bytes` bytes (the view is its first `counter_numel` int64 at offset 0). The
// case's "motion" (float32 [M, T, D]) or "coeffs" (float64 [M, T, 4, D],
// spline_to_ctrl) picks the kernel's Frames; "index64 1" takes the 64-bit index math
// that grids past 2^31 threads take (too big to emulate) on the case's grid.
template <typename Frames>
void launch_frames(Case& c, const Frames frames, int64_t* counter, int64_t counter_numel,
                   int64_t counter_bytes, float* ctrl) {
  const int64_t W = c.i64("W");
  const int64_t advance = c.i64("advance");
  k::MotionToCtrlPlan plan =
      k::plan_motion_to_ctrl(W, frames.D, advance, k::counter_has_ticket(counter_numel, 0, counter_bytes));
  if (plan.too_large) throw std::runtime_error("motion_to_ctrl: W * D too large");
  if (c.scalars.count("index64") && c.i64("index64") != 0) plan.index32 = false;
  const std::string odt = c.has("offsets") ? c.arr("offsets").descr : "<f4";
  with_index_type(c.arr("act_ids"), [&](auto* index_tag) {
    using index_t = std::remove_pointer_t<decltype(index_tag)>;
    const auto go = [&](auto* offsets) {
      k::launch_motion_to_ctrl(kLaunch, frames, counter, ctrl, c.arr("act_ids").data<index_t>(), offsets, W,
                               c.i64("nu"), c.i64("ctrl_s0"), c.i64("ctrl_s1"), c.f64("frames_per_step"),
                               c.i64("loop") != 0, advance, plan);
    };
    if (odt == "<f8") go(c.ptr<double>("offsets"));
    else go(c.ptr<float>("offsets"));
  });
}

void launch_motion_to_ctrl(Case& c, int64_t* counter, int64_t counter_numel, int64_t counter_bytes, float* ctrl) {
  if (c.has("coeffs")) {
    Array& a = c.arr("coeffs");
    if (a.descr != "<f8" || a.shape.size() != 4 || a.shape[2] != 4)
      throw std::runtime_error("spline_to_ctrl: coeffs must be float64 [M, T, 4, D], got " + a.descr);
    const flycuda::SplineFrames frames{a.data<double>(), a.shape[0], a.shape[1], a.shape[3]};
    launch_frames(c, frames, counter, counter_numel, counter_bytes, ctrl);
  } else {
    Array& a = c.arr("motion");
    const flycuda::LinearFrames frames{a.data<float>(), a.shape[0], a.shape[1], a.shape[2]};
    launch_frames(c, frames, counter, counter_numel, counter_bytes, ctrl);
  }
}

void run_motion_to_ctrl(Case& c) {
  Array& counter = c.arr("counter");  // the counter's whole storage, padded to whole int64
  const int64_t numel = c.scalars.count("counter_numel") ? c.i64("counter_numel") : counter.numel();
  const int64_t bytes = c.scalars.count("counter_bytes") ? c.i64("counter_bytes") : 8 * counter.numel();
  if (bytes > 8 * counter.numel()) throw std::runtime_error("motion_to_ctrl: counter_bytes past the array");
  launch_motion_to_ctrl(c, counter.data<int64_t>(), numel, bytes,
                        c.arr("ctrl").data<float>() + c.i64("ctrl_offset"));
  c.save("ctrl");
  c.save("counter");
}

// Two fused launches on different counters (counter A at counters[0:3], B at
// counters[b_at:b_at+3], each a new_step_counter's 20 bytes, padded), from two host threads ("streams") that start together,
// `reps` times each. Every launch must read its counter before the advance in
// every block (checked on ctrl: motion[0, s, d] is unique per frame) and
// advance it exactly once.
void run_motion_to_ctrl_overlap(Case& c) {
  Array& counters = c.arr("counters");
  const int64_t b_at = c.i64("b_at");
  const int64_t reps = c.i64("reps"), W = c.i64("W"), nu = c.i64("nu"), D = c.arr("motion").shape[2];
  const float* motion = c.arr("motion").data<float>();
  Array wrong;  // per stream: launches where some world read another step
  wrong.descr = "<i8";
  wrong.shape = {2};
  wrong.bytes.assign(16, 0);
  std::vector<std::vector<float>> ctrl(2, std::vector<float>(static_cast<size_t>(W * nu), -1.f));
  std::atomic<int> ready{0};
  const auto stream = [&](int i) {
    int64_t* counter = counters.data<int64_t>() + (i == 0 ? 0 : b_at);
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    for (int64_t r = 0; r < reps; ++r) {
      const int64_t s = counter[0];  // stream order: the previous launch has finished
      launch_motion_to_ctrl(c, counter, 2, k::kCounterBytes, ctrl[i].data());
      bool ok = counter[0] == s + 1;
      for (int64_t w = 0; w < W; ++w)
        for (int64_t d = 0; d < D; ++d) ok = ok && ctrl[i][w * nu + d] == motion[s * D + d];
      if (!ok) ++wrong.data<int64_t>()[i];
    }
  };
  std::thread a(stream, 0), b(stream, 1);
  a.join();
  b.join();
  c.arrays["wrong"] = wrong;
  c.save("wrong");
  c.save("counters");
}

void run_advance_step(Case& c) {
  k::launch_advance_step(kLaunch, c.arr("counter").data<int64_t>(), c.i64("n"));
  c.save("counter");
}

// As csrc/cuda/pool_ommatidia.cu: the plan check_pool_ommatidia builds (tests/csrc/test_emu.py
// fills it from the tensors' shapes and strides), arrays "pixels" (uint8 [S, E, P, 3]),
// the map "omm_ptr", "omm_pixels", "omm_channel", "omm_column", "omm_count" (int32) and
// "readouts" (the output's base buffer; readouts_offset and the plan's strides).
void run_pool_ommatidia(Case& c) {
  k::PoolPlan p;
  p.S = c.i64("S"), p.E = c.i64("E"), p.P = c.i64("P"), p.O = c.i64("O"), p.nnz = c.i64("nnz");
  p.out_s0 = c.i64("readouts_s0"), p.out_s1 = c.i64("readouts_s1"), p.out_s2 = c.i64("readouts_s2");
  p.out_s3 = c.i64("readouts_s3");
  const k::PoolMap m{c.arr("omm_ptr").data<int32_t>(), c.ptr<int32_t>("omm_pixels"), c.arr("omm_channel").data<int32_t>(),
                     c.arr("omm_column").data<int32_t>(), c.arr("omm_count").data<int32_t>()};
  float* readouts = c.arr("readouts").data<float>() + c.i64("readouts_offset");
  k::launch_pool_ommatidia(kLaunch, c.ptr<uint8_t>("pixels"), m, readouts, p);
  c.save("readouts");
}

// kernels::exact_quotient's device path against the host's division: every x in
// [0, 255] for every n in "counts" (int32); out_mismatches int64 [2] = (mismatches,
// the first mismatching n or -1).
void run_pool_quotients(Case& c) {
  Array& counts = c.arr("counts");
  Array out;
  out.descr = "<i8";
  out.shape = {2};
  out.bytes.assign(16, 0);
  int64_t* r = out.data<int64_t>();
  r[1] = -1;
  for (int64_t i = 0; i < counts.numel(); ++i) {
    const double n = static_cast<double>(counts.data<int32_t>()[i]);
    const double inv = 1.0 / n;
    for (int x = 0; x < 256; ++x) {
      if (k::exact_quotient(x, n, inv) != static_cast<double>(x) / n) {
        if (r[0]++ == 0) r[1] = static_cast<int64_t>(n);
      }
    }
  }
  c.arrays["mismatches"] = out;
  c.save("mismatches");
}

// As csrc/cuda/record.cu: the case carries the plan that
// check_record_qpos / check_record_chunk build (tests/csrc/test_emu.py fills it
// from the tensors' shapes and strides), and the arrays "src", "cols", "out".
void run_record(Case& c) {
  k::RecordPlan p;
  p.W = c.i64("W"), p.D = c.i64("D"), p.N = c.i64("N"), p.every = c.i64("every"), p.limit = c.i64("limit");
  p.B = c.i64("B"), p.C = c.i64("C"), p.src_s0 = c.i64("src_s0"), p.src_s1 = c.i64("src_s1");
  p.out_sb = c.i64("out_sb"), p.out_sw = c.i64("out_sw"), p.out_sr = c.i64("out_sr"), p.out_sd = c.i64("out_sd");
  with_index_type(c.arr("cols"), [&](auto* index_tag) {
    using index_t = std::remove_pointer_t<decltype(index_tag)>;
    k::launch_record(kLaunch, c.arr("src").data<float>() + c.i64("src_offset"), c.arr("cols").data<index_t>(),
                     c.arr("out").data<float>() + c.i64("out_offset"), c.arr("step").data<int64_t>(), p);
  });
  c.save("out");
}

// Rows of a [rows, ...] scene array (0 when absent).
int32_t rows_of(Case& c, const std::string& name) {
  return c.has(name) && !c.arr(name).shape.empty() ? static_cast<int32_t>(c.arr(name).shape[0]) : 0;
}

// As csrc/cuda/render_tiles.cu, with the RenderArgs that render/render_args.cpp builds
// (make_scene / make_view): the scene's fields by the names of
// flycuda.ops.scene_layout.Scene.FIELDS, the poses and cameras as strided base buffers, one
// fovy (degrees) per camera in "fovy", an optional pixel list "pixels"; the
// outputs present are the ones requested.
void run_render_tiles(Case& c) {
  namespace r = flycuda::render;
  r::RenderArgs a;
  r::Scene& sc = a.sc;
  sc.xpos = c.arr("geom_xpos").data<float>() + c.i64("xpos_offset");
  sc.xmat = c.arr("geom_xmat").data<float>() + c.i64("xmat_offset");
  sc.xpos_s0 = c.i64("xpos_s0");
  sc.xpos_s1 = c.i64("xpos_s1");
  sc.xmat_s0 = c.i64("xmat_s0");
  sc.xmat_s1 = c.i64("xmat_s1");
  sc.nworld = static_cast<int32_t>(c.i64("nworld"));
  sc.ngeom = rows_of(c, "geom_ids");
  sc.geom_ids = c.ptr<int32_t>("geom_ids");
  sc.geom_info = c.ptr<int32_t>("geom_info");
  sc.geom_param = c.ptr<float>("geom_param");
  sc.bvh_boxes = c.ptr<float>("bvh_boxes");
  sc.bvh_links = c.ptr<int32_t>("bvh_links");
  sc.tris = c.ptr<float>("tris");
  sc.top_links = c.ptr<int32_t>("top_links");
  sc.unbounded = c.ptr<int32_t>("unbounded");
  sc.lights = c.ptr<float>("lights");
  sc.headlight = c.ptr<float>("headlight");
  sc.background = c.ptr<float>("background");
  sc.nnode = rows_of(c, "bvh_boxes");
  sc.ntri = rows_of(c, "tris");
  sc.ntop = rows_of(c, "top_links");
  sc.nunbounded = rows_of(c, "unbounded");
  sc.nlight = rows_of(c, "lights");
  r::View& v = a.v;
  v.worlds = c.arr("worlds").data<int32_t>();
  v.nsel = rows_of(c, "worlds");
  Array& fovy = c.arr("fovy");  // float64 [C]
  v.ncam = static_cast<int32_t>(fovy.numel());
  if (v.ncam < 1 || v.ncam > r::kMaxCams) throw std::runtime_error("render_tiles: 1 to kMaxCams cameras");
  v.cam_pos = c.arr("cam_pos").data<float>() + c.i64("cp_offset");
  v.cam_mat = c.arr("cam_mat").data<float>() + c.i64("cm_offset");
  v.cp_s0 = c.i64("cp_s0");
  v.cp_s1 = c.i64("cp_s1");
  v.cm_s0 = c.i64("cm_s0");
  v.cm_s1 = c.i64("cm_s1");
  for (int cam = 0; cam < r::kMaxCams; ++cam) {
    v.tan_half_fovy[cam] =
        cam < v.ncam ? static_cast<float>(std::tan(0.5 * fovy.data<double>()[cam] * M_PI / 180.0)) : 0.f;
  }
  v.height = static_cast<int32_t>(c.i64("height"));
  v.width = static_cast<int32_t>(c.i64("width"));
  v.pixels = c.ptr<int32_t>("pixels");
  v.npix = rows_of(c, "pixels");
  v.zfar = static_cast<float>(c.f64("zfar"));
  v.samples = static_cast<int32_t>(c.i64("samples"));
  v.shadows = c.i64("shadows") != 0;
  v.rgb = c.ptr<uint8_t>("rgb");
  v.mosaic_cols = static_cast<int32_t>(c.i64("mosaic_cols"));
  v.depth = c.ptr<float>("depth");
  v.seg = c.ptr<int32_t>("seg");
  v.top_boxes = c.ptr<float>("top_boxes");
  v.timers = c.ptr<int64_t>("timers");
  // The plan render_args computes (check_shapes).
  const int64_t T = static_cast<int64_t>(v.nsel) * v.ncam;
  const int64_t tiles = (v.rgb && v.mosaic_cols > 0) ? (T + v.mosaic_cols - 1) / v.mosaic_cols * v.mosaic_cols : T;
  const k::RenderPlan plan = k::plan_render_tiles(tiles, v.height, v.width, v.npix, v.nsel);
  if (plan.too_large) throw std::runtime_error("render_tiles: too many pixels for one launch");
  k::launch_render_tiles(kLaunch, a, plan);
  for (const char* name : {"rgb", "depth", "seg", "top_boxes", "timers"}) {
    if (c.has(name)) c.save(name);
  }
}

// The emulator's count of atomics, one row per launch of the case: int64 [launches, 3] =
// (blocks, atomics, the most atomics of one block), as out_launches.npy.
void save_launch_log(Case& c) {
  const std::vector<flycuda_emu::LaunchStats> log = flycuda_emu::take_launch_log();
  Array a;
  a.descr = "<i8";
  a.shape = {static_cast<int64_t>(log.size()), 3};
  a.bytes.assign(log.size() * 3 * sizeof(int64_t), 0);
  for (size_t i = 0; i < log.size(); ++i) {
    a.data<int64_t>()[3 * i] = static_cast<int64_t>(log[i].blocks);
    a.data<int64_t>()[3 * i + 1] = static_cast<int64_t>(log[i].atomics);
    a.data<int64_t>()[3 * i + 2] = static_cast<int64_t>(log[i].max_per_block);
  }
  c.arrays["launches"] = a;
  c.save("launches");
}

// As csrc/cuda/hybrid_step.cu: the sensory inputs in one floating type (drive's), act_ids
// int32 or int64, ctrl strided (its base buffer, ctrl_offset, ctrl_s0/ctrl_s1); outputs the
// state, the persistence counters and ctrl.
void run_hybrid_step(Case& c) {
  k::HybridPlan p;
  p.W = c.i64("W"), p.nu = c.i64("nu"), p.ctrl_s0 = c.i64("ctrl_s0"), p.ctrl_s1 = c.i64("ctrl_s1");
  float* ctrl = c.arr("ctrl").data<float>() + c.i64("ctrl_offset");
  const auto go = [&](auto* sense_tag) {
    using sense_t = std::remove_pointer_t<decltype(sense_tag)>;
    with_index_type(c.arr("act_ids"), [&](auto* tag) {
      using index_t = std::remove_pointer_t<decltype(tag)>;
      k::launch_hybrid_step(kLaunch, c.ptr<sense_t>("drive"), c.ptr<sense_t>("thorax_z"), c.ptr<sense_t>("tarsus5_z"),
                            c.ptr<sense_t>("stumbling_forces"), c.ptr<sense_t>("heading"), c.ptr<double>("params"),
                            c.ptr<double>("state"), c.ptr<int64_t>("persistence"), c.arr("act_ids").data<index_t>(),
                            ctrl, p);
    });
  };
  if (c.arr("drive").descr == "<f8") go(static_cast<double*>(nullptr));
  else go(static_cast<float*>(nullptr));
  for (const char* name : {"state", "persistence", "ctrl"}) c.save(name);
}

// As csrc/cuda/rule_step.cu: act_ids int32 or int64, ctrl strided; outputs the state, each
// world's random stream and ctrl.
void run_rule_step(Case& c) {
  k::RulePlan p;
  p.W = c.i64("W"), p.nu = c.i64("nu"), p.ctrl_s0 = c.i64("ctrl_s0"), p.ctrl_s1 = c.i64("ctrl_s1");
  float* ctrl = c.arr("ctrl").data<float>() + c.i64("ctrl_offset");
  with_index_type(c.arr("act_ids"), [&](auto* tag) {
    using index_t = std::remove_pointer_t<decltype(tag)>;
    k::launch_rule_step(kLaunch, c.ptr<double>("params"), c.ptr<double>("rules"), c.ptr<double>("state"),
                        c.ptr<int64_t>("rng"), c.arr("act_ids").data<index_t>(), ctrl, p);
  });
  for (const char* name : {"state", "rng", "ctrl"}) c.save(name);
}

// As csrc/cuda/hybrid_senses.cu: body_ids int32 or int64; the contact arrays by their
// CONTACT_FIELDS names; outputs the four sensory inputs (the forces summed with atomics).
void run_hybrid_senses(Case& c) {
  k::SensesPlan p;
  p.W = c.i64("W"), p.nbody = c.i64("nbody"), p.ngeom = c.i64("ngeom"), p.slots = c.i64("slots");
  p.efc_cols = c.i64("efc_cols"), p.njmax = c.i64("njmax"), p.friction_cols = c.i64("friction_cols");
  p.cone = static_cast<int>(c.i64("cone"));
  with_index_type(c.arr("body_ids"), [&](auto* tag) {
    using index_t = std::remove_pointer_t<decltype(tag)>;
    k::launch_hybrid_senses(kLaunch, c.ptr<float>("xpos"), c.ptr<float>("xmat"), c.arr("body_ids").data<index_t>(),
                            c.ptr<int>("geom"), c.ptr<int>("worldid"), c.ptr<float>("frame"), c.ptr<float>("friction"),
                            c.ptr<int>("dim"), c.ptr<int>("efc_address"), c.ptr<float>("adhesion"),
                            c.ptr<float>("efc_force"), c.ptr<int>("nacon"), c.ptr<int>("geom_segment"),
                            c.ptr<double>("thorax_z"), c.ptr<double>("tarsus5_z"), c.ptr<double>("stumbling_forces"),
                            c.ptr<double>("heading"), p);
  });
  for (const char* name : {"thorax_z", "tarsus5_z", "stumbling_forces", "heading"}) c.save(name);
}

// As csrc/cuda/odor_intensity.cu: every input strided (its base buffer, offset and strides; a
// stride 0 shares), the wind optional (has_wind); the output `out`, strided too.
void run_odor_intensity(Case& c) {
  k::OdorPlan p;
  p.W = c.i64("W"), p.n = c.i64("n"), p.k = c.i64("k"), p.s = c.i64("s");
  p.field = static_cast<int>(c.i64("field")), p.exponent = c.f64("exponent");
  p.diffusivity = c.f64("diffusivity"), p.decay = c.f64("decay"), p.log_c0 = c.f64("log_c0");
  p.has_wind = c.i64("has_wind") != 0;
  p.src_s0 = c.i64("sources_s0"), p.src_s1 = c.i64("sources_s1"), p.src_s2 = c.i64("sources_s2");
  p.peak_s0 = c.i64("peaks_s0"), p.peak_s1 = c.i64("peaks_s1"), p.peak_s2 = c.i64("peaks_s2");
  p.sen_s0 = c.i64("sensors_s0"), p.sen_s1 = c.i64("sensors_s1"), p.sen_s2 = c.i64("sensors_s2");
  p.out_s0 = c.i64("out_s0"), p.out_s1 = c.i64("out_s1"), p.out_s2 = c.i64("out_s2");
  const auto at = [&](const char* name) { return c.arr(name).data<float>() + c.i64(std::string(name) + "_offset"); };
  const float* wind = nullptr;
  if (p.has_wind) {
    p.wind_s0 = c.i64("wind_s0"), p.wind_s1 = c.i64("wind_s1");
    wind = at("wind");
  }
  k::launch_odor_intensity(kLaunch, at("sources"), at("peaks"), at("sensors"), wind, at("out"), p);
  c.save("out");
}

// As csrc/cuda/odor_plume.cu: the grid contiguous, the sensors, times and out strided (base
// buffer, offset, strides); origin/spacing per axis as origin0.. and spacing0...
void run_odor_plume(Case& c) {
  k::PlumePlan p;
  p.W = c.i64("W"), p.s = c.i64("s"), p.T = c.i64("T"), p.dims = static_cast<int>(c.i64("dims"));
  for (int d = 0; d < p.dims; ++d) {
    p.n[d] = c.i64("n" + std::to_string(d));
    p.origin[d] = c.f64("origin" + std::to_string(d)), p.spacing[d] = c.f64("spacing" + std::to_string(d));
  }
  for (int d = 0; d <= p.dims; ++d) p.stride[d] = c.i64("plume_s" + std::to_string(d));
  p.fps = c.f64("fps"), p.time_mode = static_cast<int>(c.i64("time_mode"));
  p.sen_s0 = c.i64("sensors_s0"), p.sen_s1 = c.i64("sensors_s1"), p.sen_s2 = c.i64("sensors_s2");
  p.time_s0 = c.i64("time_s0"), p.out_s0 = c.i64("out_s0"), p.out_s1 = c.i64("out_s1");
  const auto at = [&](const char* name) { return c.arr(name).data<float>() + c.i64(std::string(name) + "_offset"); };
  k::launch_odor_plume(kLaunch, at("plume"), at("sensors"), at("time"), at("out"), p);
  c.save("out");
}

// As csrc/cuda/connectome_step.cu: v, stimulus and out strided (base buffer, offset, strides);
// the network's tables contiguous.
void run_connectome_step(Case& c) {
  k::ConnectomePlan p;
  p.B = c.i64("B"), p.N = c.i64("N"), p.E = c.i64("E"), p.C = c.i64("C"), p.input_nodes = c.i64("input_nodes");
  p.dt = static_cast<float>(c.f64("dt"));
  p.v_s0 = c.i64("v_s0"), p.v_s1 = c.i64("v_s1"), p.x_s0 = c.i64("stimulus_s0"), p.x_s1 = c.i64("stimulus_s1");
  p.out_s0 = c.i64("out_s0"), p.out_s1 = c.i64("out_s1");
  const auto at = [&](const char* name) { return c.arr(name).data<float>() + c.i64(std::string(name) + "_offset"); };
  k::launch_connectome_step(kLaunch, at("v"), at("stimulus"), c.arr("rowptr").data<int32_t>(), c.ptr<int32_t>("src"),
                            c.ptr<float>("weight"), c.arr("bias").data<float>(), c.arr("tau").data<float>(), at("out"), p);
  c.save("out");
}

// As csrc/cuda/brain_step.cu: every tensor contiguous; the plan's numbers as the op's checks set them.
void run_brain_step(Case& c) {
  k::BrainPlan p;
  p.B = c.i64("B"), p.N = c.i64("N"), p.E = c.i64("E"), p.delay = c.i64("delay"), p.R = p.delay + 1;
  p.refractory = c.i64("refractory"), p.log_capacity = c.i64("log_capacity");
  p.v_rest = c.f64("v_rest"), p.v_reset = c.f64("v_reset"), p.v_th = c.f64("v_th"), p.decay_g = c.f64("decay_g");
  p.g_to_v = c.f64("g_to_v"), p.v_const = c.f64("v_const"), p.decay_v = c.f64("decay_v"), p.w_syn = c.f64("w_syn");
  p.w_poi = c.f64("w_poi"), p.dt = c.f64("dt");
  k::launch_brain_step(kLaunch, c.ptr<double>("v"), c.ptr<double>("g"), c.ptr<int32_t>("last"), c.ptr<int32_t>("acc"),
                       c.ptr<uint8_t>("ring"), c.ptr<int64_t>("log"),
                       reinterpret_cast<unsigned long long*>(c.ptr<int64_t>("log_count")), c.ptr<double>("rate"),
                       c.ptr<uint8_t>("silence"), c.ptr<int64_t>("seeds"), c.ptr<int64_t>("step"),
                       c.ptr<int32_t>("rowptr"), c.ptr<int32_t>("post"), c.ptr<int32_t>("count"), p);
  for (const char* name : {"v", "g", "last", "acc", "ring", "log", "log_count"}) c.save(name);
}

// A kernel that never ends (e.g. a loop over a corrupted BVH) would hang CI:
// after FLYCUDA_EMU_TIMEOUT seconds (default 300) the program says so and exits.
void on_alarm(int) {
  const char msg[] = "flycuda emu: watchdog: still running after FLYCUDA_EMU_TIMEOUT seconds (a kernel hangs?)\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  _exit(124);
}

const std::map<std::string, std::function<void(Case&)>>& ops() {
  static const std::map<std::string, std::function<void(Case&)>> table = {
      {"motion_to_ctrl", run_motion_to_ctrl},
      {"motion_to_ctrl_overlap", run_motion_to_ctrl_overlap},
      {"spline_to_ctrl", run_motion_to_ctrl},
      {"advance_step", run_advance_step},
      {"pool_ommatidia", run_pool_ommatidia},
      {"pool_quotients", run_pool_quotients},
      {"record", run_record},
      {"motion_at", run_motion_at},
      {"scatter_actions", run_scatter_actions},
      {"gather_columns", run_gather_columns},
      {"episode_step", run_episode_step},
      {"reset_worlds", run_reset_worlds},
      {"hybrid_step", run_hybrid_step},
      {"rule_step", run_rule_step},
      {"hybrid_senses", run_hybrid_senses},
      {"odor_intensity", run_odor_intensity},
      {"odor_plume", run_odor_plume},
      {"connectome_step", run_connectome_step},
      {"brain_step", run_brain_step},
      {"render_tiles", run_render_tiles},
  };
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: flycuda_emu CASE_DIR...\n";
    return 2;
  }
  std::signal(SIGALRM, on_alarm);
  const char* limit = std::getenv("FLYCUDA_EMU_TIMEOUT");
  alarm(limit ? static_cast<unsigned int>(std::atoi(limit)) : 300u);
  for (int i = 1; i < argc; ++i) {
    try {
      Case c{fs::path(argv[i])};
      auto it = ops().find(c.op);
      if (it == ops().end()) throw std::runtime_error("unknown op " + c.op);
      it->second(c);
      save_launch_log(c);
    } catch (const std::exception& e) {
      std::cerr << "flycuda_emu: " << argv[i] << ": " << e.what() << "\n";
      return 1;
    }
  }
  return 0;
}
