"""SASS of every kernel in the built extension (sm_90), counted without a GPU: instructions,
code bytes, IEEE-division checks (FCHK: each guards a call of the division's slow path, as
``-prec-div=true`` compiles ``a / b``), reciprocal and square-root units (MUFU), and calls.
The measurement issue 27 asks for next to ptxas's registers and stack (tests/csrc/test_ptxas.py),
before and after a change of the renderer's flags or code.

    python bench/bench_sass.py [--so flycuda/_C....so] [--arch sm_90] [--no-results]

cuobjdump comes from the CUDA toolkit, else from PATH, else the copy Triton ships.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

from _results import append_results, format_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(\S.*?);")


def cuobjdump() -> str:
    from flycuda._buildcfg import find_cuda_home

    home = find_cuda_home()
    cands = [os.path.join(home, "bin", "cuobjdump")] if home else []
    cands += [shutil.which("cuobjdump") or ""]
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.origin:
        cands.append(os.path.join(os.path.dirname(triton.origin), "backends", "nvidia", "bin", "cuobjdump"))
    for c in cands:
        if c and os.path.isfile(c):
            return c
    sys.exit("bench_sass: no cuobjdump (CUDA toolkit, PATH or Triton's)")


def kernels(so: str, arch: str) -> dict[str, dict]:
    """Per kernel (short name, template arguments folded): its counts."""
    out = subprocess.run([cuobjdump(), "-sass", "-arch", arch, so], capture_output=True, text=True, check=True).stdout
    stats: dict[str, dict] = {}
    name = None
    for line in out.splitlines():
        if "Function :" in line:
            mangled = line.split("Function :")[1].strip()
            m = re.search(r"kernels\d+(\w+?_kernel)", mangled)
            base = m.group(1) if m else mangled
            name = base if base not in stats else f"{base} ({sum(k.startswith(base) for k in stats) + 1})"
            stats[name] = {"instructions": 0, "FCHK": 0, "MUFU.RCP": 0, "MUFU.RSQ": 0, "CALL": 0}
            continue
        m = INSTR.match(line)
        if name and m:
            op = m.group(1).split()[0] if not m.group(1).startswith("@") else m.group(1).split()[1]
            s = stats[name]
            s["instructions"] += 1
            for key in ("FCHK", "MUFU.RCP", "MUFU.RSQ"):
                s[key] += op.startswith(key)
            s["CALL"] += op.startswith("CALL")
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--so", default=None, help="the extension (default: flycuda/_C.abi3.so)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--no-results", action="store_true", help="do not append to bench/RESULTS.md")
    args = ap.parse_args()
    built = sorted(glob.glob(os.path.join(ROOT, "flycuda", "_C*.so")))  # _C.abi3.so (the stable ABI)
    if not (args.so or built):
        sys.exit("bench_sass: no built extension under flycuda/ (bash run.sh build), or pass --so")
    so = args.so or built[0]
    stats = kernels(so, args.arch)
    rows = [[f"`{k}`", s["instructions"], f"{16 * s['instructions'] / 1024:.1f}", s["FCHK"], s["MUFU.RCP"],
             s["MUFU.RSQ"], s["CALL"]] for k, s in stats.items()]
    table = format_table(["kernel (" + args.arch + ")", "instructions", "KiB", "IEEE div checks (FCHK)",
                          "MUFU.RCP", "MUFU.RSQ", "calls"], rows)
    print(table)
    if not args.no_results:
        append_results(f"SASS of the kernels ({args.arch}), counted with cuobjdump", "cpu", table,
                       "compiled only, no GPU; the extension's device flags (--fmad=false -prec-div=true "
                       "-prec-sqrt=true); template instances listed one by one")


if __name__ == "__main__":
    main()
