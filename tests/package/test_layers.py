"""flycuda's layers, read from the source (AST, nothing imported): every import between
flycuda's modules points down the stack, no module imports itself round a cycle, and
no module imports another module's private names (as gsplat's import-layer test).

    errors, _buildcfg  <-  _ext, profile  <-  ops, reference, dev, driver  <-  sim, recording, gpucheck
        <-  flygym, control, brain  <-  render  <-  vision  <-  worlds  <-  replay  <-  env  <-  cli

sim and recording sit side by side and never import each other; FlyGym's wing (flygym) stands
on both, and FlyGym's walking controllers (control) beside it. The references read the ops' launch plans, and dev the grid emulator.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "flycuda")

# the stage of each top-level name under flycuda (a subpackage or a module), low to high
RANKS = {"errors": 0, "_buildcfg": 0, "_C": 0, "_ext": 1, "profile": 1, "ops": 2, "reference": 2, "dev": 2, "driver": 2,
         "sim": 3, "recording": 3, "gpucheck": 3, "brain": 4, "flygym": 4, "control": 4, "render": 5, "vision": 6, "worlds": 7, "replay": 8,
         "env": 9, "cli": 10, "__main__": 11}
# imports between two stages of the same rank that are allowed (importer prefix -> imported stage)
EXTENSIONS = {"flycuda._C"}  # compiled modules (no .py file)
SIDEWAYS = {("flycuda.reference", "ops"), ("flycuda.dev", "reference")}  # references read the launch plans


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
        if a == "__init__" or a == b or b == "__init__" and a in ("cli", "gpucheck"):
            continue  # the top-level surface; within a stage; the CLI and the self-check may use the surface
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


def private_reads(mods: dict[str, str]) -> list[str]:
    """``obj._name`` read in one stage where ``_name`` is defined (``self._name = ...``, a
    method, a class attribute) only in other stages: a package reaching into another's
    internals, which imports alone do not show (``self``/``cls`` and names a stage defines
    itself are its own business)."""
    owners: dict[str, set] = {}
    trees = {name: ast.parse(open(path).read(), path) for name, path in mods.items()}
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                owners.setdefault(node.attr, set()).add(stage(name))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    targets = [item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                        [t.id for t in getattr(item, "targets", [getattr(item, "target", None)])
                         if isinstance(t, ast.Name)]
                    for t in targets:
                        owners.setdefault(t, set()).add(stage(name))
    bad = []
    for name, tree in trees.items():
        # other libraries' modules (torch._check is torch's business)
        outside = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                   for a in n.names if a.name.split(".")[0] not in mods}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"} | outside) \
                    and node.attr in owners and stage(name) not in owners[node.attr]:
                bad.append(f"{name}:{node.lineno} reads .{node.attr} of {sorted(owners[node.attr])}")
    return bad


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


def test_no_private_attribute_reads_across_stages(graph):
    mods, _ = graph
    assert private_reads(mods) == []


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
    (pkg / "sim" / "d.py").write_text("class Sim:\n    def __init__(self):\n        self._wp = 1\n")
    (pkg / "replay" / "e.py").write_text("def g(sim):\n    return sim._wp\n")  # reaches into sim's internals
    mods = modules(str(pkg))
    es = edges(mods)
    assert any("flycuda.ops.a" in v and "layers point the other way" in v for v in layer_violations(es))
    assert cycles(es) == [["flycuda.sim.b", "flycuda.sim.c"]]
    assert any("_hidden from flycuda.sim.b" in v and v.startswith("flycuda.replay.run") for v in
               private_imports(es, mods))
    assert private_reads(mods) == ["flycuda.replay.e:2 reads ._wp of ['sim']"]


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
