"""Runs flycuda's real CUDA kernels on the emulated grid (csrc/emu/), under sanitizers.

The kernels' own source (csrc/kernels/*.cuh) is compiled by the host compiler
with -DFLYCUDA_EMU into a small standalone program, ``flycuda_emu``, once per
sanitizer flavour: ``asan`` (AddressSanitizer + UndefinedBehaviorSanitizer)
and ``tsan`` (ThreadSanitizer). Python writes each case as .npy arrays plus a
``case.txt`` of scalars, runs the program over a batch of cases, and reads the
outputs back. Any sanitizer report, emulator error or non-zero exit fails the
batch with the report in the message.

The binaries are cached under build/emu/<hash of sources and flags>/.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")
SANITIZERS = {
    # float-cast-overflow is not part of GCC's "undefined": NaN or out-of-range float to int.
    "asan": ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all"],
    "tsan": ["-fsanitize=thread"],
    # line coverage of the kernel source (gcov): shows the cases reach every line
    "cov": ["--coverage", "-O0"],
    # no instrument: for counting (bench_ops' atomics per launch) at large grids
    "plain": ["-O2"],
}
FLAGS = ["-std=c++20", "-O1", "-g", "-DFLYCUDA_EMU", "-ffp-contract=off", "-fno-omit-frame-pointer",
         "-Wall", "-Wextra", "-Werror", "-pthread"]
ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1",
}
REPORT_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                  "WARNING: ThreadSanitizer", "flycuda emu:")


class SanitizerReport(AssertionError):
    """The emulated kernels tripped a sanitizer or the emulator's own checks."""


def _sources() -> list[str]:
    files = [os.path.join(CSRC, "emu", n) for n in ("emu_main.cpp", "episode_cases.h", "selftest.cpp", "cuda_emu.h", "npy.h")]
    files += sorted(f for f in glob.glob(os.path.join(CSRC, "kernels", "**", "*"), recursive=True)
                    if os.path.isfile(f))  # kernels/*.cuh and their headers (kernels/render/*.h)
    return files


def _exe(sanitizer: str, program: str, cxx: str | None) -> tuple[str, list[str], str]:
    """(compiler, flags, executable path): the path is keyed by a hash of both and the sources."""
    cxx = cxx or os.environ.get("CXX") or "g++"
    flags = FLAGS + SANITIZERS[sanitizer]
    h = hashlib.sha256(" ".join([cxx] + flags).encode())
    for path in _sources():
        with open(path, "rb") as f:
            h.update(f.read())
    return cxx, flags, os.path.join(ROOT, "build", "emu", h.hexdigest()[:16], f"flycuda_{program}_{sanitizer}")


def _test_run() -> str:
    """This test run: the same in every pytest-xdist worker of one run, new in the next run."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"


def _fresh_counters(out_dir: str, program: str) -> None:
    """Deletes the gcov counters of earlier runs, once per test run: the workers of one
    run (CI splits the emulator's tests over both cores) add their counts to the same files."""
    import fcntl

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f".{program}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = os.path.join(out_dir, f".{program}.run")
        if os.path.exists(marker) and open(marker).read() == _test_run():
            return
        for f in glob.glob(os.path.join(out_dir, f"*{program}*.gcda")):
            os.remove(f)
        with open(marker, "w") as f:
            f.write(_test_run())


def build(sanitizer: str, program: str = "emu_main", cxx: str | None = None) -> str:
    """Compiles csrc/emu/<program>.cpp (the driver ``emu_main``, or ``selftest``) with
    ``sanitizer`` ("asan" or "tsan"); returns the executable's path."""
    cxx, flags, exe = _exe(sanitizer, program, cxx)
    out_dir = os.path.dirname(exe)
    if sanitizer == "cov":  # counts from this test run only
        _fresh_counters(out_dir, program)
    if not os.path.exists(exe):
        os.makedirs(out_dir, exist_ok=True)
        tmp = exe + f".tmp{os.getpid()}"
        obj = tmp + ".o"  # compiled, then linked: ccache (CI's .ci/tools sets CCACHE_DIR) keeps the sanitizers'
        cache = _ccache() if sanitizer != "cov" else []  # objects (the coverage build's gcov paths stay absolute)
        for cmd in (cache + [cxx] + flags + ["-I", CSRC, "-c", os.path.join(CSRC, "emu", f"{program}.cpp"), "-o", obj],
                    [cxx] + flags + [obj, "-o", tmp]):
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"building {program} ({sanitizer}) failed:\n{' '.join(cmd)}\n{res.stderr}")
        os.remove(obj)
        os.replace(tmp, exe)
    return exe


def _ccache() -> list[str]:
    """``["ccache"]`` where CCACHE_DIR names a cache and ccache is on PATH (CI: .ci/tools), else []."""
    return ["ccache"] if os.environ.get("CCACHE_DIR") and shutil.which("ccache") else []


def line_coverage(program: str = "emu_main") -> dict[str, list[tuple[int, str]]]:
    """After runs of the "cov" build: for each csrc/ source the program compiled, its
    lines that never ran ([(line number, text)]); empty lists mean every line ran.
    It reads the counters of the last test run that used the "cov" build, resetting nothing."""
    out_dir = os.path.dirname(_exe("cov", program, None)[2])
    gcda = glob.glob(os.path.join(out_dir, f"*{program}*.gcda"))
    if not gcda:
        return {}
    subprocess.run(["gcov", "-o", out_dir] + gcda, cwd=out_dir, capture_output=True, text=True, check=True)
    missed: dict[str, list[tuple[int, str]]] = {}
    for report in glob.glob(os.path.join(out_dir, "*.gcov")):
        with open(report) as f:
            lines = f.read().splitlines()
        source = lines[0].split("Source:", 1)[-1] if lines else ""
        if not os.path.realpath(source).startswith(CSRC + os.sep):
            continue
        rel = os.path.relpath(os.path.realpath(source), CSRC)
        # A template's lines are listed once per instantiation: a line ran if it ran in any.
        ran, never = set(), {}
        for ln in lines:
            parts = ln.split(":", 2)
            if len(parts) < 3 or not parts[1].strip().isdigit():
                continue
            count, number = parts[0].strip(), int(parts[1])
            if count == "#####":
                never[number] = parts[2].strip()
            elif count not in ("-", "=====") and count.rstrip("*").isdigit():
                ran.add(number)
        missed[rel] = sorted((n, text) for n, text in never.items() if n not in ran)
    return missed


def sanitized_run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs a sanitized program with flycuda's sanitizer options; never raises on its failure."""
    return subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, **ENV), timeout=timeout)


def reports_in(res: subprocess.CompletedProcess) -> list[str]:
    """The sanitizer/emulator report kinds found in a run's stderr."""
    return [m for m in REPORT_MARKERS if m in res.stderr]


def base_of(t: torch.Tensor) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """A tensor as (its whole storage as a 1-D array, storage offset, strides)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    base = torch.as_strided(t.detach().cpu() if t.device.type != "cpu" else t.detach(), (n,), (1,), 0)
    return base.clone().numpy(), t.storage_offset(), tuple(t.stride())


class Case:
    """One op invocation: ``op``, scalars and arrays (numpy), and after a run its outputs."""

    def __init__(self, op: str, **scalars):
        self.op, self.scalars, self.arrays, self.out = op, dict(scalars), {}, {}

    def array(self, name: str, a) -> "Case":
        self.arrays[name] = np.ascontiguousarray(a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a)
        return self

    def strided(self, name: str, t: torch.Tensor, prefix: str) -> "Case":
        """A strided tensor: its base buffer as ``name`` and offset/strides as scalars."""
        base, offset, strides = base_of(t)
        self.arrays[name] = base
        self.scalars[f"{prefix}_offset"] = offset
        for i, s in enumerate(strides):
            self.scalars[f"{prefix}_s{i}"] = s
        return self

    def counter(self, counter: torch.Tensor) -> "Case":
        """A step counter as the driver takes it: its whole storage's bytes (a
        new_step_counter's hidden ticket included) padded to whole int64 as
        ``counter``, the storage's size in bytes and the view's size as scalars."""
        assert counter.storage_offset() == 0
        storage = counter.untyped_storage()
        raw = torch.zeros(-(-storage.nbytes() // 8) * 8, dtype=torch.uint8)
        raw[:storage.nbytes()] = torch.empty(0, dtype=torch.uint8).set_(storage.cpu(), 0, (storage.nbytes(),), (1,))
        self.arrays["counter"] = raw.view(torch.int64).numpy().copy()
        self.scalars["counter_numel"] = counter.numel()
        self.scalars["counter_bytes"] = storage.nbytes()
        return self

    def write(self, path: str) -> None:
        os.makedirs(path)
        with open(os.path.join(path, "case.txt"), "w") as f:
            f.write(f"op {self.op}\n")
            for k, v in self.scalars.items():
                f.write(f"{k} {float(v).hex() if isinstance(v, float) else int(v)}\n")
        for k, a in self.arrays.items():
            np.save(os.path.join(path, f"{k}.npy"), a)

    def read(self, path: str) -> None:
        for f in glob.glob(os.path.join(path, "out_*.npy")):
            self.out[os.path.basename(f)[4:-4]] = torch.from_numpy(np.load(f))


def run(cases: list[Case], sanitizer: str = "asan", timeout: float = 600) -> list[Case]:
    """Runs ``cases`` in one process of flycuda_emu; fills each case's ``out``."""
    exe = build(sanitizer)
    tmp = tempfile.mkdtemp(prefix="flycuda_emu_")
    try:
        dirs = []
        for i, c in enumerate(cases):
            d = os.path.join(tmp, f"case{i:04d}")
            c.write(d)
            dirs.append(d)
        res = sanitized_run([exe] + dirs, timeout)
        reported = reports_in(res)
        if res.returncode != 0 or reported:
            first = [ln for ln in res.stderr.splitlines() if any(m in ln for m in REPORT_MARKERS)][:3]
            raise SanitizerReport(f"flycuda_emu ({sanitizer}) exit {res.returncode}, reports {reported}:\n"
                                  + "\n".join(first) + "\n...\n" + res.stderr[-6000:])
        for c, d in zip(cases, dirs):
            c.read(d)
        return cases
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":  # .ci/run: `python tests/helpers/emu.py asan tsan cov` builds them, two at a time
    import sys
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        for exe in pool.map(build, sys.argv[1:]):
            print("emu: built", os.path.relpath(exe, ROOT))
