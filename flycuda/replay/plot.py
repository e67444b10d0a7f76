"""Replayed vs target joint angles: the plot ``flycuda replay --plot`` writes.

:func:`plot_tracking` takes a :class:`~flycuda.replay.results.ReplayResult` or the .npz
that ``flycuda replay --record`` writes, so notebooks and the CLI draw the same
figure: for a few worlds and DOFs (default: the first leg's 7 DOFs, the first 3
worlds) the replayed angle (solid) over the target (dashed), in degrees against
seconds, and the tracking RMSE of every DOF after the settle time.
matplotlib (Agg) is imported only here.
"""

from __future__ import annotations

import math
import os
import re
import sys
from typing import Sequence

import numpy as np

from ..errors import RecordingError, require
from ..recording.reader import Recording
from ..recording.runs import open_run

__all__ = ["plot_tracking", "load_tracking"]


def load_tracking(source, worlds=None) -> dict:
    """For the ``worlds`` drawn (default the first 3): recorded/targets (float [len(worlds), R, D],
    radians), times [R] (s), dof_names, rmse_per_dof [D], worlds, total (worlds in the recording);
    from a ReplayResult, a Recording, a ``--record`` .zarr store or .npz. A store is read for
    those worlds only."""
    if isinstance(source, (str, os.PathLike)) and os.fspath(source).endswith(".npz"):
        with np.load(os.fspath(source)) as z:
            missing = {"recorded", "targets", "times", "dof_names", "rmse_per_dof"} - set(z.files)
            if missing:
                raise RecordingError(f"{os.fspath(source)} is not a flycuda recording: it lacks {sorted(missing)}")
            data = {k: z[k] for k in ("recorded", "targets", "times", "rmse_per_dof")}
            names = [str(n) for n in z["dof_names"]]
        total = data["recorded"].shape[0]
        sel = _check_worlds(worlds, total)
        return data | {"recorded": data["recorded"][sel], "targets": data["targets"][sel], "dof_names": names,
                       "worlds": sel, "total": total}
    rmse = getattr(source, "rmse_per_dof", None)
    rec = getattr(source, "recording", source)
    if rec is None:
        raise RecordingError("this replay stored no recording to plot: pass record='memory' or a path")
    if not isinstance(rec, Recording):
        rec = Recording.open(source)
    if rmse is None:
        rmse = rec.info.get("rmse_per_dof")
    total = rec["angles"].shape[0]
    sel = _check_worlds(worlds, total)
    rows = _valid_rows(rec)
    return {"recorded": rec.read("angles", sel).numpy()[:, :rows], "targets": rec.read("targets", sel).numpy()[:, :rows],
            "times": rec.times("angles")[:rows], "dof_names": rec.columns("angles"),
            "rmse_per_dof": np.asarray(rmse if rmse is not None else [], dtype=np.float32), "worlds": sel,
            "total": total}


def _valid_rows(rec: Recording) -> int:
    """The samples of joint angles to draw: all of a complete run's; an interrupted, preempted
    or failed run's valid prefix (said in one line)."""
    if rec.complete:
        return rec["angles"].shape[1]
    run = open_run(rec.group.store)
    rows = min(run.rows.get("angles", 0), run.rows.get("targets", 0))
    if run.state != "running":
        print(f"flycuda plot: {run.line()}; plotting its valid prefix ({rows:,} samples)", file=sys.stderr)
    return rows


def _check_worlds(worlds, total: int) -> list[int]:
    worlds = list(range(min(3, total))) if worlds is None else [int(w) for w in worlds]
    bad = [w for w in worlds if not 0 <= w < total]
    if bad or not worlds:
        raise RecordingError(f"worlds must be indices in [0, {total}), got {worlds}")
    return worlds


def _leg(name: str) -> str | None:
    """NeuroMechFly's leg code (LF, LM, LH, RF, RM, RH) of a DOF name, e.g. joint_LFCoxa -> LF."""
    m = re.match(r"(?:joint_)?([LR][FMH])", name)
    return m.group(1) if m else None


def _default_dofs(names: Sequence[str]) -> list[int]:
    """The first leg's DOFs (at most 7), or the first 7 DOFs when names carry no leg."""
    leg = _leg(names[0]) if names else None
    same = [i for i, n in enumerate(names) if leg and _leg(n) == leg]
    return (same or list(range(len(names))))[:7]


def plot_tracking(source, out: str | None = None, *, worlds: Sequence[int] | None = None,
                  dofs: Sequence[int | str] | None = None, title: str | None = None):
    """Draws replayed vs target angles and the RMSE per DOF; returns the figure.

    Args:
        source: a ReplayResult, a Recording, or the path of a ``flycuda replay --record``
            store (.zarr) or .npz.
        out: PNG path to write (atomically); None: only return the figure.
        worlds: world indices to draw (default the first 3).
        dofs: DOF indices or names (default the first leg's 7 DOFs).
        title: figure title (default: worlds and DOF count).
    """
    require("matplotlib", "plotting the joint angles", "video")
    import matplotlib  # noqa: PLC0415  (lazy: only plots need matplotlib)

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # noqa: PLC0415  (lazy: only plots need matplotlib)

    data = load_tracking(source, worlds)
    rec, tgt, t, names = np.degrees(data["recorded"]), np.degrees(data["targets"]), data["times"], data["dof_names"]
    worlds = data["worlds"]
    chosen = _default_dofs(names) if dofs is None else [names.index(d) if isinstance(d, str) else int(d)
                                                         for d in dofs]
    ncol = 4
    nrow = math.ceil(len(chosen) / ncol) + 1
    fig = plt.figure(figsize=(4 * ncol, 2.6 * nrow), constrained_layout=True)
    grid = fig.add_gridspec(nrow, ncol)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, d in enumerate(chosen):
        ax = fig.add_subplot(grid[k // ncol, k % ncol])
        for j, w in enumerate(worlds):
            c = colors[j % len(colors)]
            ax.plot(t, rec[j, :, d], color=c, lw=1.4, label=f"world {w} replayed")
            ax.plot(t, tgt[j, :, d], color=c, lw=1.0, ls="--", label=f"world {w} target")
        ax.set_title(names[d], fontsize=9)
        ax.set_xlabel("time (s)", fontsize=8)
        ax.set_ylabel("angle (deg)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.axes[0].legend(fontsize=6, loc="best")
    ax = fig.add_subplot(grid[nrow - 1, :])
    rmse = np.degrees(data["rmse_per_dof"])
    ax.bar(np.arange(len(names)), rmse, color=colors[0])
    ax.set_xticks(np.arange(len(names)), names, rotation=90, fontsize=6)
    ax.set_ylabel("tracking RMSE (deg)", fontsize=8)
    ax.set_title(f"tracking RMSE per DOF over {data['total']} worlds (mean {float(np.sqrt(np.mean(rmse ** 2))):.2f} deg)",
                 fontsize=9)
    fig.suptitle(title or f"replayed (solid) vs target (dashed) joint angles, worlds {worlds}", fontsize=11)
    if out is not None:
        tmp = os.fspath(out) + ".part.png"
        fig.savefig(tmp, dpi=90)
        os.replace(tmp, os.fspath(out))
        plt.close(fig)
    return fig
