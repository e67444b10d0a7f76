"""Every Python block of the README runs as written (at the CPU sizes it states), so a moved
module or a renamed argument cannot leave the README behind."""

from __future__ import annotations

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "README.md")


def python_blocks() -> list[tuple[int, str]]:
    """(line, code) of each ```python block."""
    text = open(README).read()
    return [(text[:m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M)]


def _param(line: int, code: str):
    marks = [pytest.mark.needs_warp]
    if "flygym" in code:
        marks.append(pytest.mark.needs_flygym)
    if "flyvis" in code:  # flyvis's connectome file, from its wheel (the FlyGym lane)
        marks.append(pytest.mark.needs_flyvis)
    return pytest.param(code, id=f"README.md:{line}", marks=marks)


def test_the_readme_has_python_blocks():
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("code", [_param(line, code) for line, code in python_blocks()])
def test_readme_block_runs(code, capsys):
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip(), "each block prints what it made"


ROOT = os.path.dirname(README)
PATH_RE = re.compile(r"(?<![\w/.])((?:csrc|flycuda|tests|bench|docs|notebooks)/[\w./-]*\w\.(?:py|h|cuh|cu|cpp|md|ipynb))\b")


def _texts():
    for folder in ("flycuda", "csrc", "tests", "bench", "docs"):
        for dp, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith((".py", ".h", ".cuh", ".cu", ".cpp", ".md")):
                    yield os.path.join(dp, f)
    yield README
    yield os.path.join(ROOT, "run.sh")
    yield os.path.join(ROOT, ".ci", "run")


def test_every_cited_file_exists():
    """A comment, docstring or doc that names a file of the repository names one that exists
    (so a moved module cannot leave stale pointers behind)."""
    missing = []
    for path in _texts():
        text = open(path, errors="replace").read()
        for m in PATH_RE.finditer(text):
            cited = m.group(1).rstrip(".")
            if not os.path.exists(os.path.join(ROOT, cited)) and "<" not in cited and "*" not in cited:
                line = text[:m.start()].count("\n") + 1
                missing.append(f"{os.path.relpath(path, ROOT)}:{line}: {cited}")
    assert missing == []
