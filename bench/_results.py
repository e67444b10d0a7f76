"""Shared by the benchmarks: version/device facts and the dated row in bench/RESULTS.md."""

from __future__ import annotations

import datetime
import os
import platform
import sys

import torch

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"


def versions() -> str:
    parts = [f"python {platform.python_version()}", f"torch {torch.__version__}"]
    for mod in ("warp", "mujoco", "mujoco_warp"):
        try:
            m = __import__(mod)
            parts.append(f"{mod} {getattr(m, '__version__', '?')}")
        except Exception:  # noqa: BLE001 - a missing optional package is just not listed
            pass
    return ", ".join(parts)


def format_table(header: list[str], rows: list[list]) -> str:
    """A markdown table (also readable in a terminal)."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def append_results(title: str, device: str, table: str, notes: str = "") -> None:
    """Appends a dated section (device, versions, command, table) to bench/RESULTS.md."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    block = [f"\n## {stamp} — {title}", "",
             f"- device: {device_name(device)}", f"- versions: {versions()}",
             f"- command: `{cmd}`"]
    if notes:
        block.append(f"- notes: {notes}")
    block += ["", table, ""]
    new = not os.path.exists(RESULTS)
    with open(RESULTS, "a") as f:
        if new:
            f.write("# flycuda benchmark results\n\nOne dated section per run, newest last.\n")
        f.write("\n".join(block))
