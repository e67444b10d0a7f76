"""The whole-brain model (Shiu et al. 2024) on a generated connectome of FlyWire's statistics:
flycuda.brain (B brains stepped at once by flycuda.ops.brain_step) against Brian2 running model.py's
own network (one brain, Brian2's default code target: Cython where it builds, as a user gets it),
interleaved round by round in one run, both with the same 200 neurons excited at 150 Hz. Prints the
wall time per simulated second, the factor of real time, the spikes, and flycuda's memory (the
connectivity held once; the state per brain). The published GPU rows (Eon Systems' fly-brain
timing_summary.csv, an RTX 4070 class GPU) are quoted beside them as anchors.

    python bench/bench_brain.py [--neurons 10000 139255] [--brains 1 32] [--duration 1.0]
                                [--full-duration 0.2] [--rounds 1] [--device cpu] [--no-brian2] [--no-results]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _results import append_results, format_table

from flycuda import brain

FULL = 139_255  # FlyWire v783's neurons
ANCHORS = [  # published: Eon Systems fly-brain, timing_summary.csv (an RTX 4070 class GPU), 1 s of model time
    ["GeNN (published)", "139,255", 1, "0.54 s"], ["GeNN (published)", "139,255", 32, "23.9 s"],
    ["NEST GPU (published)", "139,255", 1, "1.0 s"], ["Brian2 CPU (published)", "139,255", 1, "2.9 s"],
    ["PyTorch batched (published)", "139,255", 1, "9.8 s"], ["PyTorch batched (published)", "139,255", 32, "185.6 s"]]


def excited(c: brain.Connectome, k: int = 200, seed: int = 1) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).choice(c.N, k, replace=False))


def time_flycuda(c: brain.Connectome, B: int, steps: int, device: str) -> tuple[float, int, dict]:
    """Seconds for ``steps`` steps of B brains (after 10 warm-up steps), their spikes, the memory."""
    b = brain.Brains(c, B, device=device)  # its default log: a spike per neuron between drains (every 500 steps here:
    # ~100 spikes/s per neuron would overflow it; the benchmark's ~0.2 do not)
    b.set_rates(excited(c))
    b.step(10)
    b.spikes()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    spikes = 0
    for done in range(0, steps, 500):
        b.step(min(500, steps - done))
        spikes += len(b.spikes())
    sync()
    wall = time.perf_counter() - t0
    per_brain = sum(t.numel() * t.element_size() for t in (b.v, b.g, b.last, b.acc, b.rate, b.silence, b.ring,
                                                          b.log)) / B
    shared = sum(t.numel() * t.element_size() for t in (b.rowptr, b.post, b.count))
    return wall, spikes, {"per_brain_mb": per_brain / 2 ** 20, "shared_mb": shared / 2 ** 20}


def time_brian2(c: brain.Connectome, steps: int) -> tuple[float, int]:
    """Seconds for ``steps`` steps of model.py's network in Brian2 (built and warmed up first: its
    code generated and compiled), and its spikes."""
    import brian2 as b2  # noqa: PLC0415

    m = brain.Model()
    b2.start_scope()
    ns = dict(v_0=m.v_0 * b2.volt, v_rst=m.v_rst * b2.volt, v_th=m.v_th * b2.volt, t_mbr=m.t_mbr * b2.second,
              tau=m.tau * b2.second)
    eqs = """dv/dt = (v_0 - v + g) / t_mbr : volt (unless refractory)
             dg/dt = -g / tau : volt (unless refractory)
             rfc : second
             exc : 1"""
    neu = b2.NeuronGroup(c.N, eqs, method="linear", threshold="v > v_th", reset="v = v_rst; g = 0 * mV",
                         refractory="rfc", namespace=ns)
    neu.v, neu.g, neu.rfc = ns["v_0"], 0 * b2.volt, m.t_rfc * b2.second
    pre, post, count = c.edges()
    syn = b2.Synapses(neu, neu, "w : volt", on_pre="g += w", delay=m.t_dly * b2.second)
    syn.connect(i=pre, j=post)
    syn.w = count * m.w_syn * b2.volt
    # model.py's poi() makes one PoissonInput per excited neuron (200 objects, each its own subgroup and
    # code object: minutes of set-up); one PoissonInput whose weight is 0 off the excited set adds the
    # same events to the same neurons
    rfc = np.full(c.N, m.t_rfc)
    rfc[excited(c)] = 0.0
    exc = np.zeros(c.N)
    exc[excited(c)] = 1.0
    neu.rfc, neu.exc = rfc * b2.second, exc
    ns["w_poi"] = m.w_syn * m.f_poi * b2.volt
    poi = b2.PoissonInput(neu, "v", 1, m.r_poi * b2.Hz, weight="exc * w_poi")
    mon = b2.SpikeMonitor(neu)
    net = b2.Network(neu, syn, mon, poi)
    net.run(10 * m.dt * b2.second, namespace=ns)  # code generation and compilation
    n0 = mon.num_spikes
    t0 = time.perf_counter()
    net.run(steps * m.dt * b2.second, namespace=ns)
    return time.perf_counter() - t0, mon.num_spikes - n0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--neurons", type=int, nargs="+", default=[10_000, FULL])
    ap.add_argument("--brains", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--duration", type=float, default=1.0, help="simulated seconds per row below full scale")
    ap.add_argument("--full-duration", type=float, default=0.2, help="simulated seconds per row at full scale")
    ap.add_argument("--full-brains", type=int, nargs="+", default=None, help="brains at full scale (default: --brains; "
                    "the CPU: 1)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-brian2", action="store_true")
    ap.add_argument("--no-results", action="store_true")
    args = ap.parse_args()
    rows = []
    for n in args.neurons:
        c = brain.synthetic(n, seed=0)
        secs = args.full_duration if n == FULL else args.duration
        steps = int(round(secs / brain.Model().dt))
        batches = args.brains if n != FULL else (args.full_brains or (args.brains if args.device == "cuda" else [1]))
        for r in range(args.rounds):
            for B in batches:
                wall, spikes, mem = time_flycuda(c, B, steps, args.device)
                rows.append([f"flycuda.brain ({args.device})", f"{n:,}", f"{c.E:,}", B, f"{secs:g}",
                             f"{wall / secs:.2f} s", f"{secs * B / wall:.3f}", f"{spikes / B / secs:,.0f}",
                             f"{mem['shared_mb']:.0f} MB", f"{mem['per_brain_mb']:.1f} MB"])
                print(format_table(HEADER, rows[-1:]).splitlines()[-1], flush=True)
            if not args.no_brian2:
                wall, spikes = time_brian2(c, steps)
                rows.append(["Brian2 2.10 (CPU, its default target)", f"{n:,}", f"{c.E:,}", 1, f"{secs:g}",
                             f"{wall / secs:.2f} s", f"{secs / wall:.3f}", f"{spikes / secs:,.0f}", "", ""])
                print(format_table(HEADER, rows[-1:]).splitlines()[-1], flush=True)
    table = format_table(HEADER, rows + [[a[0], a[1], "~15 M", a[2], "1", a[3], "", "", "", ""] for a in ANCHORS])
    print(table)
    if not args.no_results:
        append_results("bench_brain: the whole-brain LIF model, flycuda.brain against Brian2", args.device, table,
                       notes="synthetic connectomes (flycuda.brain.synthetic: FlyWire v783's scale and rough "
                             "statistics), 200 neurons excited at 150 Hz; 'wall per sim s' is wall seconds per "
                             "simulated second for all the row's brains; the published rows are quoted anchors")


HEADER = ["simulator", "neurons", "connections", "brains", "sim s", "wall per sim s", "x real time (brain-s/s)",
          "spikes/s per brain", "connectivity", "state per brain"]

if __name__ == "__main__":
    main()
