"""mkdocs hooks (mkdocs.yml ``hooks:``).

* The API checks (docs/check_api.py): a stage without its page or a public name without its
  docstring is a warning, so ``mkdocs build --strict`` fails on it.
* The README becomes the page ``guide.md`` (its links into docs/ rewritten to the pages), and the
  repository files it and the pages link to (the notebooks, examples/, bench/) are copied into the
  site as they are, so those links are checked like any other.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_api  # noqa: E402  (docs/check_api.py)

ROOT = Path(__file__).resolve().parent.parent
_log = logging.getLogger("mkdocs.plugins.flycuda")
# a Markdown link's target: ](path) or ](path#anchor), not a URL, not an anchor alone
_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#)(?P<path>[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")
# repository folders whose files the pages may link to (copied into the site as they are)
_REPO_LINKABLE = ("notebooks/", "examples/", "bench/")


def on_config(config, **kwargs):
    for line in check_api.problems(references=False):
        _log.warning("check_api: %s", line)
    return config


def _guide(readme: str) -> str:
    """The README as a page beside docs/: its links into docs/ point at the pages."""
    return _LINK.sub(lambda m: f"]({m['path'].removeprefix('docs/')}{m['anchor'] or ''})", readme)


def on_files(files: Files, config, **kwargs) -> Files:
    guide = _guide((ROOT / "README.md").read_text(encoding="utf-8"))
    files.append(File.generated(config, "guide.md", content=guide))
    texts = [guide] + [Path(f.abs_src_path).read_text(encoding="utf-8") for f in files.documentation_pages()
                       if f.abs_src_path]
    linked = set()
    for text in texts:
        for m in _LINK.finditer(text):
            path = re.sub(r"^(\.\.?/)+", "", m["path"])  # ../notebooks/x from docs/api/: the repository's
            if path.startswith(_REPO_LINKABLE):
                linked.add(path)
    for path in sorted(linked):
        if (ROOT / path).is_file() and files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files
