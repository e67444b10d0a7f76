"""Writes FlyGym's preprogrammed steps into ``single_steps.npz`` (what
:mod:`flycuda.control.steps` reads), from FlyGym's own ``PreprogrammedSteps``: scipy's
periodic spline coefficients and knots as FlyGym built them, the neutral pose and the swing
ends. Run it in an environment with FlyGym (the FlyGym lane) when FlyGym's step data
changes; tests/control holds the file equal to FlyGym's splines.

    python -m flycuda.control.export [PATH]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from .steps import LEGS, STEPS_FILE

__all__ = ["export_steps"]


def export_steps(path: str = STEPS_FILE) -> str:
    """Writes the table (knots [45], coeffs [6, 4, 44, 7], neutral [6, 7], swing_end [6],
    float64) to ``path`` atomically; returns the path."""
    from flygym_demo.complex_terrain import PreprogrammedSteps  # noqa: PLC0415  (FlyGym only here)

    steps = PreprogrammedSteps()
    splines = [steps._psi_funcs[leg] for leg in LEGS]
    knots = splines[0].x
    if any(not np.array_equal(s.x, knots) for s in splines):
        raise ValueError("FlyGym's legs have different spline knots; the table holds one set")
    table = dict(knots=knots, coeffs=np.stack([s.c for s in splines]),
                 neutral=np.stack([steps.neutral_pos[leg][:, 0] for leg in LEGS]),
                 swing_end=np.array([steps.swing_period[leg][1] for leg in LEGS]))
    tmp = f"{path}.tmp.npz"
    np.savez(tmp, **{k: np.asarray(v, dtype=np.float64) for k, v in table.items()})
    os.replace(tmp, path)
    return path


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=STEPS_FILE)
    print(export_steps(ap.parse_args(argv).path))


if __name__ == "__main__":
    main()
