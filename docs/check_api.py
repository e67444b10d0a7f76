"""The API reference's own checks, read statically (griffe): no torch, no compiled extension.

* every stage package (a subpackage of flycuda, less ``NOT_STAGES``) has its page,
  ``docs/api/<stage>.md``, and that page renders it (``::: flycuda.<stage>``);
* every name in a stage's ``__all__`` exists and has a docstring (a class, a function, an
  exception, or a constant with its docstring string right below the assignment), and so does
  the stage package itself;
* every parameter a public function's or class's ``Args:`` names is in its signature (an entry may
  name several, ``qpos, qvel: ...``; the pages' own check of this, griffe's, is off because of
  those entries);
* every Sphinx role in flycuda's docstrings (``:func:`name```) resolves (docs/roles.py).

Run by the mkdocs hook (docs/hooks.py: ``mkdocs build --strict`` fails on any finding), by
tests/package/test_docs.py, and by hand: ``python docs/check_api.py`` (exit status 1 on findings).
"""

from __future__ import annotations

import sys
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roles  # noqa: E402  (docs/roles.py, beside this file)

ROOT = Path(__file__).resolve().parent.parent
API_DIR = ROOT / "docs" / "api"
# Subpackages of flycuda that get no API page, each with its reason.
NOT_STAGES = {
    "reference": "the tests' torch references and grid emulator (the ops' oracles, not an API)",
    "gpucheck": "the developers' GPU self-check harness (flycuda gpu-check is its entry; see the cli page)",
}


def load_flycuda():
    """flycuda loaded statically by griffe from the source tree (every submodule, aliases resolved
    within the package)."""
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], docstring_parser=griffe.Parser.google)
    pkg = loader.load("flycuda")
    roles.shadow_submodules(pkg)
    loader.resolve_aliases(implicit=False, external=False)
    return pkg


# Modules of flycuda (not subpackages) that are a stage of their own, with a page.
STAGE_MODULES = {"worlds"}


def stage_names(pkg) -> list[str]:
    """The stages: flycuda's subpackages (folders with an ``__init__.py``), less NOT_STAGES,
    and the STAGE_MODULES."""
    return sorted(name for name, member in pkg.members.items()
                  if not member.is_alias and member.is_module and (member.is_init_module or name in STAGE_MODULES)
                  and not name.startswith("_") and name not in NOT_STAGES)


def exported_names(module) -> list[str]:
    """A module's ``__all__`` as names (griffe reads it statically)."""
    names = []
    for item in module.exports or ():
        names.append(item if isinstance(item, str) else getattr(item, "name", str(item)))
    return names


def _has_docstring(obj) -> bool:
    doc = obj.docstring
    return doc is not None and bool(doc.value.strip())


def _signature_of(obj):
    """The parameters ``obj``'s ``Args:`` documents: a function's, a class's ``__init__``'s (None: unknown)."""
    if obj.is_function:
        return obj.parameters
    if obj.is_class:
        for cls in [obj, *obj.mro()] if hasattr(obj, "mro") else [obj]:
            init = cls.members.get("__init__")
            if init is not None and not init.is_alias and init.is_function:
                return init.parameters
    return None


def stale_parameters(obj) -> list[str]:
    """The names ``obj``'s ``Args:`` documents that its signature lacks."""
    params = _signature_of(obj)
    if params is None or obj.docstring is None:
        return []
    known = {p.name for p in params}
    stale = []
    sections = obj.docstring.parse(griffe.Parser.google, warn_unknown_params=False, warn_missing_types=False)
    for section in sections:
        if section.kind is not griffe.DocstringSectionKind.parameters:
            continue
        for item in section.value:
            for name in item.name.split(","):
                name = name.strip().lstrip("*")
                if name.isidentifier() and name not in known:
                    stale.append(name)
    return stale


def problems(pkg=None, references: bool = True) -> list[str]:
    """Every finding, one line each (empty: the reference is complete). ``references=False``
    leaves out the roles' check (mkdocs: the griffe extension reports those as it converts them)."""
    pkg = pkg if pkg is not None else load_flycuda()
    found = []
    stages = stage_names(pkg)
    for stage in stages:
        page = API_DIR / f"{stage}.md"
        if not page.is_file():
            found.append(f"flycuda.{stage}: no API page (docs/api/{stage}.md with '::: flycuda.{stage}'), "
                         f"or name it in docs/check_api.py NOT_STAGES with a reason")
        elif f"::: flycuda.{stage}\n" not in page.read_text() + "\n":
            found.append(f"docs/api/{stage}.md does not render flycuda.{stage} ('::: flycuda.{stage}')")
        module = pkg.members[stage]
        if not _has_docstring(module):
            found.append(f"flycuda.{stage}: the package has no docstring")
        names = exported_names(module)
        if not names:
            found.append(f"flycuda.{stage}: no __all__ (its public names are what __all__ lists)")
        for name in names:
            member = module.members.get(name)
            if member is None:
                found.append(f"flycuda.{stage}.{name}: in __all__ but not defined or imported there")
                continue
            try:
                target = member.final_target if member.is_alias else member
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                found.append(f"flycuda.{stage}.{name}: its import ({member.target_path}) does not resolve")
                continue
            if not _has_docstring(target):
                found.append(f"flycuda.{stage}.{name}: no docstring ({target.path}, "
                             f"{target.relative_filepath}:{target.lineno})")
                continue
            for param in stale_parameters(target):
                found.append(f"flycuda.{stage}.{name}: its docstring documents {param!r}, not in its signature "
                             f"({target.relative_filepath}:{target.lineno})")
    if references:
        found += [f"broken reference: {line}" for line in roles.broken_references(pkg)]
    for page in sorted(API_DIR.glob("*.md")):
        if page.stem not in stages:
            found.append(f"docs/api/{page.name}: no stage flycuda.{page.stem} (a package moved or renamed?)")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(f"check_api: {line}", file=sys.stderr)
    if not found:
        print("check_api: every stage has its page and every public name its docstring")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
