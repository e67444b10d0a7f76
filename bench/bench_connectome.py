"""flyvis's connectome-constrained network for F flies x 2 eyes: flycuda's ConnectomeNetwork
(flycuda.ops.connectome_step) against flyvis 1.2.0's own Network (its forward: a gather of every
edge's source, scatter_add_ by target), on the same parameters, interleaved round by round in one
run on the CPU; each side's peak memory measured in a process of its own (resident set growth
over the steps, after the set-up), and again after three times the steps (nothing may grow with
duration). On CUDA (no flyvis there): flycuda's network at --gpu-flies flies, its step captured in
a graph at 500 Hz (FlyGym 1.x's vision_refresh_rate), against torch's CSR SpMM (cuSPARSE) plus the
Euler step elementwise, also in a graph, interleaved; flies x network steps/s and the device memory.

    python bench/bench_connectome.py [--flies 1 4 16 64] [--steps 5] [--repeats 3]
                                     [--connectome PATH.json] [--gpu-flies 1024 4096] [--no-memory] [--no-results]

Needs flyvis for the CPU rows (the FlyGym lane: requirements-flyvis.txt); flycuda never imports it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch
from _results import append_results, format_table
from tqdm.auto import tqdm

from flycuda.vision import Connectome, ConnectomeNetwork

DT = 1 / 50  # flyvis' training step


def _flyvis_network(root: str):
    """flyvis's default Network on the CPU (its import sets torch's default device: pinned back)."""
    os.environ.setdefault("FLYVIS_ROOT_DIR", root)
    import flyvis  # noqa: PLC0415

    flyvis.device = torch.device("cpu")
    torch.set_default_device("cpu")
    from flyvis.network.network import Network  # noqa: PLC0415

    net = Network()
    net.eval()
    return net


def _stepper(side: str, fnet, connectome, flies: int, steps: int):
    """``steps`` steps of one side for 2 x flies eyes on a random movie, from its steady state:
    flycuda's network one step a call; flyvis's forward over the movie (its parameters' API built
    once per call, as its simulate does)."""
    B = 2 * flies
    movie = torch.rand(B, steps, 1, 721, generator=torch.Generator().manual_seed(flies))
    if side == "flycuda":
        params = {k: v.detach().clone() for k, v in fnet.state_dict().items()}
        ours = ConnectomeNetwork(connectome, params, B, dt=DT)
        ours.steady_state(seconds=4 * DT)

        def run():
            for t in range(steps):
                ours.step(movie[:, t, 0])
        return run
    with torch.no_grad():
        state = fnet.steady_state(t_pre=4 * DT, dt=DT, batch_size=B)

    def run():
        with torch.no_grad():
            fnet.stimulus.zero(B, steps)
            fnet.stimulus.add_input(movie)
            fnet.forward(fnet.stimulus(), DT, state=state)
    return run


def _rss_mib() -> float:
    """The resident set now (MiB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _trim() -> None:
    """Hands the C heap's free pages back to the system (glibc's malloc_trim), so that the resident
    set counts what is allocated next rather than reusing what flyvis's build left free."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figures only count less
        pass


def _peak_growth(fn) -> float:
    """The resident set's peak growth (MiB) while ``fn`` runs, sampled every 0.2 ms by a thread
    (torch's operations release the GIL; freed buffers leave the resident set)."""
    base, peak, done = _rss_mib(), [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mib())
            time.sleep(2e-4)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    fn()
    done.set()
    t.join()
    return max(peak[0], _rss_mib()) - base


def child(side: str, flies: int, steps: int, root: str) -> None:
    """In a process of its own: one side's resident set held after its set-up (tables, state) and
    its peak growth while running ``steps`` steps, then 4 x ``steps`` (printed as JSON)."""
    torch.set_num_threads(2)
    fnet, connectome = _flyvis_network(root), Connectome.build()
    _trim()
    before = _rss_mib()
    run = _stepper(side, fnet, connectome, flies, steps)
    _trim()
    held = _rss_mib() - before
    peak = _peak_growth(run)
    run = _stepper(side, fnet, connectome, flies, 4 * steps)
    _trim()
    print(json.dumps({"held": held, "peak_mib": held + peak, "peak_mib_4x": held + _peak_growth(run)}))


def memory(side: str, flies: int, steps: int, root: str) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", side, str(flies), str(steps), root],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_rows(flies_list, steps: int, repeats: int, root: str, measure_memory: bool = True) -> list[list]:
    torch.set_num_threads(2)
    fnet, connectome = _flyvis_network(root), Connectome.build()
    rows = []
    for flies in tqdm(flies_list, desc="bench_connectome"):
        ours, theirs = (_stepper(side, fnet, connectome, flies, steps) for side in ("flycuda", "flyvis"))
        got = {"flycuda": [], "flyvis": []}
        ours(), theirs()  # warm
        for _ in range(repeats):  # interleaved: this machine is noisy
            for name, fn in (("flycuda", ours), ("flyvis", theirs)):
                t0 = time.perf_counter()
                fn()
                got[name].append((time.perf_counter() - t0) / steps)
        s = {k: statistics.median(v) for k, v in got.items()}
        mem = {k: memory(k, flies, steps, root) if measure_memory else None for k in got}
        for name in ("flycuda", "flyvis"):
            rows.append([flies, 2 * flies, name, f"{1e3 * s[name]:.1f}", f"{flies / s[name]:.0f}",
                         *_memory_cells(mem, name), f"{s['flyvis'] / s[name]:.1f}x" if name == "flycuda" else "1x",
                         _memory_ratio(mem, name)])
    return rows


def _memory_cells(mem: dict, name: str) -> list[str]:
    m = mem[name]
    return [f"{m['peak_mib']:.0f}", f"{m['peak_mib_4x']:.0f}"] if m else ["-", "-"]


def _memory_ratio(mem: dict, name: str) -> str:
    if mem[name] is None:
        return "-"
    return f"1/{mem['flyvis']['peak_mib'] / max(mem[name]['peak_mib'], 1):.0f}" if name == "flycuda" else "1"


def spmm_step(net: ConnectomeNetwork, stimulus: torch.Tensor):
    """What a user would otherwise write: torch's CSR SpMM (cuSPARSE on CUDA) of the weights and
    the relu'd voltages, node-major [N, B], then flyvis's Euler step elementwise; the same tables
    as ``net``'s. Returns the step function (its two voltage buffers take turns)."""
    N, B = net.connectome.num_nodes, net.batch
    A = torch.sparse_csr_tensor(net.rowptr.long(), net.src.long(), net.weight, size=(N, N), check_invariants=False)
    inv = (1 / torch.clamp(net.tau, min=net.dt)).unsqueeze(1)
    bias, reps = net.bias.unsqueeze(1), net.input_nodes // net.columns
    v = [net.voltages.t().contiguous(), torch.empty(N, B, device=net.device)]
    x = torch.zeros(N, B, device=net.device)
    turn = [0]

    def step():
        now, nxt = v[turn[0]], v[1 - turn[0]]
        x[:net.input_nodes] = stimulus.t().repeat(reps, 1)
        s = torch.sparse.mm(A, torch.relu(now))
        torch.add(now, inv * (((bias - now) + s) + x) * net.dt, out=nxt)
        turn[0] ^= 1

    step.voltages = lambda: v[turn[0]].t()  # [B, N], as net.voltages (for a check)
    return step


def gpu_rows(flies_list, connectome_path: str | None, steps: int, repeats: int) -> list[list]:
    """flycuda's network on CUDA at 500 Hz, its step captured in a graph, against torch's CSR
    SpMM pipeline (:func:`spmm_step`, also captured), interleaved round by round; parameters of
    the connectome's shapes (flyvis's initial values need flyvis: any values time the same)."""
    from _timing import time_steps  # noqa: PLC0415

    c = Connectome.build(connectome_path)
    g = torch.Generator().manual_seed(0)
    params = {k: torch.rand(shape, generator=g) * 0.05 + 0.01 for k, shape in c.parameter_shapes().items()}
    params["edges_sign"] = torch.where(torch.rand(params["edges_sign"].shape, generator=g) > 0.5, 1.0, -1.0)
    rows = []
    for flies in flies_list:
        torch.cuda.reset_peak_memory_stats()
        net = ConnectomeNetwork(c, params, 2 * flies, dt=1 / 500, device="cuda")
        x = torch.rand(2 * flies, net.columns, device="cuda")
        mib = torch.cuda.max_memory_allocated() / 2**20
        cases = {"flycuda, graph replay (CUDA)": lambda net=net, x=x: net.step(x),
                 "torch CSR SpMM + Euler, graph replay": spmm_step(net, x)}
        times = {k: [] for k in cases}
        for _ in range(repeats):  # interleaved: one run of each per round
            for k, fn in cases.items():
                times[k].append(time_steps(fn, steps, "cuda", 1))
        med = {k: statistics.median(t) for k, t in times.items()}
        ours = med["flycuda, graph replay (CUDA)"]
        for k, us in med.items():
            rows.append([flies, 2 * flies, k, f"{us / 1e3:.3f}", f"{flies / (us * 1e-6):.0f}",
                         f"{mib:.0f} (device)" if k.startswith("flycuda") else "-", "-",
                         f"{us / ours:.2f}x" if k != "flycuda, graph replay (CUDA)" else "1", "-"])
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flies", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--connectome", default=None, help="flyvis's connectome file (default: the installed flyvis's)")
    ap.add_argument("--gpu-flies", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--no-memory", action="store_true", help="CPU: time only (no processes measuring memory)")
    ap.add_argument("--no-results", action="store_true")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child[0], int(a.child[1]), int(a.child[2]), a.child[3])
    cuda = torch.cuda.is_available()
    root = tempfile.mkdtemp(prefix="flyvis_root_")
    rows = gpu_rows(a.gpu_flies, a.connectome, 50, a.repeats) if cuda else cpu_rows(a.flies, a.steps, a.repeats, root, not a.no_memory)
    header = ["flies", "eyes", "network", "ms per step", "flies x steps/s", "peak MiB", "peak MiB (4x steps)",
              "speed vs flyvis (CUDA: its time / flycuda's)", "memory vs flyvis"]
    table = format_table(header, rows)
    print(table)
    if not a.no_results:
        what = "flycuda's network on CUDA at 500 Hz" if cuda else "flycuda's network against flyvis's own, interleaved"
        append_results(f"bench_connectome: flyvis's connectome network ({what})", "cuda" if cuda else "cpu", table,
                       notes=f"dt {'1/500' if cuda else '1/50'} s; peak MiB (CPU): what each side holds after its set-up "
                             "(tables, state) plus its resident set's peak growth while stepping (--steps steps; "
                             "then 4x as many), each side in its own process; CUDA: torch's peak device allocation")


if __name__ == "__main__":
    main()
