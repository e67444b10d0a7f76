"""Issue 53's device script, the steps a lent GPU runs first: the real fly (NeuroMechFly, frozen by
:mod:`flycuda.flygym.frozen` where FlyGym is) measured on the GPU, each beside its anchor in the
same run, and the kernels the issue reshapes timed against what a user would otherwise run.

Groups (``flycuda gpu-check --only GROUP``), in the order a lease's calls run them
(bench/lease/README.md):

* ``connectome``: flyvis's network at 1,024 and 4,096 flies against torch's CSR SpMM pipeline
  (bench_connectome; needs only torch and flyvis's connectome file);
* ``nmf``: NeuroMechFly's replay at 1,000, 4,096 and 8,192 worlds against FlyGym's tutorial loop
  transcribed on the same model (bench_replay); the renderer on NeuroMechFly and fly-mesh at 64x64
  and 320x240 against mjw.render (bench_render); the env with the eyes (``fast:2``) and with the
  descending drives at 4,096 worlds (``flycuda env``); the reset path in every step against only
  when a world ended, with both (bench_env --reset-branch); odor at 4,096 worlds beside a physics
  step (bench_odor). Needs MuJoCo Warp, and NeuroMechFly from FlyGym or ``$FLYCUDA_NEUROMECHFLY``;
* ``brain``: the whole-brain model at FlyWire's scale (139,255 neurons, a generated connectome of its
  statistics), 1, 32 and 256 brains x 1 s (bench_brain; issue 55's goals: 32 brains in <= 2.4 s, one
  faster than real time; needs only torch).

``flycuda gpu-check --dry-run`` lists them, each with its command and why it would be skipped,
without a GPU.
"""

from __future__ import annotations

import os

from . import steps as st

__all__ = ["GROUPS", "steps", "no_neuromechfly"]

GROUPS = ("connectome", "nmf", "brain")
"""The groups this module's steps belong to."""
REPLAY_WORLDS = ("1000", "4096", "8192")
ENV_WORLDS = "4096"
FROZEN_ENV = "FLYCUDA_NEUROMECHFLY"  # flycuda.flygym.frozen.ENV


def no_neuromechfly() -> str:
    """Why NeuroMechFly cannot be built here ("" when it can): FlyGym, or its frozen variants."""
    folder = os.environ.get(FROZEN_ENV, "")  # gpucheck sits below flycuda.flygym: its names, not its import
    if st.installed("flygym") or os.path.isfile(os.path.join(folder, "neuromechfly-flat.tar.xz")):
        return ""
    return (f"neither FlyGym nor a frozen NeuroMechFly (${FROZEN_ENV}; where FlyGym is: python -m "
            "flycuda.flygym.freeze DIR)")


def _env(out_dir: str, name: str, task: str, extra: list[str], python: str) -> list[str]:
    return [python, "-m", "flycuda", "env", task, "--model", "neuromechfly", "--worlds", ENV_WORLDS, "--device",
            "cuda", "--duration", "0.02", "--no-progress", "--json", os.path.join(out_dir, f"{name}.json")] + extra


def steps(python: str, out_dir: str, no_warp: str, no_tests: str, no_connectome: str) -> list[st.Step]:
    """The device script's steps (see the module's doc)."""
    no_nmf = no_warp or no_tests or no_neuromechfly()
    bench = lambda name, args, timeout, skip, group: st.Step(  # noqa: E731
        name, [python, f"bench/{name.split(' ')[0]}.py"] + args, timeout=timeout, skip=skip, group=group)
    return [
        bench("bench_connectome (against SpMM)", ["--gpu-flies", "1024", "4096", "--repeats", "3", "--no-results"], 150.0,
              no_tests or no_connectome, "connectome"),
        bench("bench_replay (NeuroMechFly)", ["--device", "cuda", "--models", "neuromechfly", "--worlds",
                                              *REPLAY_WORLDS, "--steps", "200", "--repeats", "1", "--no-record"],
              200.0, no_nmf, "nmf"),
        bench("bench_render (NeuroMechFly)", ["--device", "cuda", "--scenes", "neuromechfly", "fly-mesh", "--worlds",
                                              "1000", "--sizes", "64x64", "320x240", "--frames", "3", "--repeats", "1",
                                              "--no-record"], 120.0, no_nmf, "nmf"),
        st.Step("env with the eyes (NeuroMechFly, fast:2)",
                _env(out_dir, "env_eyes", "imitate", ["--vision", "fast:2"], python), timeout=90.0, skip=no_nmf,
                group="nmf"),
        st.Step("env with the descending drives (NeuroMechFly)",
                _env(out_dir, "env_descending", "walk", ["--action", "descending"], python), timeout=80.0,
                skip=no_nmf, group="nmf"),
        bench("bench_env --reset-branch (NeuroMechFly)", ["--device", "cuda", "--model", "neuromechfly", "--reset-branch",
                                                          "--worlds", ENV_WORLDS, "--steps", "20", "--rounds", "2",
                                                          "--no-results"], 150.0, no_nmf, "nmf"),
        bench("bench_odor (4,096 worlds)", ["--device", "cuda", "--gpu-worlds", "4096", "--steps", "200", "--repeats",
                                            "2", "--no-results"], 60.0, no_warp or no_tests, "nmf"),
        bench("bench_brain (139,255 neurons, 1/32/256 brains)", ["--device", "cuda", "--neurons", "139255",
                                                                 "--full-brains", "1", "32", "256", "--full-duration",
                                                                 "1.0", "--no-brian2", "--no-results"], 240.0,
              no_tests, "brain"),
    ]
