// flycuda: every operator schema, in one place.
//
// Each kernel family registers its own CPU impl (<family>.cpp) and CUDA impl
// (<family>.cu) with STABLE_TORCH_LIBRARY_IMPL, so a CPU-only build simply leaves the
// .cu files out. Importing flycuda._C runs these static registrations; the
// module itself is empty (no pybind), following pytorch/extension-cpp. Only
// Python's limited API is used (Py_LIMITED_API, setup.py): one abi3 binary.
#include <Python.h>

#include "common.h"

extern "C" {
/* Creates a dummy empty _C module that can be imported from Python (the one symbol
   the extension exports: everything else is built with -fvisibility=hidden). */
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT, "_C", /* name of module */
      nullptr,                     /* module documentation */
      -1,                          /* size of per-interpreter state */
      nullptr,                     /* methods */
  };
  return PyModule_Create(&module_def);
}
}

FLYCUDA_LIBRARY(m) {
  // ctrl[w, act_ids[d]] = motion[m(w), f(w), d] interpolated at the frame
  // f(w) = offsets[w] + step[0] * frames_per_step; then step += advance.
  // Argument names are the wrappers' (flycuda/ops/__init__.py; tests/csrc/test_launch_plan.py
  // holds them equal), but for `frame_mode` (the wrappers' `mode`): torch's
  // dispatch to modes (redirect_to_mode) takes a keyword `mode` of its own, and an
  // op argument of that name breaks torch.compile's AOT dispatch.
  m.def(
      "motion_to_ctrl(Tensor motion, Tensor(a!) step, Tensor(b!) ctrl, "
      "Tensor act_ids, Tensor? offsets, float frames_per_step, str frame_mode, "
      "int advance) -> ()");
  // The same with FlyGym's cubic resampling: coeffs float64 [M, T, 4, D] holds
  // each frame's cubic piece (flycuda.spline_coeffs), evaluated at f(w).
  m.def(
      "spline_to_ctrl(Tensor coeffs, Tensor(a!) step, Tensor(b!) ctrl, "
      "Tensor act_ids, Tensor? offsets, float frames_per_step, str frame_mode, "
      "int advance) -> ()");
  // step[0] += n, on the device.
  m.def("advance_step(Tensor(a!) step, int n) -> ()");
  // FlyGym's compound-eye readouts from eye images (Retina.fisheye_image_to_hex_pxls):
  // readouts[s, e, o, omm_column[o]] = float32(sum_j float64(pixels[s, e, omm_pixels[j],
  // omm_channel[o]]) / omm_count[o] / 255), j over ommatidium o's CSR entries
  // omm_ptr[o]..omm_ptr[o+1] in order; the other column 0. See
  // csrc/kernels/pool_ommatidia.cuh and flycuda/vision/retina.py (the maps).
  m.def(
      "pool_ommatidia(Tensor pixels, Tensor omm_ptr, Tensor omm_pixels, Tensor omm_channel, "
      "Tensor omm_column, Tensor omm_count, Tensor(a!) readouts) -> ()");
  // history[w, step // every, d] = qpos[w, adrs[d]] when step % every == 0.
  m.def(
      "record_qpos(Tensor qpos, Tensor adrs, Tensor(a!) history, Tensor step, "
      "int every) -> ()");
  // The same into a ring of B chunks of C rows, any source columns:
  // chunks[(k / C) % B, w, k % C, d] = source[w, columns[d]], k = step // every,
  // when step % every == 0 (flycuda.recording streams the chunks out).
  m.def(
      "record_chunk(Tensor source, Tensor columns, Tensor(a!) chunks, Tensor step, "
      "int every) -> ()");
  // The episode family (flycuda.env's step; csrc/kernels/episode.cuh):
  // out[w, d] = frames at world w's own counter world_steps[w] (motion_to_ctrl's or
  // spline_to_ctrl's value at that step, by frames' dtype: float32 [M, T, D] linear,
  // float64 [M, T, 4, D] cubic). `frame_mode` as in motion_to_ctrl.
  m.def(
      "motion_at(Tensor frames, Tensor world_steps, Tensor(a!) out, Tensor? offsets, "
      "float frames_per_step, str frame_mode) -> ()");
  // ctrl[w, act_ids[a]] = clamp(actions[w, a] * scale[a] + offset[a], low[a], high[a]),
  // action_map = [scale; offset; low; high] float32 [4, A].
  m.def("scatter_actions(Tensor actions, Tensor act_ids, Tensor action_map, Tensor(a!) ctrl) -> ()");
  // out[w, o] = sources[columns[o, 0]][w, columns[o, 1]] (1 to 8 float32 [W, N_k] sources).
  m.def("gather_columns(Tensor[] sources, Tensor columns, Tensor(a!) out) -> ()");
  // world_steps[w] += 1; terminated[w] = non-finite qpos/qvel, or the free joint at root_adr
  // out of [min_height, max_height] or tilted below min_up; truncated[w] = world_steps[w] >= max_steps.
  m.def(
      "episode_step(Tensor(a!) world_steps, Tensor qpos, Tensor qvel, Tensor(b!) terminated, "
      "Tensor(c!) truncated, int root_adr, float min_height, float max_height, float min_up, "
      "int max_steps) -> ()");
  // For every world with done[w]: one of K initial states (hash of seed, world, episode)
  // plus seeded noise into qpos/qvel, world_steps[w] = 0, episodes[w] += 1, offsets[w] = its frame.
  m.def(
      "reset_worlds(Tensor done, Tensor init_qpos, Tensor init_qvel, Tensor init_frames, "
      "Tensor qpos_noise, Tensor qvel_noise, int seed, Tensor(a!) qpos, Tensor(b!) qvel, "
      "Tensor(c!) world_steps, Tensor(d!) episodes, Tensor(e!) offsets) -> ()");
  // FlyGym's walking controllers (flygym_demo.complex_terrain), one world per thread
  // (csrc/kernels/hybrid_step.cuh): the drives, the sensory inputs and params (float64,
  // flycuda.ops.hybrid_params) advance state [W, 5, 6] and persistence [W, 6] by one step and
  // write the 42 joint angles and 6 adhesions into ctrl[w, act_ids[j]].
  m.def(
      "hybrid_step(Tensor drive, Tensor thorax_z, Tensor tarsus5_z, Tensor stumbling_forces, Tensor heading, "
      "Tensor params, Tensor(a!) state, Tensor(b!) persistence, Tensor act_ids, Tensor(c!) ctrl) -> ()");
  // FlyGym's rule-based walking controller (Walknet's rules over the preprogrammed steps), one
  // world per thread (csrc/kernels/rule_step.cuh): params (flycuda.ops.hybrid_params, no swing
  // extension) and rules (flycuda.ops.rule_params) advance state [W, 5, 6] and each world's
  // MT19937 stream rng [W, 626] by one step and write 42 angles and 6 adhesions into ctrl.
  m.def("rule_step(Tensor params, Tensor rules, Tensor(a!) state, Tensor(b!) rng, Tensor act_ids, Tensor(c!) ctrl) -> ()");
  // The sensory inputs of FlyGym's hybrid controllers, from MuJoCo Warp's Data on the device
  // (csrc/kernels/hybrid_senses.cuh): thorax and tarsus5 heights and the heading from xpos/xmat
  // at body_ids; the ground's force on each leg's tibia, tarsus1 and tarsus2 from the contacts
  // (flycuda.ops.launch_plan.CONTACT_FIELDS; geom_segment marks the segments' and ground's geoms).
  m.def(
      "hybrid_senses(Tensor xpos, Tensor xmat, Tensor body_ids, Tensor[] contacts, Tensor geom_segment, int cone, "
      "Tensor(a!) thorax_z, Tensor(b!) tarsus5_z, Tensor(c!) stumbling_forces, Tensor(d!) heading) -> ()");
  // Every world's odor at its sensors (csrc/kernels/odor_intensity.cuh): out[w, k, s] =
  // sum_n peaks[(w,) n, k] f(sensors[w, s] - sources[w, n]) in float64, the sources in order;
  // f: field 'power' |r| ** -exponent (FlyGym 1.x's default), or 'advection_diffusion' the
  // steady plume of cobar-2026 with each world's wind [W, 2] (None: still air).
  m.def(
      "odor_intensity(Tensor sources, Tensor peaks, Tensor sensors, Tensor(a!) out, str field, float exponent, "
      "Tensor? wind, float diffusivity, float decay) -> ()");
  // One Euler step of flyvis's connectome-constrained network for B eyes
  // (csrc/kernels/connectome_step.cuh): out[b, n] = v + (1 / max(tau, dt)) ((-v + bias) + s + x) dt,
  // s the sum over node n's incoming edges (CSR rowptr/src/weight, in order) of weight *
  // relu(v[b, src]), x = stimulus[b, n % C] for the first input_nodes nodes.
  m.def(
      "connectome_step(Tensor v, Tensor stimulus, Tensor rowptr, Tensor src, Tensor weight, Tensor bias, Tensor tau, "
      "Tensor(a!) out, float dt, int input_nodes) -> ()");
  // One 0.1 ms step of the FlyWire whole-brain LIF model for B brains over one connectivity
  // (csrc/kernels/brain_step.cuh, Brian2's schedule): the spikes of step - delay delivered (the
  // presynaptic CSR rowptr/post/count, ring flags cleared), every neuron's exact linear update,
  // threshold, synaptic and Poisson input, reset; the spikes flagged in ring and logged.
  m.def(
      "brain_step(Tensor(a!) v, Tensor(b!) g, Tensor(c!) last, Tensor(d!) acc, Tensor(e!) ring, Tensor(f!) log, "
      "Tensor(g!) log_count, Tensor rate, Tensor silence, Tensor seeds, Tensor step, Tensor rowptr, Tensor post, "
      "Tensor count, float[] consts, int refractory, int delay) -> ()");
  // A replayed odor plume at every world's sensors (csrc/kernels/odor_plume.cuh): out[w, s] = the
  // grid [T, X, Y(, Z)] (node i at origin + i * spacing, frame t at t / fps) read at sensors[w, s]
  // bilinearly (trilinearly) and at time[w] linearly, in float64; NaN outside the grid; the
  // time clamped to the recording or looped (time_mode).
  m.def(
      "odor_plume(Tensor plume, Tensor sensors, Tensor time, Tensor(a!) out, float[] origin, float[] spacing, "
      "float fps, str time_mode) -> ()");
  // Ray-cast every selected world's cameras into RGB tiles (or a mosaic), planar
  // depth and geom-id segmentation: scene = flycuda.ops.scene_layout.Scene.FIELDS in order,
  // pixels = pixel ids to cast (empty: all); see csrc/kernels/render_tiles.cuh.
  m.def(
      "render_tiles(Tensor geom_xpos, Tensor geom_xmat, Tensor cam_pos, Tensor cam_mat, "
      "Tensor worlds, Tensor[] scene, float[] fovy, float zfar, int samples, bool shadows, "
      "int height, int width, int mosaic_cols, Tensor pixels, bool check, "
      "Tensor(a!) rgb, Tensor(b!) depth, Tensor(c!) seg, Tensor(d!) top_boxes, "
      "Tensor(e!) timers) -> ()");
}
