"""The launch plans: flycuda/ops/launch_plan.py (the Python mirror read by the grid
references and the renderer's host code) equals csrc/kernels/ (read by the .cu
launchers, the CPU twins and the emulator driver); the schemas' argument names are
the wrappers'."""

from __future__ import annotations

import inspect
import os
import re

import pytest
import torch

import flycuda
from flycuda import ops
from flycuda.ops import launch_plan
from flycuda.reference import odor as odor_reference
from flycuda.reference import plume as plume_reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "csrc", "kernels")


def _constant(path: str, name: str) -> int:
    with open(path) as f:
        text = f.read()
    m = re.search(rf"constexpr\s+(?:int|int64_t)\s+{name}\s*=\s*([^;]+);", text)
    assert m, f"{name} not found in {path}"
    expr = m.group(1).strip()
    return int(expr)


@pytest.mark.parametrize("header,name,mirror", [
    ("motion_to_ctrl.cuh", "kMotionToCtrlThreads", "MOTION_TO_CTRL_THREADS"),
    ("advance_step.cuh", "kCounterBytes", "COUNTER_BYTES"),
    ("advance_step.cuh", "kTicketByte", "TICKET_BYTE"),
    ("record.cuh", "kRecordThreads", "RECORD_THREADS"),
    ("pool_ommatidia.cuh", "kPoolThreads", "POOL_THREADS"),
    ("render_tiles.cuh", "kRenderThreads", "RENDER_THREADS"),
    ("render_tiles.cuh", "kRefitThreads", "REFIT_THREADS"),
    ("render_tiles.cuh", "kTileW", "RENDER_TILE_W"),
    ("render_tiles.cuh", "kTileH", "RENDER_TILE_H"),
    ("connectome_step.cuh", "kConnectomeThreads", "CONNECTOME_THREADS"),
])
def test_python_mirror_equals_the_headers(header, name, mirror):
    assert getattr(launch_plan, mirror) == _constant(os.path.join(KERNELS, header), name)


@pytest.mark.parametrize("start", [7, -3, 2 ** 62])
def test_new_step_counter_has_the_planned_layout(start):
    c = flycuda.new_step_counter("cpu", start)
    assert c.tolist() == [start, 0] and c.shape == (2,) and c.storage_offset() == 0 and c.dtype == torch.int64
    assert c.untyped_storage().nbytes() == launch_plan.COUNTER_BYTES == 20
    assert launch_plan.step_has_ticket(c) and launch_plan.ticket_of(c).tolist() == [0]
    with pytest.raises(RuntimeError):  # no int64 view of the storage covers the ticket
        torch.as_strided(c, (3,), (1,), 0)
    with pytest.raises(ValueError, match="no hidden ticket"):
        launch_plan.ticket_of(c.clone())


@pytest.mark.parametrize("W,D,advance,ticket", [(0, 5, 0, True), (0, 5, 2, True), (0, 5, 2, False), (1, 1, 1, True),
                                                (4096, 42, 1, True), (4096, 42, 1, False), (10 ** 6, 3000, 1, True)])
def test_motion_to_ctrl_plan(W, D, advance, ticket):
    p = launch_plan.plan_motion_to_ctrl(W, D, advance, ticket)
    n = W * D
    assert p.threads == 256 and p.blocks == max(1, -(-n // 256))
    assert p.fused == (advance != 0 and ticket) and p.advance_kernel == (advance != 0 and not ticket)
    assert p.run_kernel == (n > 0 or p.fused)
    assert p.index32 == (p.blocks * 256 < 2 ** 31)
    if (W, D) == (4096, 42):
        assert p.blocks == 672


def test_index32_boundary():
    """32-bit index math exactly while every thread's index fits in int32."""
    last32 = (2 ** 31 - 1) // 256 * 256  # the most elements whose blocks * threads still fit
    assert launch_plan.plan_motion_to_ctrl(last32, 1, 0, False).index32
    assert not launch_plan.plan_motion_to_ctrl(last32 + 1, 1, 0, False).index32


def _schema_args(op) -> list[str]:
    return [a.name for a in op.default._schema.arguments]


# Schema names that differ from the wrapper's, and why (see csrc/registration.cpp).
RENAMED = {("motion_to_ctrl", "frame_mode"): "mode", ("spline_to_ctrl", "frame_mode"): "mode"}


@pytest.mark.parametrize("name", ["motion_to_ctrl", "spline_to_ctrl", "advance_step", "record_qpos", "record_chunk",
                                  "pool_ommatidia", "hybrid_step", "rule_step", "hybrid_senses",
                                  "odor_intensity", "odor_plume", "connectome_step"])
def test_schema_names_are_the_wrappers(name):
    schema = [RENAMED.get((name, a), a) for a in _schema_args(getattr(torch.ops.flycuda, name))]
    wrapper = list(inspect.signature(getattr(ops, name)).parameters)
    assert schema == wrapper


def test_render_tiles_schema_names():
    """render_tiles' wrapper takes a Scene for the scene tensors; every other argument
    has the schema's name."""
    schema = set(_schema_args(torch.ops.flycuda.render_tiles))
    wrapper = set(inspect.signature(ops.render_tiles).parameters) - {"scene"}
    assert wrapper <= schema, wrapper - schema
    assert "check" in schema and "check_indices" not in schema


def _constants(path: str) -> dict:
    """Every ``constexpr int``/``int64_t`` of a header, each expression evaluated in order
    (they are sums and products of numbers and earlier constants)."""
    with open(path) as f:
        text = f.read()
    values: dict = {}
    for decl in re.findall(r"constexpr\s+(?:int|int64_t)\s+([^;]+);", text):
        for part in decl.split(","):
            name, expr = (x.strip() for x in part.split("=", 1))
            values[name] = eval(expr, {"__builtins__": {}}, dict(values))  # noqa: S307  (the repository's own header)
    return values


def _camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


def test_hybrid_step_layout_equals_the_header():
    """The params tensor's parts (launch_plan.HYBRID_PARAMS, which flycuda.ops.hybrid_params
    fills) start where kernels/hybrid_step.cuh reads them; the scalars too."""
    c = _constants(os.path.join(KERNELS, "hybrid_step.cuh"))
    start = 0
    for name, n in launch_plan.HYBRID_PARAMS:
        assert c[f"kPar{_camel(name)}"] == start, name
        start += n
    assert c["kParCount"] == start
    assert [c[f"kSc{_camel(n)}"] for n in launch_plan.HYBRID_SCALARS] == list(range(c["kScCount"]))
    assert (c["kHybridThreads"], c["kHybridColumns"], c["kStateRows"]) == \
        (launch_plan.HYBRID_THREADS, launch_plan.HYBRID_COLUMNS, launch_plan.HYBRID_STATE_ROWS)


def test_rule_step_layout_equals_the_header():
    """The rules tensor (launch_plan.RULES, which flycuda.ops.rule_params fills), the state rows
    and the random streams' columns are where kernels/rule_step.cuh reads them."""
    c = _constants(os.path.join(KERNELS, "rule_step.cuh"))
    names = ["kRuleW1", "kRuleW2Ipsi", "kRuleW2Contra", "kRuleW3Ipsi", "kRuleW3Contra", "kRuleMargin", "kRuleIncrement"]
    assert [c[n] for n in names] == list(range(len(launch_plan.RULES))) and c["kRuleCount"] == len(launch_plan.RULES)
    assert (c["kRuleThreads"], c["kRuleRows"], c["kRngCols"]) == \
        (launch_plan.RULE_THREADS, launch_plan.RULE_STATE_ROWS, launch_plan.RULE_RNG_COLS)


def test_hybrid_senses_layout_equals_the_headers():
    """The contacts list's order (launch_plan.CONTACT_FIELDS) is csrc/hybrid_senses.h's
    ContactField; the block size, body count and ground mark are kernels/hybrid_senses.cuh's."""
    c = _constants(os.path.join(KERNELS, "hybrid_senses.cuh"))
    assert (c["kSensesThreads"], c["kSenseBodies"], c["kGround"]) == \
        (launch_plan.SENSES_THREADS, launch_plan.SENSE_BODIES, launch_plan.SENSE_GROUND)
    with open(os.path.join(KERNELS, "..", "hybrid_senses.h")) as f:
        enum = re.search(r"enum ContactField : int \{(.*?)\};", f.read(), re.S).group(1)
    names = re.findall(r"kContact(\w+)", enum)
    assert names == [_camel(n) for n in launch_plan.CONTACT_FIELDS] + ["Fields"]


def test_odor_intensity_constants_equal_the_header():
    """The block size and the fields' order (launch_plan.ODOR_FIELDS, the reference's FIELDS)
    are kernels/odor_intensity.cuh's."""
    c = _constants(os.path.join(KERNELS, "odor_intensity.cuh"))
    assert c["kOdorThreads"] == launch_plan.ODOR_THREADS
    assert [c["kOdorPower"], c["kOdorAdvectionDiffusion"]] == list(range(len(launch_plan.ODOR_FIELDS)))
    assert launch_plan.ODOR_FIELDS == odor_reference.FIELDS == ("power", "advection_diffusion")


def test_odor_plume_constants_equal_the_header():
    c = _constants(os.path.join(KERNELS, "odor_plume.cuh"))
    assert c["kPlumeThreads"] == launch_plan.PLUME_THREADS
    assert [c["kPlumeClamp"], c["kPlumeLoop"]] == list(range(len(launch_plan.PLUME_TIME_MODES)))
    assert launch_plan.PLUME_TIME_MODES == plume_reference.TIME_MODES == ("clamp", "loop")


@pytest.mark.parametrize("S,E,O", [(0, 2, 721), (1, 2, 721), (1000, 2, 721), (8192, 2, 721), (1, 1, 1)])
def test_pool_plan(S, E, O):
    """pool_blocks: one thread per (image, ommatidium), POOL_THREADS per block."""
    assert launch_plan.pool_blocks(S, E, O) == -(-S * E * O // 128)
    if (S, E, O) == (8192, 2, 721):
        assert launch_plan.pool_blocks(S, E, O) * launch_plan.POOL_THREADS < 2 ** 31
