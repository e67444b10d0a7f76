"""A/B of the renderer and the eyes between two builds of flycuda (this machine drifts by 20-30%
from minute to minute, so compare builds by alternating processes, not by single bench rows).

    git worktree add /tmp/before COMMIT && (cd /tmp/before && FLYCUDA_FORCE_CPU=1 python setup.py build_ext --inplace)
    for i in 1 2 3 4 5; do for tree in /tmp/before .; do (cd $tree && PYTHONPATH=$tree python $OLDPWD/bench/ab_renderer.py); done; done

Prints one JSON line per process: ms per call (median of 5 runs) of NeuroMechFly and fly-mesh at
320x240 and of the eyes (exact, fast:4), 4 worlds on the CPU. Needs FlyGym. bench/RESULTS.md
(2026-11-23 19:30) holds the issue-27 table made with it.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_render import make_scene  # noqa: E402
from bench_vision import _nmf_worlds  # noqa: E402

import flycuda  # noqa: E402
from flycuda import flygym as fg  # noqa: E402
from flycuda.render import TileRenderer  # noqa: E402
from flycuda.vision import Vision  # noqa: E402


def med(fn, n, reps=5):
    fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(out)
res = {}
sim, cam = make_scene("neuromechfly", "cpu", 4)
res["nmf 320x240 x4 (ms)"] = med(TileRenderer(sim, cam, 320, 240).render, 3)
sim2, cam2 = make_scene("fly-mesh", "cpu", 4)
res["fly-mesh 320x240 x4 (ms)"] = med(TileRenderer(sim2, cam2, 320, 240).render, 3)
fly, world, _ = fg.neuromechfly(vision=True)
vs = _nmf_worlds(fg, world, 4, "cpu")
res["vision exact x4 (ms)"] = med(Vision(vs).update, 3)
res["vision fast:4 x4 (ms)"] = med(Vision(vs, mode="fast", k=4).update, 30)
print(flycuda.__file__, json.dumps(res))
