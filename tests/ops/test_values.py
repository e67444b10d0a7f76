"""The wrappers' index-value checks (flycuda/ops/_values.py): what the C++ ops no longer
check on CUDA (the stable ABI has no version counter to cache on), checked here once per
tensor version. They run only on CUDA tensors; these tests widen them to the CPU, where
the C++ op's own check gives the expected message for the same bad input."""

import pytest
import torch
from helpers.cases import episode_args
from helpers.devices import poison_like
from helpers.retinas import synthetic_retina

import flycuda
from flycuda.ops import _values
from flycuda.vision import RetinaMap


def pool_maps(H=9, Wd=7, O=11, seed=3):
    """A small exact pooling map: (P, [omm_ptr, omm_pixels, omm_channel, omm_column, omm_count])."""
    pm = RetinaMap.from_arrays(*synthetic_retina(H, Wd, O, seed)).exact()
    return pm, [t.clone() for t in pm.args()]


@pytest.fixture
def checked_on_cpu(monkeypatch):
    monkeypatch.setattr(_values, "CHECKED_DEVICES", ("cpu",))
    _values._SEEN.clear()
    yield
    _values._SEEN.clear()


def op_message(call) -> str:
    with pytest.raises(RuntimeError) as e:
        call()
    return str(e.value)


def m2c(ids, nu=6):
    return lambda: torch.ops.flycuda.motion_to_ctrl.default(
        torch.randn(1, 4, len(ids)), flycuda.new_step_counter("cpu", 2), torch.zeros(3, nu), ids, None, 1.0,
        "clamp", 0)


@pytest.mark.parametrize("ids", [[5, 6, 2], [5, -1, 2], [5, 2, 5, 0, 2], [0, 0, 0], [1, 4, 3, 4, 1], [1, 1, 9],
                                 [1, 9, 1], [3, 2, 3, -4, 2]])
def test_motion_to_ctrl_index_messages_equal_the_op(checked_on_cpu, ids):
    """Out of range, negative, repeated, and both: the first failing position wins, as in
    the op's in-order scan."""
    t = torch.tensor(ids)
    with pytest.raises(RuntimeError) as e:
        _values.check_index("motion_to_ctrl", "act_ids", t, 6, "nu = ctrl.size(1)", unique=True)
    assert str(e.value) == op_message(m2c(t))


@pytest.mark.parametrize("case", ["ptr start", "ptr down", "ptr end", "pixels", "channel", "column", "count"])
def test_pool_ommatidia_messages_equal_the_op(checked_on_cpu, case):
    S, E = 2, 2
    pm, args = pool_maps()
    O = pm.num_ommatidia
    pixels = torch.randint(0, 256, (S, E, pm.rays, 3), dtype=torch.uint8)
    m = dict(zip(("omm_ptr", "omm_pixels", "omm_channel", "omm_column", "omm_count"), args))
    name, i, v = {"ptr start": ("omm_ptr", 0, 1), "ptr down": ("omm_ptr", 3, -1), "ptr end": ("omm_ptr", -1, 10 ** 6),
                  "pixels": ("omm_pixels", 4, pm.rays), "channel": ("omm_channel", 2, 3),
                  "column": ("omm_column", 1, 2), "count": ("omm_count", 5, 0)}[case]
    m[name][i] = v if case != "ptr down" else m[name][i - 1] - 1
    readouts = poison_like(torch.empty(S, E, O, 2))
    with pytest.raises(RuntimeError) as e:
        flycuda.pool_ommatidia(pixels, m["omm_ptr"], m["omm_pixels"], m["omm_channel"], m["omm_column"],
                               m["omm_count"], readouts)
    assert str(e.value) == op_message(lambda: torch.ops.flycuda.pool_ommatidia.default(
        pixels, m["omm_ptr"], m["omm_pixels"], m["omm_channel"], m["omm_column"], m["omm_count"], readouts))
    assert "flycuda.pool_ommatidia: argument 'omm_" in str(e.value)


@pytest.mark.parametrize("name", ["omm_ptr", "omm_channel", "omm_column", "omm_count"])
def test_pool_ommatidia_shape_errors_come_before_values(checked_on_cpu, name):
    """A map array one entry short fails the op's shape check, not the wrapper's value
    check (the GPU machine saw 'omm_ptr must end at nnz' for a short omm_ptr)."""
    S, E = 2, 2
    pm, args = pool_maps()
    pixels = torch.randint(0, 256, (S, E, pm.rays, 3), dtype=torch.uint8)
    m = dict(zip(("omm_ptr", "omm_pixels", "omm_channel", "omm_column", "omm_count"), args))
    m[name] = m[name][:-1]
    readouts = poison_like(torch.empty(S, E, pm.num_ommatidia, 2))
    call = [pixels, m["omm_ptr"], m["omm_pixels"], m["omm_channel"], m["omm_column"], m["omm_count"], readouts]
    message = op_message(lambda: flycuda.pool_ommatidia(*call))
    assert message == op_message(lambda: torch.ops.flycuda.pool_ommatidia.default(*call))
    assert f"argument '{name}' must have shape" in message


@pytest.mark.parametrize("row", [[2, 0], [-1, 0], [0, 99], [1, -3]])
def test_gather_columns_messages_equal_the_op(checked_on_cpu, row):
    a = episode_args("gather_columns", 5)
    columns = a["columns"].clone()
    columns[1] = torch.tensor(row, dtype=columns.dtype)
    widths = [s.shape[1] for s in a["sources"]]
    if row[0] == 2 and len(widths) > 2:
        columns[1, 0] = len(widths)
    with pytest.raises(RuntimeError) as e:
        _values.check_columns("gather_columns", columns, widths)
    assert str(e.value) == op_message(
        lambda: torch.ops.flycuda.gather_columns.default(a["sources"], columns, a["out"]))


def test_checked_once_per_version(checked_on_cpu):
    """Passed once, a tensor is not read again until it changes in place (its version);
    a write that bypasses the version (through .data, as a Warp alias would) goes unseen
    here, and the kernels skip such entries."""
    ids = torch.tensor([5, 0, 2])
    _values.check_index("op", "act_ids", ids, 6, "nu", unique=True)
    ids.data[1] = 99
    _values.check_index("op", "act_ids", ids, 6, "nu", unique=True)  # cached: not read
    _values.check_index("op", "act_ids", ids, 100, "nu", unique=True)  # another bound: read, 99 < 100
    ids.add_(0)  # a version bump
    with pytest.raises(RuntimeError, match=r"flycuda.op: argument 'act_ids' must hold indices in \[0, 6\) \(nu = 6\), "
                                           r"got act_ids\[1\] = 99"):
        _values.check_index("op", "act_ids", ids, 6, "nu", unique=True)


def test_inference_tensors_checked_every_call(checked_on_cpu):
    with torch.inference_mode():
        ids = torch.tensor([5, 0, 2])
    _values.check_index("op", "act_ids", ids, 6, "nu")
    assert not _values._SEEN  # nothing to key on: checked again on every call
    with torch.inference_mode():
        ids[1] = 99  # written in place without a version
    with pytest.raises(RuntimeError, match=r"got act_ids\[1\] = 99"):
        _values.check_index("op", "act_ids", ids, 6, "nu")


def test_cpu_tensors_left_to_the_ops():
    """Without widening, CPU tensors are the C++ ops' to check: nothing is remembered."""
    _values._SEEN.clear()
    _values.check_index("op", "act_ids", torch.tensor([0, 99]), 6, "nu")
    assert not _values._SEEN


def test_every_wrapper_checks_its_index_tensors(checked_on_cpu):
    """Each wrapper hands its index tensors to the checks (each is remembered after)."""
    W, D, nu, T = 3, 2, 5, 6
    step = flycuda.new_step_counter("cpu", 2)
    ctrl, ids = torch.zeros(W, nu), torch.tensor([4, 1])
    flycuda.motion_to_ctrl(torch.randn(1, T, D), step, ctrl, ids)
    assert _values.seen(ids)
    ids2 = torch.tensor([0, 3])
    flycuda.spline_to_ctrl(torch.randn(1, T, 4, D, dtype=torch.float64), step, ctrl, ids2)
    assert _values.seen(ids2)
    adrs, cols = torch.tensor([1, 0]), torch.tensor([2, 2])
    flycuda.record_qpos(torch.randn(W, 4), adrs, torch.zeros(W, 3, D), step)
    flycuda.record_chunk(torch.randn(W, 4), cols, torch.zeros(2, W, 3, D), step)
    assert _values.seen(adrs) and _values.seen(cols)
    a = episode_args("scatter_actions", W)
    flycuda.ops.scatter_actions(a["actions"], a["act_ids"], a["action_map"], a["ctrl"])
    assert _values.seen(a["act_ids"])
    g = episode_args("gather_columns", W)
    flycuda.ops.gather_columns(g["sources"], g["columns"], g["out"])
    assert _values.seen(g["columns"])
    pm, args = pool_maps()
    flycuda.pool_ommatidia(torch.randint(0, 256, (1, 2, pm.rays, 3), dtype=torch.uint8), *args,
                           torch.zeros(1, 2, pm.num_ommatidia, 2))
    assert all(_values.seen(t) for t in args)


def test_one_tensor_passes_several_checks(checked_on_cpu):
    """One index tensor handed to two ops (or with two bounds) keeps both results: neither
    evicts the other, so neither is read again."""
    ids = torch.tensor([3, 1])
    _values.check_index("motion_to_ctrl", "act_ids", ids, 6, "nu", unique=True)
    _values.check_index("scatter_actions", "act_ids", ids, 6, "nu", unique=True)
    ids.data[0] = 99  # unseen by the version: both results stand
    _values.check_index("motion_to_ctrl", "act_ids", ids, 6, "nu", unique=True)
    _values.check_index("scatter_actions", "act_ids", ids, 6, "nu", unique=True)


def test_the_ops_own_checks_come_first(checked_on_cpu):
    """An index tensor on another device than the op's output, or strided, is left to the
    op, whose metadata check says what is wrong."""
    ctrl = torch.zeros(3, 6, device="meta")
    _values.check_index("op", "act_ids", torch.tensor([0, 99]), 6, "nu", ref=ctrl)
    _values.check_index("op", "act_ids", torch.tensor([0, 0, 99, 0])[::2], 6, "nu")
    assert not _values._SEEN


def test_skipped_while_compiling(checked_on_cpu, monkeypatch):
    """torch.compile traces the wrappers: no host copy, no data-dependent branch there."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    _values.check_index("op", "act_ids", torch.tensor([0, 99]), 6, "nu")
    assert not _values._SEEN
