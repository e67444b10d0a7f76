"""flycuda's layers, read from the source (AST, nothing imported): every import between
flycuda's modules points down the stack, no module imports itself round a cycle, and
no module imports another module's private names (as gsplat's import-layer test).

    errors, _buildcfg  <-  _ext, profile  <-  ops, reference, dev, driver  <-  sim, recording
        <-  render  <-  vision  <-  replay  <-  env  <-  cli

sim and recording sit side by side; of them only sim.flygym (FlyGym's recordings) may import
recording, never the reverse. The references read the ops' launch plans, and dev the grid emulator.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "flycuda")

# the stage of each top-level name under flycuda (a subpackage or a module), low to high
RANKS = {"errors": 0, "_buildcfg": 0, "_C": 0, "_ext": 1, "profile": 1, "ops": 2, "reference": 2, "dev": 2, "driver": 2,
         "sim": 3, "recording": 3, "flygym": 3, "render": 4, "vision": 5, "replay": 6, "env": 7, "cli": 8,
         "__main__": 9}
# imports between two stages of the same rank that are allowed (importer prefix -> imported stage)
EXTENSIONS = {"flycuda._C"}  # compiled modules (no .py file)
SIDEWAYS = {("flycuda.sim.flygym", "recording"), ("flycuda.flygym", "sim"),
            ("flycuda.reference", "ops"), ("flycuda.dev", "reference")}  # references read the launch plans


@dataclass(frozen=True)
class Edge:
    src: str      # importing module (dotted)
    dst: str      # imported module (dotted; a package means its __init__)
    names: tuple  # the names imported from dst
    line: int


def modules(package_dir: str) -> dict[str, str]:
    """dotted module name -> file path, for every .py file under ``package_dir``."""
    base = os.path.basename(package_dir)
    out = {}
    for dp, _, files in os.walk(package_dir):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dp, f), os.path.dirname(package_dir))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(dp, f)
    assert base in out, f"{package_dir} has no __init__.py"
    return out


def edges(mods: dict[str, str]) -> list[Edge]:
    """Every import of one of ``mods`` by another (module level and inside functions)."""
    out = []
    for name, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        pkg = name if is_pkg else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] not in mods:
                    continue
                names = tuple(a.name for a in node.names)
                subs = [n for n in names if f"{base}.{n}" in mods or f"{base}.{n}" in EXTENSIONS]  # modules
                for n in subs:
                    out.append(Edge(name, f"{base}.{n}", (), node.lineno))
                rest = tuple(n for n in names if n not in subs)
                if rest or not subs:
                    out.append(Edge(name, base, rest, node.lineno))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in mods:
                        out.append(Edge(name, a.name, (), node.lineno))
    return out


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_violations(es: list[Edge]) -> list[str]:
    bad = []
    for e in es:
        a, b = stage(e.src), stage(e.dst)
        if a == "__init__" or a == b or b == "__init__" and a == "cli":
            continue  # the top-level surface; within a stage; the CLI may use the surface
        if a not in RANKS or b not in RANKS:
            bad.append(f"{e.src}:{e.line} imports {e.dst}: unknown stage (add it to RANKS)")
        elif RANKS[b] > RANKS[a] or (RANKS[b] == RANKS[a] and not any(
                e.src.startswith(s) and b == t for s, t in SIDEWAYS)):
            bad.append(f"{e.src}:{e.line} ({a}) imports {e.dst} ({b}): layers point the other way")
    return bad


def cycles(es: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set] = {}
    for e in es:
        if e.src != e.dst:
            graph.setdefault(e.src, set()).add(e.dst)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def private_imports(es: list[Edge], mods: dict[str, str]) -> list[str]:
    return [f"{e.src}:{e.line} imports {n} from {e.dst}" for e in es for n in e.names
            if n.startswith("_") and not n.startswith("__") and f"{e.dst}.{n}" not in mods and e.dst != e.src
            and f"{e.dst}.{n}" not in EXTENSIONS]


@pytest.fixture(scope="module")
def graph():
    mods = modules(PACKAGE)
    return mods, edges(mods)


def test_every_stage_is_known(graph):
    mods, _ = graph
    assert sorted({stage(m) for m in mods} - set(RANKS) - {"__init__"}) == []


def test_layers_point_one_way(graph):
    _, es = graph
    assert layer_violations(es) == []


def test_no_import_cycles(graph):
    _, es = graph
    assert cycles(es) == []


def test_no_cross_module_private_imports(graph):
    mods, es = graph
    assert private_imports(es, mods) == []


def test_the_checks_catch_what_they_check(tmp_path):
    """A package with an upward import, a cycle and a private import: each is found (so
    the tests above can fail)."""
    pkg = tmp_path / "flycuda"
    for sub in ("ops", "sim", "replay"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "a.py").write_text("from ..replay import run\n")       # ops -> replay: upward
    (pkg / "replay" / "run.py").write_text("from ..sim.b import _hidden\n")  # private name
    (pkg / "sim" / "b.py").write_text("from . import c\n_hidden = 1\n")
    (pkg / "sim" / "c.py").write_text("def f():\n    from .b import _hidden\n")  # a cycle b <-> c
    mods = modules(str(pkg))
    es = edges(mods)
    assert any("flycuda.ops.a" in v and "layers point the other way" in v for v in layer_violations(es))
    assert cycles(es) == [["flycuda.sim.b", "flycuda.sim.c"]]
    assert any("_hidden from flycuda.sim.b" in v and v.startswith("flycuda.replay.run") for v in
               private_imports(es, mods))


def test_the_public_surface_is_small_and_lazy():
    """``import flycuda`` loads the ops (and their errors), never Warp or the stages; the
    main classes come on first use; every flycuda error is a FlycudaError."""
    import subprocess
    import sys

    code = ("import sys, flycuda; print(sorted(m for m in ('warp', 'mujoco_warp', 'flycuda.sim', 'flycuda.replay', "
            "'flycuda.render', 'flycuda.vision', 'flycuda.recording', 'zarr') if m in sys.modules)); "
            "from flycuda import Sim, Motion, Recording, TileRenderer, Vision, RetinaMap; print(Sim.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "flycuda.sim.mjwarp"

    import flycuda
    from flycuda import errors

    classes = [getattr(errors, n) for n in errors.__all__]
    assert all(issubclass(c, flycuda.FlycudaError) for c in classes) and issubclass(flycuda.FlycudaError, ValueError)
    defined = set()
    for path in modules(PACKAGE).values():
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                defined.add((os.path.relpath(path, ROOT), node.name))
    assert {p for p, _ in defined} == {"flycuda/errors.py"}, defined  # every error class is in errors.py
