"""The API reference's checks (docs/check_api.py, which ``mkdocs build --strict`` runs too): every
stage has its page, every public name its docstring, every documented parameter is in its
signature and every docstring role names something that is there. Static (griffe): no extension
needed. Skips where the docs' requirements (requirements-docs.txt) are not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
griffe = pytest.importorskip("griffe")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "docs"))
import check_api  # noqa: E402
import roles  # noqa: E402


@pytest.fixture(scope="module")
def pkg():
    return check_api.load_flycuda()


def test_the_api_reference_is_complete(pkg):
    found = check_api.problems(pkg)
    assert not found, "\n".join(found)


def test_every_stage_has_a_page(pkg):
    stages = check_api.stage_names(pkg)
    assert {"ops", "sim", "recording", "render", "vision", "replay", "env", "cli"} <= set(stages)


def test_an_undocumented_public_name_is_found():
    pkg = check_api.load_flycuda()  # its own copy: docstrings are changed below
    pkg["worlds"].members["NAMED_MODELS"].docstring = None  # defined there (an alias elsewhere)
    assert any("flycuda.worlds.NAMED_MODELS: no docstring" in line for line in check_api.problems(pkg, references=False))


def test_a_stale_parameter_is_found(pkg):
    make = pkg["env"].members["make"]
    doc = griffe.Docstring(make.docstring.value.replace("    worlds:", "    nworlds:"), parent=make)
    copy = griffe.Function("make", parameters=make.parameters, docstring=doc)
    doc.parent = copy
    assert check_api.stale_parameters(copy) == ["nworlds"]


def test_a_broken_reference_is_found(pkg):
    broken: list[str] = []
    obj = pkg["ops"]
    text = roles.convert(pkg, obj, ":func:`motion_to_ctrl` :mod:`.step` :class:`torch.Tensor` :func:`no_such_op`",
                         broken)
    assert len(broken) == 1 and "no_such_op" in broken[0]
    assert '.motion_to_ctrl" optional><code>motion_to_ctrl</code>' in text  # a link where it is rendered
    assert '<autoref identifier="flycuda.ops.step" optional>' in text and "<code>torch.Tensor</code>" in text
