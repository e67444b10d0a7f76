"""gpu-check's benchmark steps: one size each when ``quick`` (a short lease), the PPO curve, the
eyes, and the controllers on FlyGym's terrains."""

from __future__ import annotations

import importlib.util
import os

from .steps import Step

__all__ = ["benchmarks", "no_connectome", "TERRAIN_MODELS"]

TERRAIN_MODELS = os.path.join(".devstage", "terrain")
"""Where a checkout keeps the terrains' worlds for bench_terrain without FlyGym (its ``--export``)."""


def no_connectome() -> str:
    """Why bench_connectome cannot run here ("" when it can): it needs flyvis's connectome file,
    named by $FLYCUDA_CONNECTOME or in an installed flyvis (flycuda.vision.connectome.connectome_file
    looks there too; gpu-check does not import that layer)."""
    named = os.environ.get("FLYCUDA_CONNECTOME")
    if (named and os.path.isfile(named)) or (not named and importlib.util.find_spec("flyvis") is not None):
        return ""
    return "no flyvis connectome file (install flyvis with --no-deps, or set FLYCUDA_CONNECTOME)"


def benchmarks(python: str, quick: bool, no_warp: str, no_tests: str, no_flygym: str, no_terrain: str = "",
               out_dir: str = "out") -> list[Step]:
    """The benchmark steps (one size each when ``quick``), the PPO curve, the eyes and the
    controllers on FlyGym's terrains (NeuroMechFly v2's Fig. 3; FlyGym's own loop is the CPU
    run's anchor, not run here)."""
    def pick(full: str, short: str) -> list[str]:  # "100 1000" -> ["100", "1000"]
        return (short if quick else full).split()

    py = [python]
    limit = {"timeout": 150.0} if quick else {}
    return [
        Step("bench_ops", py + ["bench/bench_ops.py", "--device", "cuda", "--worlds", *pick("100 1000 4096", "4096"),
                                "--steps", *pick("500", "200"), "--repeats", *pick("3", "2"), "--no-record"]
             + (["--no-warp"] if no_warp else []), skip=no_tests, group="bench", **limit),
        Step("bench_control", py + ["bench/bench_control.py", "--device", "cuda", "--worlds", *pick("1024 4096", "4096"),
                                    "--steps", *pick("500", "200"), "--repeats", *pick("3", "2"), "--no-results"],
             skip=no_tests, group="control", **limit),
        Step("bench_replay", py + ["bench/bench_replay.py", "--device", "cuda", "--worlds", *pick("100 1000", "1000"),
                                   "--steps", *pick("200", "100"), "--repeats", *pick("2", "1"), "--no-record"],
             skip=no_warp or no_tests, group="bench", **limit),
        Step("bench_render", py + ["bench/bench_render.py", "--device", "cuda", "--worlds", *pick("100 1000", "1000"),
                                   "--sizes", *pick("64x64 320x240", "64x64"), "--frames", *pick("5", "3"),
                                   "--repeats", *pick("2", "1"), "--no-record"], skip=no_warp or no_tests, group="bench", **limit),
        Step("bench_env", py + ["bench/bench_env.py", "--device", "cuda", "--worlds", *pick("1024 4096", "4096"),
                                "--steps", *pick("50", "20"), "--rounds", *pick("3", "1"), "--no-results"],
             skip=no_warp or no_tests, group="bench", **limit),
        Step("bench_odor", py + ["bench/bench_odor.py", "--device", "cuda", "--gpu-worlds", *pick("1024 4096", "4096"),
                                 "--steps", *pick("500", "200"), "--repeats", *pick("3", "2"), "--no-results"],
             skip=no_tests, group="bench", **limit),
        Step("bench_connectome", py + ["bench/bench_connectome.py", "--gpu-flies", *pick("4096", "1024"),
                                       "--repeats", *pick("3", "2"), "--no-results"],
             skip=no_tests or no_connectome(), group="bench", **limit),
        Step("PPO on flycuda.env (a learning curve)",
             py + ["examples/ppo.py", "--task", "imitate", "--worlds", "4096", "--iterations", *pick("30", "5"),
                   "--device", "cuda"], skip=no_warp or no_tests, group="ppo"),
        Step("bench_vision", py + ["bench/bench_vision.py", "--device", "cuda", "--worlds", "1000", "8192",
                                   "--frames", "3", "--repeats", "2", "--hex", "", "--no-record"],
             skip=no_warp or no_tests or no_flygym, env={"MUJOCO_GL": "osmesa"}, group="vision"),
        Step("bench_terrain", py + ["bench/bench_terrain.py", "--device", "cuda", "--worlds", *pick("1000", "256"),
                                    "--seconds", *pick("1.5", "0.2"), *(["--terrains", "flat,mixed"] if quick else []),
                                    "--anchor", "0", "--models", TERRAIN_MODELS,
                                    "--plot", os.path.join(out_dir, "bench_terrain.png"), "--no-results"],
             skip=no_warp or no_tests or no_terrain, group="terrain"),
    ]
