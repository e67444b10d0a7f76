"""NeuroMechFly v2's controller x terrain comparison (Wang-Chen et al. 2024, Fig. 3), batched: the
CPG, rule-based and hybrid controllers (flycuda.control, FlyGym's own equal to them world by world)
walk FlyGym's locomotion fly on flat, gapped, blocks and mixed terrain, every cell's worlds at once
in one MuJoCo Warp simulation per terrain. FlyGym's own CPU loop (its Simulation and its
controllers, one fly at a time) runs the first few worlds of every cell as the anchor, with the
same spawns and seeds. Needs FlyGym (the FlyGym lane).

Per world: spawned 0.8 mm above the terrain, its x and y jittered (uniform within +-jitter mm),
FlyGym's reset and 0.05 s warm-up (the keyframe's controls), then ``--seconds`` of walking. A
fly is *fallen* when its thorax tilted past 90 degrees or sank 1 mm below where it stood after
the warm-up (into a gap), *stuck* when it is not fallen and walked forward (x) at under
``--stuck-speed`` mm/s. Its physics going non-finite is counted apart (and as fallen).

    python bench/bench_terrain.py [--worlds 8] [--seconds 0.5] [--anchor 2] [--device cpu]
                                  [--terrains flat,gapped,blocks,mixed] [--plot PATH] [--no-results]
"""

from __future__ import annotations

import argparse
import os
import tarfile
import time

import numpy as np
import torch
from _results import append_results, format_table
from tqdm.auto import tqdm

DT = 1e-4
CONTROLLERS = ("cpg", "rule", "hybrid")
TERRAINS = ("flat", "gapped", "blocks", "mixed")
WARMUP_STEPS = 500  # FlyGym's Simulation.warmup(): 0.05 s
THORAX = "nmf/c_thorax"
SINK = 1.0  # mm below its standing height: fallen into a gap
GPU_TOLERANCE = 1e-5  # FlyGym's GPUSimulation's solver tolerance
CAPACITY = 500  # contacts and constraint rows per world: FlyGym's GPUSimulation's defaults


def spawns(n: int, jitter: float, seed: int = 0) -> np.ndarray:
    """[n, 2] the worlds' spawn offsets in x and y (mm), world w the same in every cell."""
    return np.random.RandomState(seed).uniform(-jitter, jitter, (n, 2))


def outcome(dx, z0, z, up, finite, seconds: float, stuck_speed: float) -> dict:
    """Per world: forward distance (mm), fallen, stuck, non-finite."""
    dx, z0, z, up, finite = (np.asarray(a) for a in (dx, z0, z, up, finite))
    fallen = ~finite | (up < 0) | (z < z0 - SINK)
    stuck = ~fallen & (dx < stuck_speed * seconds)
    return dict(dx=np.where(finite, dx, np.nan), fallen=fallen, stuck=stuck, nonfinite=~finite)


# -- flycuda: every controller's worlds of one terrain in one MuJoCo Warp simulation -----------------
def model_file(models: str, terrain: str) -> str:
    return os.path.join(models, f"nmf-locomotion-{terrain}.tar.xz")


def terrain_model(terrain: str, models: str | None = None):
    """The terrain's world as FlyGym's GPUSimulation compiles it (the locomotion fly, MuJoCo
    Warp's fit: flycuda.flygym.terrain): built by FlyGym, or read from ``models`` (its MJCF and
    meshes, written by ``--export`` where FlyGym is, for a GPU machine without it)."""
    import mujoco

    if models and os.path.exists(model_file(models, terrain)):
        with tarfile.open(model_file(models, terrain), "r:xz") as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        mjm = mujoco.MjSpec.from_string(files.pop("world.xml").decode(), assets=files).compile()
        mjm.opt.timestep, mjm.opt.tolerance = DT, GPU_TOLERANCE  # GPUSimulation's option overrides
        return mjm
    return _flygym_setup(terrain).gpu_sim.mj_model


def _flygym_setup(terrain: str):
    from flycuda.flygym import Setup

    return Setup("neuromechfly", 1, device="cpu", terrain=terrain, locomotion=True)


def export(models: str, terrains: list[str]) -> None:
    """Writes each terrain's world as GPUSimulation compiles it (its MJCF, the meshes named by
    their file names, xz) into ``models``."""
    from flycuda.flygym.freeze import world_files, write_tar

    os.makedirs(models, exist_ok=True)
    for terrain in terrains:
        spec = _flygym_setup(terrain).world.mjcf_root  # GPUSimulation stripped what MuJoCo Warp lacks
        xml, meshes = world_files(spec)  # the meshes named by their file names
        path = model_file(models, terrain)
        write_tar(path, [("world.xml", xml.encode())] + list(meshes.items()))  # whole, then renamed
        print(f"{path}: {os.path.getsize(path) / 2**20:.1f} MiB")


def quiet_iterations(model) -> None:
    """No printed warning when a world's solver reaches its iteration limit, as GPUSimulation
    (and MuJoCo Playground) set it; the buffers' overflow warnings stay."""
    import mujoco_warp as mjw

    model.opt.warn_overflow &= ~(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)


class Batched:
    """3 x W worlds of one terrain: worlds [k W, (k+1) W) driven by controller k. Built as
    FlyGym's GPUSimulation builds them (its contact and constraint capacities), reset to FlyGym's
    keyframe, each world's spawn shifted."""

    def __init__(self, terrain: str, W: int, device: str, jitter: float, models: str | None = None):
        from flycuda.control import CPGController, HybridController, RuleBasedController
        from flycuda.env.descending import locomotion_actuators
        from flycuda.flygym import HybridSenses
        from flycuda.sim import Sim

        mjm = terrain_model(terrain, models)
        self.W, self.sim = W, Sim.build(mjm, 3 * W, device=device, nconmax=CAPACITY, njmax=CAPACITY)
        quiet_iterations(self.sim.model)
        dev = self.sim.device
        self.ids = locomotion_actuators(self.sim).long().to(dev)
        self.senses = HybridSenses.of_model(mjm, "nmf")
        self.controllers = [CPGController(W, DT, device=dev), RuleBasedController(W, DT, device=dev),
                            HybridController(W, DT, device=dev)]
        self.thorax = mjm.body(THORAX).id
        key = mjm.key("neutral").id  # FlyGym's reset: its keyframe's state and controls
        for name, value in (("qpos", mjm.key_qpos[key]), ("ctrl", mjm.key_ctrl[key]), ("qvel", 0.0)):
            self.sim.view(name).copy_(torch.as_tensor(value, dtype=torch.float32))
        adr = int(mjm.jnt_qposadr[mjm.joint("nmf").id])
        shift = torch.as_tensor(np.tile(spawns(W, jitter), (3, 1)), dtype=torch.float32, device=dev)
        self.sim.view("qpos")[:, adr:adr + 2] += shift
        self.timing = Timing(dev)

    def _pose(self):
        xpos, xmat = self.sim.view("xpos")[:, self.thorax], self.sim.view("xmat")[:, self.thorax]
        return xpos[:, 0].clone(), xpos[:, 2].clone(), xmat[:, 2, 2].clone()

    def run(self, steps: int, progress) -> list[tuple]:
        """Warm-up, then ``steps`` controlled steps; per controller (dx, z0, z, up, finite)."""
        from flycuda.sim import streams

        with streams.shared_stream(self.sim.device):  # torch, Warp and the timing events on one stream
            for _ in range(WARMUP_STEPS):
                self.sim.step()
            self.senses.read(self.sim)
            x0, z0, _ = self._pose()
            ctrl, W = self.sim.view("ctrl"), self.W
            for _ in range(steps):
                self.timing.mark()
                inputs = [x[2 * W:] for x in self.senses.inputs()]
                for k, c in enumerate(self.controllers):
                    angles, adhesion = c.step(*inputs) if k == 2 else c.step()
                    ctrl[k * W:(k + 1) * W].index_copy_(1, self.ids, torch.cat([angles, adhesion.float()], 1))
                self.timing.mark()
                self.sim.step()
                self.timing.mark()
                self.senses.read(self.sim)  # (the controllers' share: read for the next step)
                progress.update(1)
            x, z, up = self._pose()
            finite = torch.isfinite(self.sim.view("qpos")).all(1) & torch.isfinite(self.sim.view("qvel")).all(1)
            cols = [t.cpu().numpy() for t in (x - x0, z0, z, up, finite)]
        return [tuple(c[k * W:(k + 1) * W] for c in cols) for k in range(3)]


class Timing:
    """Seconds spent per step in the controllers (their senses included) and in the physics: CUDA
    events on a GPU (no sync in the loop), the host's clock on the CPU."""

    def __init__(self, device: torch.device):
        self.device, self.cuda, self.marks = device, device.type == "cuda", []

    def mark(self) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record(torch.cuda.current_stream(self.device))
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def split(self) -> tuple[float, float]:
        """(controller s, physics s) in all: marks come in threes (controllers, physics, next step's
        senses read with the next controllers)."""
        if self.cuda:
            torch.cuda.synchronize()
            span = lambda a, b: a.elapsed_time(b) / 1e3  # noqa: E731
        else:
            span = lambda a, b: b - a  # noqa: E731
        m = self.marks
        physics = sum(span(m[i + 1], m[i + 2]) for i in range(0, len(m) - 2, 3))
        control = sum(span(m[i], m[i + 1]) for i in range(0, len(m) - 2, 3))
        control += sum(span(m[i + 2], m[i + 3]) for i in range(0, len(m) - 3, 3))  # senses of the next step
        return control, physics


# -- FlyGym's own loop, one fly at a time (the anchor) --------------------------------------------------
def flygym_world(terrain: str, controller: str, w: int, steps: int, jitter: float, W: int) -> tuple:
    """World w of a cell in FlyGym's CPU Simulation with its own controller (seeded as flycuda's
    world w), its own world unchanged: (dx, z0, z, up, finite)."""
    import mujoco
    from flygym import Simulation
    from flygym.utils.math import Rotation3D
    from flygym_demo.complex_terrain import (
        CPGController,
        HybridController,
        HybridControllerObservation,
        PreprogrammedSteps,
        apply_locomotion_action,
        make_locomotion_fly,
        make_tripod_cpg_network,
    )
    from flygym_demo.complex_terrain.rule_based_controller import RuleBasedController

    from flycuda.flygym.terrain import spawn_height, terrain_world

    world, fly = terrain_world(terrain), make_locomotion_fly()
    jx, jy = spawns(W, jitter)[w]
    world.add_fly(fly, (jx, jy, spawn_height(terrain)), Rotation3D("quat", (1, 0, 0, 0)))
    sim = Simulation(world, timestep=DT)
    sim.reset()
    sim.warmup()
    if controller == "cpg":
        c = CPGController(make_tripod_cpg_network(DT, seed=w), PreprogrammedSteps())
    elif controller == "rule":
        c = RuleBasedController(DT, seed=w)
    else:
        c = HybridController(DT, cpg_network=make_tripod_cpg_network(DT, seed=w))
    body = mujoco.mj_name2id(sim.mj_model, mujoco.mjtObj.mjOBJ_BODY, THORAX)
    d = sim.mj_data
    x0, z0 = d.xpos[body, 0], d.xpos[body, 2]
    for _ in range(steps):
        action = c.step(HybridControllerObservation.from_sim(sim, fly.name)) if controller == "hybrid" else c.step()
        apply_locomotion_action(sim, fly.name, action)
        sim.step()
    finite = bool(np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all())
    return d.xpos[body, 0] - x0, z0, d.xpos[body, 2], d.xmat[body, 8], finite


# -- the table and the plot -------------------------------------------------------------------------------
def row(terrain, controller, engine, o: dict, wall: float, share: str = "-") -> list:
    n = len(o["dx"])
    dx = o["dx"][np.isfinite(o["dx"])]
    dist = f"{dx.mean():.2f} +- {dx.std():.2f}" if len(dx) else "-"
    return [terrain, controller, engine, n, dist, f"{100 * o['stuck'].mean():.0f}%", f"{100 * o['fallen'].mean():.0f}%",
            int(o["nonfinite"].sum()), f"{wall:.0f}", share]


def plot(results: dict, path: str, seconds: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    terrains = list(dict.fromkeys(t for t, _, _ in results))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), tight_layout=True)
    width = 0.26
    for k, c in enumerate(CONTROLLERS):
        xs = np.arange(len(terrains)) + (k - 1) * width
        ours = [results.get((t, c, "flycuda")) for t in terrains]
        axes[0].bar(xs, [np.nanmean(o["dx"]) if o else 0 for o in ours], width,
                    yerr=[np.nanstd(o["dx"]) if o else 0 for o in ours], label=c, capsize=2)
        axes[1].bar(xs, [100 * (o["stuck"] | o["fallen"]).mean() if o else 0 for o in ours], width, label=c)
        anchor = [results.get((t, c, "flygym")) for t in terrains]
        for x, a in zip(xs, anchor):
            if a is not None:
                axes[0].plot([x] * len(a["dx"]), a["dx"], "k.", ms=4)
    axes[0].set_ylabel(f"distance walked in {seconds:g} s (mm)")
    axes[1].set_ylabel("stuck or fallen (%)")
    for ax in axes:
        ax.set_xticks(np.arange(len(terrains)), terrains)
    axes[0].legend(title="controller (bars: flycuda; dots: FlyGym)", fontsize=7, title_fontsize=7)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", type=int, default=8, help="worlds per controller and terrain")
    p.add_argument("--seconds", type=float, default=0.5, help="walking time after the warm-up")
    p.add_argument("--anchor", type=int, default=2, help="worlds of each cell FlyGym's own loop runs (0: none)")
    p.add_argument("--terrains", default=",".join(TERRAINS))
    p.add_argument("--jitter", type=float, default=0.65, help="spawn jitter in x and y, mm")
    p.add_argument("--stuck-speed", type=float, default=2.0, help="mm/s forward under which a fly is stuck")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default=None, metavar="DIR", help="the terrains' worlds from --export (no FlyGym)")
    p.add_argument("--export", default=None, metavar="DIR", help="write the terrains' worlds there and exit")
    p.add_argument("--plot", default="out/bench_terrain.png", metavar="PATH.png")
    p.add_argument("--no-results", action="store_true", help="do not append to bench/RESULTS.md")
    a = p.parse_args(argv)
    terrains = [t for t in a.terrains.split(",") if t]
    bad = sorted(set(terrains) - set(TERRAINS))
    if bad or a.worlds < 1 or a.seconds <= 0 or not 0 <= a.anchor <= a.worlds:
        p.error(f"terrains are {', '.join(TERRAINS)} (got {bad}); worlds >= 1, seconds > 0, 0 <= anchor <= worlds")
    if a.export:
        return export(a.export, terrains)
    steps = int(round(a.seconds / DT))
    results, rows = {}, []
    total = len(terrains) * (steps + a.anchor * len(CONTROLLERS) * steps)
    with tqdm(total=total, desc="bench_terrain", unit="step", mininterval=10) as bar:
        for terrain in terrains:
            t0 = time.perf_counter()
            batch = Batched(terrain, a.worlds, a.device, a.jitter, a.models)
            built = time.perf_counter() - t0
            cells = batch.run(steps, bar)
            wall = time.perf_counter() - t0
            tqdm.write(f"bench_terrain: {terrain}: {3 * a.worlds} worlds built in {built:.0f} s, warmed up and "
                       f"walked in {wall - built:.0f} s")
            control, physics = batch.timing.split()
            share = f"{100 * control / physics:.1f}%"
            for c, cell in zip(CONTROLLERS, cells):
                results[(terrain, c, "flycuda")] = outcome(*cell, a.seconds, a.stuck_speed)
                rows.append(row(terrain, c, f"flycuda ({a.device})", results[(terrain, c, "flycuda")], wall, share))
            for c in CONTROLLERS if a.anchor else ():
                t0 = time.perf_counter()
                runs = [flygym_world(terrain, c, w, steps, a.jitter, a.worlds) for w in range(a.anchor)]
                bar.update(a.anchor * steps)
                results[(terrain, c, "flygym")] = outcome(*zip(*runs), a.seconds, a.stuck_speed)
                rows.append(row(terrain, c, "FlyGym loop (CPU)", results[(terrain, c, "flygym")],
                                time.perf_counter() - t0))
    table = format_table(["terrain", "controller", "engine", "flies", "distance mm (mean +- sd)", "stuck", "fallen",
                          "non-finite", "wall s", "controllers / physics"], rows)
    print(table)
    plot(results, a.plot, a.seconds)
    print(f"plot: {a.plot}")
    if not a.no_results:
        append_results(f"bench_terrain: controllers x terrains, {a.worlds} worlds x {a.seconds:g} s per cell",
                       a.device, table, notes=f"spawn jitter +-{a.jitter:g} mm; stuck: under {a.stuck_speed:g} mm/s "
                       "forward; fallen: tilted past 90 degrees or 1 mm below its standing height; a flycuda row's "
                       "wall time is its terrain's (the three controllers' worlds in one simulation, its build "
                       "included) and 'controllers / physics' the time in the three controllers and the senses "
                       "against the time in MuJoCo Warp's steps")


if __name__ == "__main__":
    main()
