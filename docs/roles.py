"""A griffe extension: the docstrings' Sphinx roles (``:func:`spline_to_ctrl```, ``:mod:`.step```,
``:class:`~flycuda.sim.Sim```) as cross-references in the API pages.

flycuda's docstrings name each other in Sphinx's roles. Every role is resolved where it is written
(the docstring's own scope and imports, as Python would, then flycuda's package tree):

* a name in flycuda becomes an optional cross-reference: a link where the reference renders that
  object (a stage's public name, the stage itself), plain code otherwise (a module inside a stage);
* a name outside flycuda (``torch.Tensor``, ``gymnasium.vector.VectorEnv``) becomes plain code;
* a name that resolves nowhere, such as a renamed or moved object, is a broken reference: the
  extension logs a warning, which ``mkdocs build --strict`` turns into a failed build.

It also lets a package's name imported from its same-named submodule shadow that submodule, as
at run time (``shadow_submodules``: ``flycuda.cli.main`` is the entry point function).

Used by mkdocs.yml (mkdocstrings' ``extensions:``) and by docs/check_api.py (``broken_references``,
``shadow_submodules``).
"""

from __future__ import annotations

import builtins
import html
import logging
import re

import griffe

# :role:`target`, :role:`~target` (shown as its last name), :py:role:`!target` (no link)
ROLE = re.compile(r":(?:py:)?(?P<role>mod|func|class|data|attr|meth|exc|obj|const):`(?P<mark>[~!]?)(?P<target>[^`]+)`")
_log = logging.getLogger("mkdocs.plugins.flycuda.roles")  # mkdocs counts its warnings (--strict)
# Modules that replace themselves in sys.modules, which static analysis cannot see: a path that
# is not found under its own name is looked up again under the module's real one.
MODULE_ALIASES: dict = {}


def _member(root: griffe.Object, path: str) -> griffe.Object | None:
    """The object at a dotted ``path`` below ``root`` (``path`` starts with root's name), following
    imports inside the package and MODULE_ALIASES; None where nothing is there."""
    found = _lookup(root, path)
    for alias, real in MODULE_ALIASES.items():
        if found is None and (path == alias or path.startswith(alias + ".")):
            found = _lookup(root, real + path[len(alias):])
    return found


def _lookup(root: griffe.Object, path: str) -> griffe.Object | None:
    parts = path.split(".")
    if parts[0] != root.name:
        return None
    obj = root
    for part in parts[1:]:
        try:
            target = obj.final_target if obj.is_alias else obj
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        member = target.members.get(part)
        if member is None:
            return None
        obj = member
    return obj


def resolve(root: griffe.Object, obj: griffe.Object, target: str) -> tuple[str, str | None]:
    """Where ``target``, written in ``obj``'s docstring, points: ``("flycuda", path)`` for an object in
    the package ``root``, ``("external", None)`` for one outside it, ``("broken", None)`` for nothing."""
    target = target.strip().rstrip("()")
    if target.startswith("."):  # relative to the docstring's module (Sphinx: .name)
        scope = obj if obj.is_module else obj.module
        while scope is not None:
            found = _member(root, scope.path + target)
            if found is not None:
                return "flycuda", found.path
            scope = scope.parent
        return "broken", None
    head, _, rest = target.partition(".")
    if head == root.name:
        found = _member(root, target)
        return ("flycuda", found.path) if found is not None else ("broken", None)
    try:
        path = obj.resolve(head)
    except griffe.NameResolutionError:
        # not in scope: another package's dotted name (torch.Tensor), a builtin (RuntimeError), or nothing
        return ("external", None) if rest or hasattr(builtins, head) else ("broken", None)
    full = f"{path}.{rest}" if rest else path
    if full.split(".")[0] != root.name:
        return "external", None
    found = _member(root, full)
    return ("flycuda", found.path) if found is not None else ("broken", None)


def convert(root: griffe.Object, obj: griffe.Object, text: str, broken: list[str] | None = None) -> str:
    """``text`` with every role replaced (see the module's docstring); broken ones appended to ``broken``."""

    def one(m: re.Match) -> str:
        target = m["target"]
        shown = target.lstrip(".").rstrip("()").split(".")[-1] if m["mark"] == "~" else target
        kind, path = resolve(root, obj, target)
        if kind == "broken":
            where = f"{obj.relative_filepath}:{obj.lineno}" if obj.lineno else str(obj.relative_filepath)
            message = f"{where}: {obj.path}'s docstring names :{m['role']}:`{target}`, which is not there"
            if broken is not None:
                broken.append(message)
        code = f"<code>{html.escape(shown)}</code>"
        if kind != "flycuda" or m["mark"] == "!":
            return code
        return f'<autoref identifier="{path}" optional>{code}</autoref>'

    return ROLE.sub(one, text)


def walk(obj: griffe.Object):
    """``obj`` and every object defined inside it (imports left out: each is walked where defined)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from walk(member)


def shadow_submodules(root: griffe.Object) -> None:
    """``from .main import main`` in a package's ``__init__`` binds the package's ``main`` to the
    function, as Python does at run time; griffe keeps the submodule under that name instead. Here
    the imported name wins (``flycuda.cli.main`` is the entry point, as ``flycuda.cli.main()``)."""
    for obj in list(walk(root)):
        if not (obj.is_module and obj.is_init_module):
            continue
        for name, target_path in obj.imports.items():
            member = obj.members.get(name)
            if member is None or member.is_alias or not member.is_module or target_path != f"{member.path}.{name}":
                continue
            target = member.members.get(name)
            if target is not None:
                obj.set_member(name, griffe.Alias(name, target, parent=obj))


def broken_references(root: griffe.Object) -> list[str]:
    """Every role in the package's docstrings that resolves nowhere, one line each."""
    broken: list[str] = []
    for obj in walk(root):
        if obj.docstring is not None:
            convert(root, obj, obj.docstring.value, broken)
    return broken


class SphinxRoles(griffe.Extension):
    """Rewrites the roles in every docstring of each package loaded (mkdocstrings loads flycuda)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        shadow_submodules(pkg)
        loader.resolve_aliases(implicit=False, external=False)
        broken: list[str] = []
        for obj in walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = convert(pkg, obj, obj.docstring.value, broken)
        for message in broken:
            _log.warning("broken reference: %s", message)
