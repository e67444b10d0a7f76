"""Every notebook executes top to bottom (CPU, small sizes) and is committed stripped. A notebook
whose metadata says ``"flycuda": {"needs": ["flygym"]}`` executes in the FlyGym lane."""

import glob
import json
import os

import pytest

NOTEBOOKS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "*.ipynb")))


def _executable(path: str):
    """The notebook as a test parameter, marked needs_flygym when its metadata says so."""
    with open(path) as f:
        needs = json.load(f)["metadata"].get("flycuda", {}).get("needs", [])
    marks = [pytest.mark.needs_flygym] if "flygym" in needs else []
    return pytest.param(path, marks=marks, id=os.path.basename(path))


def test_there_are_notebooks():
    names = [os.path.basename(p) for p in NOTEBOOKS]
    assert names == ["01_kernel_from_python.ipynb", "02_replay.ipynb", "03_profiling.ipynb", "04_vision.ipynb",
                     "05_closed_loop.ipynb", "06_visual_taxis.ipynb", "07_odor_taxis.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_committed_without_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path}: strip outputs before committing"


# The sizes the test runs a notebook at, where a reader's are larger than the test needs: the
# line as committed and the line the test executes instead (every cell still runs; the test
# fails if the committed line changes, so the two cannot drift apart).
SIZES = {"06_visual_taxis.ipynb": ("W, STEPS = 6, 150", "W, STEPS = 2, 30"),
         "07_odor_taxis.ipynb": ("W, SECONDS = 3, 0.3", "W, SECONDS = 2, 0.05")}


def _sized(nb, name: str):
    """``nb`` with its sizes line replaced as SIZES says (asserting the committed line is there)."""
    if name not in SIZES:
        return nb
    line, small = SIZES[name]
    cells = [c for c in nb.cells if c.cell_type == "code" and any(x.startswith(line) for x in c.source.splitlines())]
    assert len(cells) == 1, f"{name}: its sizes line {line!r} changed; update SIZES in {__file__}"
    cells[0].source = "\n".join(small + x[len(line):] if x.startswith(line) else x for x in cells[0].source.splitlines())
    return nb


@pytest.mark.needs_warp
@pytest.mark.parametrize("path", [_executable(p) for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = _sized(nbformat.read(path, as_version=4), os.path.basename(path))
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError with the failing cell's traceback
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
