"""gpu-check's steps and their runner: a :class:`Step` (a command, or why it is skipped), run in a
process group of its own with its log written as it runs, ended past its limit (SIGINT, then
SIGKILL), judged into an :class:`Outcome`."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import re
import signal
import subprocess
import tempfile
import time

__all__ = ["Step", "Outcome", "run_step", "run_with_grace", "judge", "log_name", "installed", "GRACE_S"]

GRACE_S = 20.0   # a step past its limit: seconds between SIGINT (pytest's summary) and SIGKILL


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    return importlib.util.find_spec(module) is not None


@dataclasses.dataclass
class Step:
    """One check: a command, or a reason it cannot run here (``skip``)."""

    name: str
    argv: list[str]
    timeout: float = 1800.0
    skip: str = ""
    env: dict = dataclasses.field(default_factory=dict)  # added to the environment
    expect_report: str = ""  # the step passes only if it fails with this in its output
    pytest: bool = False     # a pytest run: passes only if some test passed
    cwd: str | None = None   # default: the checkout (or the current folder)
    group: str = ""          # what --only picks it by (GROUPS)


@dataclasses.dataclass
class Outcome:
    name: str
    status: str          # "pass", "fail" or "skip"
    seconds: float
    summary: str         # the last meaningful line of its output, or why it was skipped
    output: str = ""     # the tail of its output


def _summary_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):  # pytest's closing line, else the last line
        if " passed" in ln or " failed" in ln or "error" in ln.lower():
            return ln.strip("= ")
    return lines[-1] if lines else ""


def judge(step: Step, returncode: int, text: str) -> tuple[bool, str]:
    """Did a finished step pass, and its summary line. A plain step passes on exit
    status 0; a pytest step only if some test passed too (all skipped is a fail: it
    checked nothing); a self-test step only if the tool failed *and* printed the
    report it must print."""
    summary = _summary_line(text)
    if returncode < 0:  # killed by a signal (a crash leaves no closing line of its own)
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        summary = f"crashed ({name})" + (f": {summary}" if summary else "")
    if step.expect_report:
        caught = returncode != 0 and step.expect_report in text
        return caught, (f"caught: {step.expect_report!r}" if caught else
                        f"NOT caught: exit {returncode}, no {step.expect_report!r} in the output")
    ok = returncode == 0
    if ok and step.pytest and not re.search(r"\b[1-9]\d* passed", text):
        return False, f"no test passed ({summary or 'no output'})"
    return ok, summary


def run_step(step: Step, live_dir: str | None = None) -> Outcome:
    """Runs one step (from the checkout, or the current folder) and keeps the tail of
    its output. ``live_dir``: its log is written there as it runs (a lease cut short
    still brings back what a step had printed)."""
    if step.skip:
        return Outcome(step.name, "skip", 0.0, step.skip)
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONUNBUFFERED="1", **step.env)
    if step.cwd:  # a checkout: its flycuda for the scripts under bench/ and examples/, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in (step.cwd, env.get("PYTHONPATH", "")) if p)
    try:
        live = os.path.join(live_dir, log_name(step.name)) if live_dir else None
        code, text = run_with_grace(step.argv, step.cwd, env, step.timeout, live=live)
    except OSError as e:
        text, ok, summary = f"could not start: {e}", False, f"could not start: {e}"
    else:
        if code is None:
            text += f"\ntimed out after {step.timeout:.0f} s"
            ok, summary = False, f"timed out after {step.timeout:.0f} s"
        else:
            ok, summary = judge(step, code, text)
    return Outcome(step.name, "pass" if ok else "fail", time.perf_counter() - t0, summary, text)


def run_with_grace(argv: list[str], cwd: str | None, env: dict, timeout: float,
                   grace: float = GRACE_S, live: str | None = None) -> tuple[int | None, str]:
    """(exit status, or None when it ran past ``timeout``; stdout and stderr as they came).
    Past the limit its process group gets SIGINT, on which pytest prints what failed so far (the
    first GPU runs' test steps timed out with their failures unnamed), and ``grace`` seconds
    later SIGKILL, which also ends pytest-xdist's workers. Whatever way it ends (an interrupt of
    gpu-check included), nothing of its process group outlives it. ``live``: the file the
    output goes to as it comes (else a temporary one); the child appends to it through a handle
    of its own, and it is read back as text with undecodable bytes replaced."""
    with contextlib.ExitStack() as stack:
        path = live or os.path.join(stack.enter_context(tempfile.TemporaryDirectory()), "step.log")
        with open(path, "ab", buffering=0) as sink:
            os.ftruncate(sink.fileno(), 0)
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        code = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGINT)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        finally:
            _signal_group(proc, signal.SIGKILL)  # stragglers of a finished step too
            proc.wait()
        with open(path, encoding="utf-8", errors="replace") as f:
            return code, f.read()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # it ended in the meantime
        pass


def log_name(step_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", step_name).strip("_") + ".log"
