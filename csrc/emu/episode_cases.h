// flycuda emu: the episode family's cases (csrc/kernels/episode.cuh), part of the
// driver emu_main.cpp (included inside its anonymous namespace, after Case). Each
// runs the launch template that csrc/cuda/episode.cu runs, with the plan check_*
// builds, which tests/csrc/test_emu.py writes as scalars named as the plan's fields. A
// strided tensor comes as its base buffer and `<name>_offset` (Case.strided); outputs
// are saved whole (out_<name>.npy).
#pragma once

template <typename T>
T* at_offset(Case& c, const std::string& name) {  // a strided tensor's first element
  const std::string key = name + "_offset";
  return c.arr(name).data<T>() + (c.scalars.count(key) ? c.i64(key) : 0);
}

void run_motion_at(Case& c) {
  k::MotionAtPlan p;
  p.W = c.i64("W"), p.D = c.i64("D"), p.out_s0 = c.i64("out_s0"), p.out_s1 = c.i64("out_s1");
  p.frames_per_step = c.f64("frames_per_step");
  p.loop = c.i64("loop") != 0;
  const int64_t* steps = c.arr("world_steps").data<int64_t>();
  float* out = at_offset<float>(c, "out");
  const Array& fr = c.arr("frames");
  const auto go = [&](const auto& frames) {
    if (c.has("offsets") && c.arr("offsets").descr == "<f8") {
      k::launch_motion_at(kLaunch, frames, steps, c.ptr<double>("offsets"), out, p);
    } else {
      k::launch_motion_at(kLaunch, frames, steps, c.ptr<float>("offsets"), out, p);
    }
  };
  if (fr.descr == "<f8") {
    go(flycuda::SplineFrames{c.arr("frames").data<double>(), fr.shape[0], fr.shape[1], fr.shape[3]});
  } else {
    go(flycuda::LinearFrames{c.arr("frames").data<float>(), fr.shape[0], fr.shape[1], fr.shape[2]});
  }
  c.save("out");
}

void run_scatter_actions(Case& c) {
  k::ScatterPlan p;
  p.W = c.i64("W"), p.A = c.i64("A"), p.nu = c.i64("nu");
  p.act_s0 = c.i64("actions_s0"), p.act_s1 = c.i64("actions_s1");
  p.ctrl_s0 = c.i64("ctrl_s0"), p.ctrl_s1 = c.i64("ctrl_s1");
  with_index_type(c.arr("act_ids"), [&](auto* tag) {
    using index_t = std::remove_pointer_t<decltype(tag)>;
    k::launch_scatter_actions(kLaunch, at_offset<float>(c, "actions"), c.arr("act_ids").data<index_t>(),
                              c.arr("action_map").data<float>(), at_offset<float>(c, "ctrl"), p);
  });
  c.save("ctrl");
}

void run_gather_columns(Case& c) {
  k::GatherPlan p;
  p.W = c.i64("W"), p.O = c.i64("O"), p.nsrc = c.i64("nsrc");
  p.out_s0 = c.i64("out_s0"), p.out_s1 = c.i64("out_s1");
  for (int64_t i = 0; i < p.nsrc; ++i) {
    const std::string s = "src" + std::to_string(i);
    p.src[i] = at_offset<float>(c, s);
    p.src_s0[i] = c.i64(s + "_s0"), p.src_s1[i] = c.i64(s + "_s1"), p.src_n[i] = c.i64(s + "_n");
  }
  k::launch_gather_columns(kLaunch, c.arr("columns").data<int32_t>(), at_offset<float>(c, "out"), p);
  c.save("out");
}

void run_episode_step(Case& c) {
  k::EpisodePlan p;
  p.W = c.i64("W"), p.nq = c.i64("nq"), p.nv = c.i64("nv");
  p.qpos_s0 = c.i64("qpos_s0"), p.qpos_s1 = c.i64("qpos_s1"), p.qvel_s0 = c.i64("qvel_s0");
  p.qvel_s1 = c.i64("qvel_s1"), p.root_adr = c.i64("root_adr"), p.max_steps = c.i64("max_steps");
  p.min_height = static_cast<float>(c.f64("min_height")), p.max_height = static_cast<float>(c.f64("max_height"));
  p.min_up = static_cast<float>(c.f64("min_up"));
  k::launch_episode_step(kLaunch, c.arr("world_steps").data<int64_t>(), at_offset<float>(c, "qpos"),
                         at_offset<float>(c, "qvel"), c.arr("terminated").data<bool>(), c.arr("truncated").data<bool>(),
                         p);
  for (const char* name : {"world_steps", "terminated", "truncated"}) c.save(name);
}

void run_reset_worlds(Case& c) {
  k::ResetPlan p;
  p.W = c.i64("W"), p.K = c.i64("K"), p.nq = c.i64("nq"), p.nv = c.i64("nv");
  p.qpos_s0 = c.i64("qpos_s0"), p.qpos_s1 = c.i64("qpos_s1"), p.qvel_s0 = c.i64("qvel_s0");
  p.qvel_s1 = c.i64("qvel_s1");
  p.seed = static_cast<uint64_t>(c.i64("seed"));
  k::launch_reset_worlds(kLaunch, c.arr("done").data<bool>(), c.arr("init_qpos").data<float>(),
                         c.arr("init_qvel").data<float>(), c.arr("init_frames").data<double>(),
                         c.arr("qpos_noise").data<float>(), c.arr("qvel_noise").data<float>(),
                         at_offset<float>(c, "qpos"), at_offset<float>(c, "qvel"), c.arr("world_steps").data<int64_t>(),
                         c.arr("episodes").data<int64_t>(), c.arr("offsets").data<double>(), p);
  for (const char* name : {"qpos", "qvel", "world_steps", "episodes", "offsets"}) c.save(name);
}
