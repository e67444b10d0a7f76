"""FlyGym's hybrid turning controller and its rule-based controller for W worlds: flycuda.control's
batched twins (one call for all worlds) against W of FlyGym's own instances stepped from Python
(what a user of GPUSimulation runs today), interleaved in one run, fed the same inputs. Needs
FlyGym (the FlyGym lane) for those rows. On CUDA it adds the ops alone (hybrid_step, rule_step)
captured in a graph and replayed, timed with CUDA events; without FlyGym those rows are all it
prints (gpu-check).

    python bench/bench_control.py [--worlds 64] [--steps 300] [--repeats 3] [--device cpu] [--no-results]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np
import torch
from _results import append_results, format_table
from _timing import time_steps
from tqdm.auto import tqdm

DT = 1e-4


def inputs(rng: np.random.Generator, W: int):
    """Observations of standing flies (tarsi 0.9 mm below the thorax, small ground forces)."""
    thorax = 1.2 + 0.01 * rng.standard_normal(W)
    tarsi = 0.3 + 0.02 * rng.standard_normal((W, 6))
    forces = 0.5 * rng.standard_normal((W, 6, 3, 3))
    heading = np.tile([1.0, 0.0, 0.0], (W, 1))
    return thorax, tarsi, forces, heading


def timed(fn, device: str = "cpu") -> float:
    t0 = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def run_flycuda(ctrl, drive, obs, device) -> float:
    args = [torch.as_tensor(a, device=device) for a in (drive, *obs)]
    return timed(lambda: ctrl.step(*args), device)


def run_flygym(ctrls, drive, obs) -> float:
    from flygym_demo.complex_terrain import HybridControllerObservation

    thorax, tarsi, forces, heading = obs
    return timed(lambda: [c.step(drive[w], HybridControllerObservation(float(thorax[w]), tarsi[w], forces[w],
                                                                        heading[w])) for w, c in enumerate(ctrls)])


def rule_rows(W: int, steps: int, repeats: int, device: str) -> list[list]:
    """The rule-based controller: flycuda's RuleBasedController (rule_step, one launch) against
    W of FlyGym's, interleaved step by step."""
    from flygym_demo.complex_terrain.rule_based_controller import RuleBasedController as FlyGymRules

    from flycuda.control import RuleBasedController

    ours = RuleBasedController(W, DT, device=device, seed=0)
    theirs = [FlyGymRules(timestep=DT, seed=w) for w in range(W)]
    t_ours, t_theirs = [], []
    for _ in tqdm(range(repeats), desc="repeats (rules)", leave=False):
        a = b = 0.0
        for _ in range(steps):
            a += timed(ours.step, device)
            b += timed(lambda: [c.step() for c in theirs])
        t_ours.append(a / steps)
        t_theirs.append(b / steps)
    ours_s, theirs_s = min(t_ours), min(t_theirs)
    return [["flycuda.control.RuleBasedController (rule_step, one launch)", W, f"{ours_s * 1e3:.3f}",
             f"{W / ours_s:,.0f}", f"{theirs_s / ours_s:.1f}x"],
            ["FlyGym RuleBasedController x W", W, f"{theirs_s * 1e3:.3f}", f"{W / theirs_s:,.0f}", "1.0x"]]


def graph_rows(W: int, steps: int, repeats: int, device: str) -> list[list]:
    """The ops alone on CUDA: one step of each controller captured in a graph, replayed ``steps``
    times (standing flies' inputs, fixed; the state advances as in a run)."""
    from flycuda.control import HybridTurningController, RuleBasedController
    from flycuda.ops.walking import hybrid_step, rule_step

    rows = []
    hyb = HybridTurningController(W, DT, device=device, seed=0)
    drive = torch.rand(W, 2, dtype=torch.float64, device=device)
    obs = [torch.as_tensor(a, device=device) for a in inputs(np.random.default_rng(1), W)]
    us = time_steps(lambda: hybrid_step(drive, *obs, hyb.op_params, hyb.state, hyb.persistence, hyb._ids,
                                        hyb._out), steps, device, repeats)
    rows.append(["hybrid_step (turning), graph replay", W, f"{us / 1e3:.4f}", f"{W / us * 1e6:,.0f}", ""])
    rules = RuleBasedController(W, DT, device=device, seed=0)
    us = time_steps(lambda: rule_step(rules.op_params, rules.rules, rules.state, rules.rng, rules._ids, rules._out),
                    steps, device, repeats)
    rows.append(["rule_step, graph replay", W, f"{us / 1e3:.4f}", f"{W / us * 1e6:,.0f}", ""])
    return rows


def flygym_rows(W: int, steps: int, repeats: int, device: str) -> list[list]:
    """Both controllers against FlyGym's, interleaved step by step (needs FlyGym)."""
    from flygym_demo.complex_terrain import HybridTurningController as FlyGymTurning
    from flygym_demo.complex_terrain import make_tripod_cpg_network

    from flycuda.control import HybridTurningController

    rng = np.random.default_rng(0)
    ours = HybridTurningController(W, DT, device=device, seed=0)
    theirs = [FlyGymTurning(DT, cpg_network=make_tripod_cpg_network(DT, seed=w)) for w in range(W)]
    t_ours, t_theirs = [], []
    for _ in tqdm(range(repeats), desc="repeats", leave=False):
        a = b = 0.0
        for _ in range(steps):  # interleaved step by step: the machine's noise hits both alike
            drive, obs = rng.uniform(-1, 1, (W, 2)), inputs(rng, W)
            a += run_flycuda(ours, drive, obs, device)
            b += run_flygym(theirs, drive, obs)
        t_ours.append(a / steps)
        t_theirs.append(b / steps)
    ours_s, theirs_s = min(t_ours), min(t_theirs)
    rows = [["flycuda.control (hybrid_step, one launch)", W, f"{ours_s * 1e3:.3f}", f"{W / ours_s:,.0f}",
             f"{theirs_s / ours_s:.1f}x"],
            ["FlyGym HybridTurningController x W", W, f"{theirs_s * 1e3:.3f}", f"{W / theirs_s:,.0f}", "1.0x"]]
    return rows + rule_rows(W, steps, repeats, device)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300, help="controller steps per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-results", action="store_true", help="print only (no row in bench/RESULTS.md)")
    args = ap.parse_args(argv)
    has_flygym = importlib.util.find_spec("flygym_demo") is not None
    cuda = args.device.startswith("cuda")
    if not (has_flygym or cuda):
        sys.exit("bench_control: FlyGym is not installed (the FlyGym lane), and on CPU there is nothing else to time")
    W, rows = args.worlds, []
    if has_flygym:
        rows += flygym_rows(W, args.steps, args.repeats, args.device)
    if cuda:
        rows += graph_rows(W, args.steps, args.repeats, args.device)
    table = format_table(["controller", "worlds", "ms per step", "world-steps/s", "vs FlyGym"], rows)
    print(table)
    if not args.no_results:
        append_results("bench_control: FlyGym's hybrid turning and rule-based controllers for W worlds", args.device,
                       table,
                       notes=f"FlyGym rows: best of {args.repeats} repeats of {args.steps} steps, interleaved step by "
                             "step, same inputs; flycuda's time there includes the class's input checks and float64 "
                             "conversions. Graph replay rows (CUDA): the op alone, median of the repeats")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
