"""How far a recording got, told by the store itself (:func:`flycuda.recording.open_run`, in
:mod:`flycuda.recording.runs`, reads it back).

While a run writes, its store's ``attrs["flycuda"]["progress"]`` holds::

    {"rows_written": {"angles": 5632, "qpos": 1024, ...},  # samples written per array (a prefix)
     "step": 5631,                                          # every array holds every sample up to this step
     "heartbeat": {"time": "2026-11-28T02:40:11+00:00", "unix": 1795830011.2, "host": "node7", "pid": 4242}}

written by the store's writer thread after the chunks it writes (one small JSON write each
time its queue drains, and at least once a second while chunks keep coming) and every
:data:`HEARTBEAT_S` seconds while the run is alive.
"""

from __future__ import annotations

import datetime
import os
import socket
import time

__all__ = ["HEARTBEAT_S", "STALE_S", "heartbeat", "valid_step", "process_alive", "run_state"]

HEARTBEAT_S = 30.0   # a live run's writer refreshes its heartbeat at least this often
STALE_S = 5 * HEARTBEAT_S  # a heartbeat older than this (another host's run) is a dead run's


def heartbeat() -> dict:
    """This process's heartbeat: UTC time (ISO and Unix seconds), host name and pid."""
    now = time.time()
    iso = datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(timespec="seconds")
    return {"time": iso, "unix": now, "host": socket.gethostname(), "pid": os.getpid()}


def valid_step(rows_written: dict, rows: dict, every: dict) -> int:
    """The last step whose every sample is written: ``rows_written[name]`` samples of each
    array (of ``rows[name]``, one every ``every[name]`` steps) cover the steps up to the one
    before its next sample; arrays written whole do not bound it. -1: none yet."""
    bounds = [rows_written.get(n, 0) * every[n] - 1 for n in rows if rows_written.get(n, 0) < rows[n]]
    if bounds:
        return min(bounds)
    return max(((rows[n] - 1) * every[n] for n in rows), default=-1)


def process_alive(pid: int) -> bool:
    """Is process ``pid`` alive on this host (a zombie counts as gone)?"""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def run_state(info: dict, beat: dict) -> str:
    """What a run is now, from its store's facts (``attrs["flycuda"]``) and heartbeat:
    complete, preempted, failed (an error it named), running (its pid alive on this host, or a
    heartbeat fresher than :data:`STALE_S` from another) or interrupted."""
    status = str(info.get("status", ""))
    if info.get("complete"):
        return "complete"
    if status.startswith("preempted"):
        return "preempted"
    if status.startswith("incomplete"):
        return "failed"
    if not beat:
        return "interrupted"
    if beat.get("host") == socket.gethostname() and "pid" in beat:
        return "running" if process_alive(beat["pid"]) else "interrupted"
    return "running" if time.time() - float(beat.get("unix", 0.0)) < STALE_S else "interrupted"
