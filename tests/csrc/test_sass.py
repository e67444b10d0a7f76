"""SASS budgets of inner loops, counted without a GPU (nvcc for sm_90, then cuobjdump: the toolkit's,
PATH's or the copy Triton ships): ``connectome_step``'s loop over a row's edges (issue 53).

A term is one edge's contribution to one eye's sum: a load, the relu, a multiply and an add (four
instructions at the least with the build's --fmad=false). Counted per term over the loop's whole
body (the unrolled edges, the index math, the loop's own branch): the node-major path (the network's
layout, whole chunks of 256 eyes) at most 8, the general path (strided voltages, the last chunk,
4 or 8 eyes a lane) at most 12. The first H200 run measured about 25 per term before this kernel was reshaped
(bench/RESULTS.md, 2026-11-28).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("_flycuda_buildcfg", os.path.join(ROOT, "flycuda", "_buildcfg.py"))
cfg = importlib.util.module_from_spec(_spec)  # by path: no torch, no extension needed
_spec.loader.exec_module(cfg)

FAST_PER_TERM, GENERAL_PER_TERM = 8.0, 12.0
INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(\S.*?)\s*;")
BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)\s*$")


def _tool(name: str) -> str | None:
    home = cfg.find_cuda_home()
    cands = [os.path.join(home, "bin", name)] if home else []
    cands.append(shutil.which(name) or "")
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.origin:
        cands.append(os.path.join(os.path.dirname(triton.origin), "backends", "nvidia", "bin", name))
    return next((c for c in cands if c and os.path.isfile(c)), None)


def loops(sass: str) -> list[dict]:
    """Every loop (a backward branch and the instructions from its target to it): its
    instruction count and multiplies (FMUL: one per term)."""
    ins = [(int(m.group(1), 16), m.group(2)) for m in map(INSTR.match, sass.splitlines()) if m]
    found = []
    for addr, text in ins:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < addr:
            body = [t for a, t in ins if int(m.group(1), 16) <= a <= addr]
            found.append({"instructions": len(body), "terms": sum(bool(re.search(r"\bFMUL\b", t)) for t in body),
                          "relu": sum("FMNMX.NAN" in t for t in body)})
    return found


@pytest.fixture(scope="module")
def connectome_loops():
    nvcc, cuobjdump = _tool("nvcc"), _tool("cuobjdump")
    if nvcc is None or cuobjdump is None:
        pytest.skip("no nvcc or cuobjdump (CUDA toolkit, PATH or Triton's)")
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "probe.cu"), os.path.join(tmp, "probe.cubin")
        with open(src, "w") as f:
            f.write('#include "kernels/connectome_step.cuh"\nvoid* const probe[] = '
                    "{reinterpret_cast<void*>(&flycuda::kernels::connectome_step_kernel)};\n")
        subprocess.run([nvcc, "-std=c++20", "-arch=sm_90", "-cubin", "-o", cubin, "-I", os.path.join(ROOT, "csrc")]
                       + cfg.NVCC_FLAGS + [src], check=True, capture_output=True, timeout=600)
        sass = subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True, text=True).stdout
    return [lp for lp in loops(sass) if lp["terms"] >= 8]  # the unrolled edge loops of 4 and 8 eyes a lane


def test_connectome_edge_loop_within_its_sass_budget(connectome_loops):
    per_term = sorted(lp["instructions"] / lp["terms"] for lp in connectome_loops)
    assert len(per_term) >= 2, connectome_loops  # the node-major path and the general one's (4 and 8 eyes a lane)
    assert all(lp["relu"] == lp["terms"] for lp in connectome_loops)  # one max.NaN a term (sm_80 and up)
    assert per_term[0] <= FAST_PER_TERM, f"node-major path: {per_term[0]:.1f} SASS instructions per term"
    assert per_term[-1] <= GENERAL_PER_TERM, f"general path: {per_term[-1]:.1f} SASS instructions per term"


def test_the_loop_finder_reads_a_backward_branch():
    sass = """
        /*0010*/   FMUL R1, R2, R3 ;
        /*0020*/   FADD R4, R4, R1 ;
        /*0030*/   @!P0 BRA 0x10 ;
        /*0040*/   BRA 0x60 ;
    """
    assert loops(sass) == [{"instructions": 3, "terms": 1, "relu": 0}]
