"""Odor plumes on disk (flycuda.recording.plume, issue 41): a grid saved with its geometry reads back
the same, samples as flycuda.ops.odor_plume does, and a store without its origin, spacing or rate is
refused in one line."""

from __future__ import annotations

import pytest
import torch

from flycuda import ops
from flycuda.errors import StoreError
from flycuda.recording import Plume, load_plume, save_plume
from flycuda.recording.plume import PLUME_ATTRS

pytest.importorskip("zarr")


def _grid(shape=(5, 7, 6), seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3


@pytest.mark.parametrize("shape,origin,spacing", [((5, 7, 6), (1.0, -2.0), (0.5, 0.25)),
                                                  ((3, 4, 5, 2), (0.0, 0.0, 0.1), (0.2, 0.2, 0.3))])
def test_a_saved_plume_reads_back_and_samples_as_the_op(tmp_path, shape, origin, spacing):
    grid = _grid(shape)
    save_plume(str(tmp_path / "p.zarr"), grid, origin=origin, spacing=spacing, fps=20.0, units="mm")
    p = load_plume(str(tmp_path / "p.zarr"))
    assert torch.equal(p.grid, grid.float()) and p.grid.is_contiguous()
    assert p.origin == origin and p.spacing == spacing and p.fps == 20.0
    assert p.nbytes == grid.numel() * 4 and p.duration == (shape[0] - 1) / 20.0
    sensors = torch.rand(3, 4, 3) * 2
    time = torch.tensor([0.0, 0.07, 0.5])
    got, want = torch.full((3, 4), -1.0), torch.full((3, 4), -2.0)
    p.sample(sensors, time, got, time_mode="loop")
    ops.odor_plume(p.grid, sensors, time, want, origin=origin, spacing=spacing, fps=20.0, time_mode="loop")
    assert torch.equal(got.nan_to_num(), want.nan_to_num()) and torch.equal(got.isnan(), want.isnan())


def test_what_is_refused(tmp_path):
    import zarr

    path = str(tmp_path / "p.zarr")
    with pytest.raises(StoreError, match=r"a plume's spacing must be 2 finite numbers"):
        save_plume(path, _grid(), origin=(0, 0), spacing=(1.0,), fps=10.0)
    with pytest.raises(StoreError, match=r"a plume's spacing must be > 0"):
        save_plume(path, _grid(), origin=(0, 0), spacing=(1.0, 0.0), fps=10.0)
    with pytest.raises(StoreError, match=r"a plume's fps must be a finite number > 0"):
        save_plume(path, _grid(), origin=(0, 0), spacing=(1.0, 1.0), fps=0.0)
    with pytest.raises(StoreError, match=r"a plume is a non-empty \[T, X, Y\] or \[T, X, Y, Z\] grid"):
        save_plume(path, _grid((4, 4)), origin=(0,), spacing=(1.0,), fps=1.0)
    save_plume(path, _grid(), origin=(0, 0), spacing=(1.0, 1.0), fps=10.0)
    with pytest.raises(StoreError, match="cannot create the plume store"):
        save_plume(path, _grid(), origin=(0, 0), spacing=(1.0, 1.0), fps=10.0)
    bare = str(tmp_path / "bare.zarr")  # a grid without its geometry (e.g. written by hand)
    zarr.open_group(bare, mode="w").create_array("plume", shape=(2, 3, 3), dtype="float32")
    with pytest.raises(StoreError, match=rf"has no attrs\['{PLUME_ATTRS}'\]: a plume grid needs its origin, spacing"):
        load_plume(bare)
    g = zarr.open_group(bare, mode="a")
    g.attrs[PLUME_ATTRS] = {"origin": [0, 0], "fps": 5.0}
    with pytest.raises(StoreError, match=r"a plume's spacing must be 2 finite numbers .* got None"):
        load_plume(bare)
    with pytest.raises(StoreError, match="no plume store at"):
        load_plume(str(tmp_path / "missing.zarr"))
    with pytest.raises(StoreError, match="a plume's origin must be 3 finite numbers"):
        Plume(torch.zeros(2, 3, 3, 3), (0.0, 0.0), (1.0, 1.0, 1.0), 5.0)
