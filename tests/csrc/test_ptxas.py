"""ptxas budgets: every kernel of csrc/kernels/, compiled for sm_90 with nvcc (no GPU needed).

The kernels are compiled from their own headers (one probe file that instantiates
every kernel the launchers launch) with the extension's device flags
(flycuda/_buildcfg.py NVCC_FLAGS) and ``-Xptxas -v --resource-usage``. The test
fails on any spill in any kernel, and on the budgets below: the per-step glue
kernels (motion_to_ctrl, spline_to_ctrl: the same template; record_kernel,
which serves record_qpos and record_chunk; advance_step; pool_ommatidia; the episode
family of flycuda.env) must fit in 32 registers with no stack frame, so that they never
limit occupancy (Hopper: 65,536 registers per SM, 2048 threads). The renderer's
kernel must fit in 72 registers and 256 bytes of stack (7 blocks of 128 threads per
SM; the traversal's int32 stack and the pixel's parked state in local memory), its
refit in 48 registers with no stack; the timed variant (in-kernel stage timers, a
diagnostic) in 96 registers and the same stack. FlyGym's walking controllers (hybrid_step,
one thread per leg) in 80 registers and 160 bytes of stack. Static shared memory: none for the
glue kernels; the pixel kernels' per-block culling (2 KiB of flags + 3 KiB for the
pixel rectangle's reduction) at most 5.5 KiB, the refit's level-parallel unions
(256 nodes' boxes + heights) at most 13.5 KiB: small enough for 16 blocks per SM.

``python tests/csrc/test_ptxas.py`` prints the table (bench/RESULTS.md holds a copy).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("_flycuda_buildcfg", os.path.join(ROOT, "flycuda", "_buildcfg.py"))
cfg = importlib.util.module_from_spec(_spec)  # by path: no torch, no extension needed
_spec.loader.exec_module(cfg)

ARCH = "sm_90"
REG_BUDGET = 32

# Every instantiation a launcher can launch: (kernel family, C++ expression of the kernel).
M2C = "flycuda::kernels::motion_to_ctrl_kernel<{idx}, flycuda::{frames}, {index}, {offset}>"
KERNELS = [("motion_to_ctrl" if frames == "LinearFrames" else "spline_to_ctrl",
            M2C.format(idx=idx, frames=frames, index=index, offset=offset))
           for frames in ("LinearFrames", "SplineFrames") for idx in ("int32_t", "int64_t")
           for index in ("int32_t", "int64_t") for offset in ("float", "double")]
KERNELS += [("record", f"flycuda::kernels::record_kernel<{index}>") for index in ("int32_t", "int64_t")]
KERNELS += [("advance_step", "flycuda::kernels::advance_step_kernel"),
            ("pool_ommatidia", "flycuda::kernels::pool_ommatidia_kernel"),
            ("render_tiles", "flycuda::kernels::render_tiles_kernel"),
            ("render_tiles", "flycuda::kernels::render_tiles_timed_kernel"),
            ("render_tiles", "flycuda::kernels::refit_top_kernel")]
KERNELS += [("episode", f"flycuda::kernels::motion_at_kernel<flycuda::{frames}, {offset}>")
            for frames in ("LinearFrames", "SplineFrames") for offset in ("float", "double")]
KERNELS += [("episode", f"flycuda::kernels::scatter_actions_kernel<{index}>") for index in ("int32_t", "int64_t")]
KERNELS += [("episode", f"flycuda::kernels::{k}")
            for k in ("gather_columns_kernel", "episode_step_kernel", "reset_worlds_kernel")]
KERNELS += [("hybrid_step", f"flycuda::kernels::hybrid_step_kernel<{sense}, {index}>")
            for sense in ("float", "double") for index in ("int32_t", "int64_t")]
KERNELS += [("rule_step", f"flycuda::kernels::rule_step_kernel<{index}>") for index in ("int32_t", "int64_t")]
KERNELS += [("hybrid_senses", f"flycuda::kernels::senses_bodies_kernel<{index}>") for index in ("int32_t", "int64_t")]
KERNELS += [("hybrid_senses", "flycuda::kernels::senses_contacts_kernel")]
KERNELS += [("odor_intensity", "flycuda::kernels::odor_intensity_kernel")]
KERNELS += [("odor_plume", "flycuda::kernels::odor_plume_kernel")]
KERNELS += [("connectome_step", "flycuda::kernels::connectome_step_kernel")]
KERNELS += [("brain_step", f"flycuda::kernels::{k}") for k in ("brain_propagate_kernel", "brain_neurons_kernel")]
BUDGETED = {"motion_to_ctrl", "spline_to_ctrl", "record", "advance_step", "pool_ommatidia", "episode",
            "hybrid_senses"}
# The renderer's kernels: (registers, stack bytes) at most, no spills.
RENDER_BUDGETS = {"render_tiles_kernel": (72, 256), "render_tiles_timed_kernel": (96, 256),
                  "refit_top_kernel": (48, 0)}
# FlyGym's walking controllers, one thread per leg: the six legs' phases and magnitudes before the
# step in a local array (indexed by the lane's leg), and CUDA's double sin keeps its slow path's
# reduction there: a small frame (measured 70 registers, 144 B of stack with nvcc 13.0 for sm_90;
# one thread per world was 72 and 336 B).
HYBRID_BUDGET = (80, 160)
# FlyGym's rule-based controller, one thread per leg: the scores and the eligible legs in registers
# and a small frame (measured 48 registers, 48 B of stack with nvcc 13.0 for sm_90; one thread per
# world was 56 and 24 B); the MT19937 key in global memory (624 words a world).
RULE_BUDGET = (64, 64)
# Odor at the sensors, one thread per (world, odor dimension, sensor): float64 pow, or exp, log and
# Cephes' k0e, whose Chebyshev coefficients unroll into immediates (measured 54 registers, no stack,
# with nvcc 13.0 for sm_90): a stack frame here would mean the coefficient arrays went to local memory.
# The plume, one thread per (world, sensor): its per-axis nodes and weights in registers through a
# fixed trip count (measured 54 registers, no stack; a runtime-bounded loop put them on a 72 B stack).
ODOR_BUDGET = (64, 0)
# flyvis's network, a warp per (node, 256 eyes), 8 eyes a lane: a row of edges summed in order, 8 sums
# and the general path's 8 eye offsets in registers (measured 40 registers, no stack, with nvcc 13.0
# for sm_90); 48 leaves 40 resident warps per SM. Its loop's SASS per term: tests/csrc/test_sass.py.
CONNECTOME_BUDGET = (48, 0)
# The whole brain: the propagation, a block per 256 (brain, neuron) pairs walking its spikes' rows
# together (int32 atomics), and the neurons, a thread each, float64 update and counter-based draw
# (measured 24 and 32 registers, no stack, with nvcc 13.0 for sm_90): a stack frame would mean the 64-bit
# hash or the state went to local memory.
BRAIN_BUDGET = (40, 0)
# Static shared memory (bytes) at most; every other kernel: none.
SHARED_BUDGETS = {"render_tiles_kernel": 5632, "render_tiles_timed_kernel": 5632, "refit_top_kernel": 13824,
                  "brain_propagate_kernel": 4 * (256 + 1)}  # its block's spikes: a count and 256 entries


def probe_source() -> str:
    lines = ['#include "kernels/advance_step.cuh"', '#include "kernels/episode.cuh"', '#include "kernels/hybrid_step.cuh"',
             '#include "kernels/rule_step.cuh"', '#include "kernels/hybrid_senses.cuh"',
             '#include "kernels/odor_intensity.cuh"', '#include "kernels/odor_plume.cuh"',
             '#include "kernels/connectome_step.cuh"', '#include "kernels/brain_step.cuh"',
             '#include "kernels/motion_to_ctrl.cuh"',
             '#include "kernels/pool_ommatidia.cuh"', '#include "kernels/record.cuh"',
             '#include "kernels/render_tiles.cuh"', "",
             "// Taking each kernel's address instantiates it (device code for every entry).",
             "void* const flycuda_probe[] = {"]
    lines += [f"    reinterpret_cast<void*>(&{expr})," for _, expr in KERNELS]
    lines += ["};", ""]
    return "\n".join(lines)


def nvcc() -> str | None:
    home = cfg.find_cuda_home()
    exe = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    return exe if exe and os.path.isfile(exe) else None


def resource_usage(exe: str) -> list[dict]:
    """Compiles the probe; one row per kernel entry: name (demangled), registers,
    stack, spill stores/loads (bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "ptxas_probe.cu")
        with open(src, "w") as f:
            f.write(probe_source())
        cmd = [exe, "-std=c++20", f"-arch={ARCH}", "-cubin", "-o", os.path.join(tmp, "probe.cubin"),
               "-Xptxas", "-v", "--resource-usage", "-I", os.path.join(ROOT, "csrc")] + cfg.NVCC_FLAGS + [src]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if res.returncode != 0:
            raise RuntimeError(f"nvcc failed:\n{' '.join(cmd)}\n{res.stderr[-4000:]}")
        text = res.stdout + res.stderr
    rows, cur = {}, None
    for ln in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", ln)
        if m:
            cur = rows.setdefault(m.group(1), {"mangled": m.group(1)})
            continue
        m = re.search(r"Function properties for (\S+)", ln)
        if m:  # an entry's, or a device function's of its own (CUDA's sin slow path): not a kernel row
            cur = rows.get(m.group(1))
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", ln)
        if m:
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", ln)
        if m:
            cur["registers"] = int(m.group(1))
            m = re.search(r"(\d+) bytes smem", ln)
            cur["smem"] = int(m.group(1)) if m else 0
    names = _demangle([r["mangled"] for r in rows.values()], exe)
    out = []
    for r, name in zip(rows.values(), names):
        r["name"] = name
        r["family"] = _family(name)
        out.append(r)
    return out


def _demangle(names: list[str], nvcc_exe: str) -> list[str]:
    filt = os.path.join(os.path.dirname(nvcc_exe), "cu++filt")
    tool = filt if os.path.isfile(filt) else shutil.which("c++filt")
    if not tool:
        return names
    res = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    got = res.stdout.splitlines()
    return got if len(got) == len(names) else names


def _budget(r: dict) -> tuple[int, int] | None:
    """(registers, stack) budget of a kernel row, or None."""
    if r["family"] in BUDGETED:
        return REG_BUDGET, 0
    if r["family"] == "hybrid_step":
        return HYBRID_BUDGET
    if r["family"] == "rule_step":
        return RULE_BUDGET
    if r["family"] in ("odor_intensity", "odor_plume"):
        return ODOR_BUDGET
    if r["family"] == "connectome_step":
        return CONNECTOME_BUDGET
    if r["family"] == "brain_step":
        return BRAIN_BUDGET
    for kernel, budget in RENDER_BUDGETS.items():
        if f"::{kernel}(" in r["name"] or r["name"].endswith(kernel):
            return budget
    return None


def _shared_budget(r: dict) -> int:
    for kernel, budget in SHARED_BUDGETS.items():
        if f"::{kernel}(" in r["name"] or r["name"].endswith(kernel):
            return budget
    return 0


EPISODE_KERNELS = ("motion_at_kernel", "scatter_actions_kernel", "gather_columns_kernel", "episode_step_kernel",
                   "reset_worlds_kernel")


def _family(name: str) -> str:
    if any(k in name for k in EPISODE_KERNELS):
        return "episode"
    if "hybrid_step_kernel" in name:
        return "hybrid_step"
    if "rule_step_kernel" in name:
        return "rule_step"
    if "senses_bodies_kernel" in name or "senses_contacts_kernel" in name:
        return "hybrid_senses"
    if "odor_intensity_kernel" in name:
        return "odor_intensity"
    if "odor_plume_kernel" in name:
        return "odor_plume"
    if "connectome_step_kernel" in name:
        return "connectome_step"
    if "brain_propagate_kernel" in name or "brain_neurons_kernel" in name:
        return "brain_step"
    if "motion_to_ctrl_kernel" in name:
        return "spline_to_ctrl" if "SplineFrames" in name else "motion_to_ctrl"
    for fam in ("record_kernel", "advance_step", "pool_ommatidia", "render_tiles", "refit_top"):
        if fam == "record_kernel" and fam in name:
            return "record"
        if fam in name:
            return "render_tiles" if fam == "refit_top" else fam
    return "?"


def _short(name: str) -> str:
    """motion_to_ctrl_kernel<int, LinearFrames, long, float> without namespaces and the
    parameter list."""
    base = name.split("(")[0].replace("flycuda::kernels::", "").replace("flycuda::", "")
    return base.replace("(anonymous namespace)::", "")


def table(rows: list[dict]) -> str:
    lines = ["| kernel (sm_90) | registers | stack (bytes) | spill stores/loads (bytes) | shared (bytes) | budget |",
             "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["family"], _short(r["name"]))):
        b = _budget(r)
        budget = f"<= {b[0]} regs, " + (f"<= {b[1]} B stack" if b[1] else "no stack") if b else "no spills"
        lines.append(f"| `{_short(r['name'])}` | {r.get('registers', '?')} | {r.get('stack', '?')} | "
                     f"{r.get('spill_stores', '?')}/{r.get('spill_loads', '?')} | {r.get('smem', '?')} | "
                     f"{budget}, <= {_shared_budget(r)} B shared |")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def usage():
    exe = nvcc()
    if exe is None:
        pytest.skip("no CUDA toolkit (nvcc) found: set CUDA_HOME")
    return resource_usage(exe)


def test_every_kernel_is_compiled(usage):
    fams = sorted(r["family"] for r in usage)
    assert len(usage) == len(KERNELS), [r["name"] for r in usage]
    assert fams.count("motion_to_ctrl") == 8 and fams.count("spline_to_ctrl") == 8
    assert fams.count("record") == 2 and fams.count("render_tiles") == 3 and "advance_step" in fams
    assert fams.count("pool_ommatidia") == 1 and fams.count("episode") == 9 and fams.count("hybrid_step") == 4
    assert fams.count("rule_step") == 2 and fams.count("hybrid_senses") == 3
    assert all(_budget(r) is not None for r in usage), [r["name"] for r in usage if _budget(r) is None]
    for r in usage:
        assert {"registers", "stack", "spill_stores", "spill_loads", "smem"} <= set(r), r


def test_no_kernel_spills(usage):
    spills = [(_short(r["name"]), r["spill_stores"], r["spill_loads"]) for r in usage
              if r["spill_stores"] or r["spill_loads"]]
    assert not spills, f"kernels that spill registers to local memory: {spills}\n{table(usage)}"


def test_kernels_within_budget(usage):
    over = [(_short(r["name"]), r["registers"], r["stack"], _budget(r)) for r in usage
            if r["registers"] > _budget(r)[0] or r["stack"] > _budget(r)[1]]
    assert not over, f"kernels over their budget (name, registers, stack, budget): {over}\n{table(usage)}"


def test_shared_memory_within_budget(usage):
    over = [(_short(r["name"]), r["smem"], _shared_budget(r)) for r in usage if r["smem"] > _shared_budget(r)]
    assert not over, f"kernels over their shared-memory budget (name, bytes, budget): {over}\n{table(usage)}"
    assert any(r["smem"] > 0 for r in usage)  # the parse reads ptxas's smem figure


if __name__ == "__main__":
    exe = nvcc()
    if exe is None:
        sys.exit("no nvcc: set CUDA_HOME")
    print(table(resource_usage(exe)))
