"""Benchmark: the replay loop, four ways, same model, motion and device, side by side.

  naive     host loop: ctrl set from a host (numpy) buffer each step, eager mjw.step
  flygym    the FlyGym-tutorial pattern: Warp kernels index a pre-expanded
            [W, steps, D] buffer with a device counter; one step per graph (CUDA).
            On NeuroMechFly it is FlyGym's own loop: its kernels, its resampled
            Spotlight targets, GPUSimulation.set_actuator_inputs and step.
  flycuda   flycuda on the recording itself (hexapod: motion_to_ctrl; NeuroMechFly:
            spline_to_ctrl, FlyGym's cubic resampling on the device), advance=1;
            one step per graph
  flycudaK  the same with K steps per graph launch

Models: hexapod (built-in, tripod gait), and with FlyGym installed neuromechfly
and neuromechfly-capsules (FlyGym's tutorial model with the Spotlight clip).
On CPU (Warp's CPU device) there are no graphs: every variant steps eagerly.
Reported: x real time (world-seconds simulated per wall second), world-steps/s,
the ratio to the flygym pattern, and the targets' device memory; then that memory
for 1000 and 8192 worlds replaying 2 s (computed from the arrays' shapes).

    python bench/bench_replay.py                          # 100 1000 4096 worlds on CUDA, 4 on CPU
    python bench/bench_replay.py --device cpu --worlds 4 --steps 200 --models hexapod neuromechfly
"""

import argparse
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _results import append_results, format_table  # noqa: E402

import flycuda  # noqa: E402
from flycuda.sim import (
    Sim,  # noqa: E402
    streams,  # noqa: E402
)
from flycuda.sim.motion import snippet_offsets, tripod_gait  # noqa: E402

MODELS = ["hexapod", "neuromechfly", "neuromechfly-capsules"]


def _sync(sim):
    if sim.device.type == "cuda":
        import warp as wp

        wp.synchronize_device(sim.wp_device)


def _run(sim, step_fn, steps, graph_k):
    """Wall seconds for `steps` steps; graph_k > 0 captures graph_k steps per launch (CUDA)."""
    step_fn()  # warm-up / JIT
    _sync(sim)
    if sim.device.type == "cuda" and graph_k:
        graph = streams.capture_graph(step_fn, sim.wp_device, repeat=graph_k)
        launches = steps // graph_k
        _sync(sim)
        t0 = time.perf_counter()
        for _ in range(launches):
            streams.launch_graph(graph)
        _sync(sim)
        return (time.perf_counter() - t0) * steps / (launches * graph_k)
    t0 = time.perf_counter()
    for _ in range(steps):
        step_fn()
    _sync(sim)
    return time.perf_counter() - t0


def _hexapod_case(W, device, steps, snippet):
    """(sim, flycuda glue, expanded buffer [W, n, D] or None, targets bytes, act ids)."""
    motion = tripod_gait(2.0)
    sim = Sim.build(None, W, device=device)
    act = sim.actuator_ids(motion.dof_names)
    offs = snippet_offsets(motion, W, snippet).to(sim.device)
    fps_step = motion.fps * sim.timestep
    buf = motion.as_buffer().to(sim.device)
    step = flycuda.new_step_counter(sim.device)
    ctrl = sim.view("ctrl")

    def glue():
        flycuda.motion_to_ctrl(buf, step, ctrl, act, offsets=offs, frames_per_step=fps_step, mode="loop",
                               advance=1)

    n_exp = steps + 2  # the pre-expanded [W, steps, D] buffer of the usual practice (flygym/naive)
    f = offs.cpu()[:, None] + torch.arange(n_exp, dtype=torch.float64)[None, :] * fps_step
    i0 = f.floor().long().clamp(max=motion.num_frames - 1)
    expanded = motion.angles[i0].to(sim.device)  # [W, n_exp, D] (nearest-lower frame)
    return sim, glue, expanded, buf.numel() * 4 + offs.numel() * 8, act, None


def _flygym_case(model, W, device, steps):
    """NeuroMechFly as FlyGym's tutorial builds it; flycuda evaluates the clip's spline."""
    from flycuda import flygym as fg

    setup = fg.Setup(model, W, device=device)
    sim, motion = setup.sim, fg.spotlight(setup.fly)
    coeffs = motion.spline().to(sim.device)
    offs = fg.tutorial_offsets(W, steps + 2).to(sim.device)
    step = flycuda.new_step_counter(sim.device)
    ctrl, act, fps_step = sim.view("ctrl"), setup.act_ids, motion.fps * sim.timestep

    def glue():
        flycuda.spline_to_ctrl(coeffs, step, ctrl, act, offsets=offs, frames_per_step=fps_step, advance=1)

    expanded = torch.from_numpy(fg.tutorial_buffer(setup.fly, W, steps + 2)).to(sim.device)
    return sim, glue, expanded, coeffs.numel() * 8 + offs.numel() * 8, act, setup


def bench_worlds(model, W, device, steps, K, snippet, repeats):
    import warp as wp

    out = {}
    if model == "hexapod":
        sim, glue, expanded, targets_bytes, act, setup = _hexapod_case(W, device, steps, snippet)
    else:
        sim, glue, expanded, targets_bytes, act, setup = _flygym_case(model, W, device, steps)
    ctrl = sim.view("ctrl")
    n_exp = expanded.shape[1]

    # (1) naive: host buffer, host counter.
    host = expanded.cpu().numpy()
    act_l = act.long()
    counter = [0]

    def naive():
        ctrl[:, act_l] = torch.from_numpy(host[:, counter[0] % n_exp]).to(sim.device)
        counter[0] += 1
        sim.step()

    # (2) flygym: Warp kernels + device counter over the expanded buffer (FlyGym's own
    # set_actuator_inputs and step on NeuroMechFly).
    from _warp_pattern import make_flygym_step, make_step

    if setup is None:
        flygym_glue = make_step(wp.from_torch(expanded), wp.from_torch(act), sim.data.ctrl, sim.wp_device)
        advance_physics = sim.step
    else:
        flygym_glue = make_flygym_step(setup, wp.from_torch(expanded))
        advance_physics = setup.gpu_sim.step

    def flygym():
        flygym_glue()
        advance_physics()

    # (3)/(4) flycuda on the recording itself.
    def fly():
        glue()
        sim.step()

    variants = [("naive", naive, 0), ("flygym", flygym, 1), ("flycuda", fly, 1), (f"flycuda K={K}", fly, K)]
    with streams.shared_stream(sim.device), wp.ScopedDevice(sim.wp_device):
        for name, fn, k in variants:
            if sim.device.type != "cuda" and name.startswith("flycuda K"):
                continue  # no graphs on CPU: identical to flycuda
            out[name] = statistics.median(_run(sim, fn, steps, k) for _ in range(repeats))
    return out, expanded.numel() * 4, targets_bytes, sim.timestep


def memory_rows(models):
    """Targets' device memory for 1000 and 8192 worlds replaying 2 s at FlyGym's 0.1 ms:
    the pre-expanded float32 [W, steps, 42] buffer vs flycuda's pieces + offsets."""
    rows, clip_bytes = [], None
    for model in models:
        if model == "hexapod":
            T, D, kind = tripod_gait(2.0).num_frames, 42, "motion_to_ctrl: float32 [1, T, 42]"
            ours_fixed = T * D * 4
        else:  # both NeuroMechFly variants replay the same clip: its pieces are made once
            if clip_bytes is None:
                from flycuda import flygym as fg

                fly = fg.neuromechfly()[0] if fg.available() else fg.Setup(model, 1).fly  # or frozen
                clip_bytes = fg.spotlight(fly).spline().numel() * 8
            ours_fixed, kind = clip_bytes, "spline_to_ctrl: float64 [1, 660, 4, 42]"
        for W in (1000, 8192):
            expanded = W * int(round(2.0 / 1e-4)) * 42 * 4
            ours = ours_fixed + W * 8
            rows.append([model, W, f"{expanded / 2**30:.2f} GiB", f"{ours / 2**20:.2f} MiB",
                         f"{expanded / ours:,.0f}x", kind])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if flycuda.cuda_ready() else "cpu", choices=["cpu", "cuda"])
    p.add_argument("--models", nargs="+", default=None, choices=MODELS,
                   help="default: hexapod, plus both NeuroMechFly variants when FlyGym is installed")
    p.add_argument("--worlds", type=int, nargs="+", default=None)
    p.add_argument("--steps", type=int, default=None, help="steps per run (default 1000 CUDA, 200 CPU)")
    p.add_argument("--K", type=int, default=10, help="steps per graph launch for flycuda K")
    p.add_argument("--snippet", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args(argv)
    from flycuda import flygym as fg

    models = args.models or (MODELS if fg.available() else ["hexapod"])
    if any(not fg.can_build(m) for m in models if m != "hexapod"):
        fg.require()  # one clear line when FlyGym is missing (and nothing is frozen: flycuda.flygym.frozen)
    worlds = args.worlds or ([100, 1000, 4096] if args.device == "cuda" else [4])
    steps = args.steps or (1000 if args.device == "cuda" else 200)
    rows = []
    for model in models:
        for W in worlds:
            res, exp_bytes, tgt_bytes, dt = bench_worlds(model, W, args.device, steps, args.K, args.snippet,
                                                         args.repeats)
            base = res.get("flygym")
            for name, t in res.items():
                xrt = W * steps * dt / t
                mem = f"{exp_bytes / 2**20:.2f} MiB" if name in ("naive", "flygym") else f"{tgt_bytes / 2**20:.2f} MiB"
                rows.append([model, W, name, f"{xrt:.4f}", f"{W * steps / t:,.0f}", f"{base / t:.2f}x", mem])
            print(f"{model} W={W} done", flush=True)
    table = format_table(["model", "worlds", "variant", "x real time", "world-steps/s", "vs flygym",
                          "targets memory"], rows)
    mem = format_table(["model", "worlds x 2 s", "pre-expanded (flygym)", "flycuda", "ratio", "flycuda holds"],
                       memory_rows(models))
    print(table + "\n\n" + mem)
    if not args.no_record:
        append_results(f"bench_replay: replay loop ({', '.join(models)})", args.device, table + "\n\n" + mem,
                       notes=f"{steps} steps per run, median of {args.repeats}; hexapod snippet {args.snippet} s; "
                             "NeuroMechFly: the tutorial's per-world snippets of the Spotlight clip, cubic; "
                             + ("graphs on CUDA" if args.device == "cuda" else "eager on Warp's CPU device")
                             + "; memory table computed from the arrays' shapes")


if __name__ == "__main__":
    main()
