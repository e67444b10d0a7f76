"""The launch plans of csrc/kernels/, mirrored in Python.

Each kernel family's plan (threads per block, blocks, fused or not) is written
once in C++, ATen-free, in its csrc/kernels/<family>.cuh, and read by its .cu
launcher, its CPU twin and the emulator driver. The Python grid references
(:mod:`flycuda.reference.grid`) and the
renderer's host code read these constants instead of repeating numbers;
tests/csrc/test_launch_plan.py holds every constant here equal to its header.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import FlycudaError

# csrc/kernels/motion_to_ctrl.cuh (motion_to_ctrl, spline_to_ctrl)
MOTION_TO_CTRL_THREADS = 256   # kMotionToCtrlThreads
# csrc/kernels/advance_step.cuh (the step counter of every op)
COUNTER_BYTES = 20             # kCounterBytes: a new_step_counter's storage (step, reserved, uint32 ticket)
TICKET_BYTE = 16               # kTicketByte: where the hidden ticket starts
# csrc/kernels/pool_ommatidia.cuh
POOL_THREADS = 128             # kPoolThreads: (image, ommatidium) pairs per block

# csrc/kernels/record.cuh
RECORD_THREADS = 256           # kRecordThreads (record_qpos, record_chunk)
# csrc/kernels/render_tiles.cuh
RENDER_THREADS = 128           # kRenderThreads: pixels per block (= timer row)
RENDER_TILE_W, RENDER_TILE_H = 16, 8  # kTileW, kTileH: one block's pixels (4 warps of 8 x 4)
REFIT_THREADS = 32             # kRefitThreads: one block per selected world

# csrc/kernels/hybrid_step.cuh (FlyGym's walking controllers)
HYBRID_THREADS = 96            # kHybridThreads: a thread per leg, 16 worlds per block
HYBRID_COLUMNS = 48            # kHybridColumns: act_ids = the 42 angles' ctrl columns, then the 6 adhesions'
HYBRID_STATE_ROWS = 5          # kStateRows: state [W, 5, 6] = phases, magnitudes, retraction, stumbling, net
# The params tensor (float64), in order: (name, length) -> offsets kPar<Name> (tests/csrc/test_launch_plan.py)
HYBRID_PARAMS = (("knots", 45), ("coeffs", 6 * 4 * 44 * 7), ("neutral", 42), ("adhesion_end", 6),
                 ("gain_points", 30), ("gain_values", 5), ("vectors", 42), ("freqs", 6), ("amps", 6),
                 ("convergence", 6), ("weights", 36), ("biases", 36), ("scalars", 13))
HYBRID_SCALARS = ("timestep", "stumble_force", "retract_height", "retract_up", "retract_down", "stumble_up",
                  "stumble_down", "max_correction", "persist_steps", "persist_from", "rules", "adhesion", "turning")

# csrc/kernels/rule_step.cuh (FlyGym's rule-based controller)
RULE_THREADS = 96              # kRuleThreads: a thread per leg, 16 worlds per block
RULE_STATE_ROWS = 5            # kRuleRows: state [W, 5, 6] = phases, stepping, rule1, rule2, rule3 scores
RULE_RNG_COLS = 626            # kRngCols: rng [W, 626] = MT19937 key (624), its position, the steps taken
RULES = ("rule1", "rule2_ipsi", "rule2_contra", "rule3_ipsi", "rule3_contra", "margin", "increment")  # kRule*

# csrc/kernels/hybrid_senses.cuh (the hybrid controllers' sensory inputs from MuJoCo Warp's Data)
SENSES_THREADS = 128           # kSensesThreads: worlds, or contact slots, per block
SENSE_BODIES = 7               # kSenseBodies: body_ids = the thorax, then the six tarsus5
SENSE_GROUND = -2              # kGround: geom_segment's mark of a ground geom (-1: neither; 0..17 a leg segment)
# The contacts list, in order (csrc/hybrid_senses.h ContactField): MuJoCo Warp's Data.contact.<name>, then
# Data.efc.force and Data.nacon
CONTACT_FIELDS = ("geom", "worldid", "frame", "friction", "dim", "efc_address", "adhesion", "efc_force", "nacon")
"""The contact arrays :func:`flycuda.ops.hybrid_senses` takes, in its order: MuJoCo Warp's
``Data.contact.<name>`` for the first seven, then ``Data.efc.force`` and ``Data.nacon``
(:meth:`flycuda.sim.Sim.contact_views` gives them as zero-copy views)."""

# csrc/kernels/odor_intensity.cuh (every world's odor at its sensors)
ODOR_THREADS = 128             # kOdorThreads: output elements (w, k, s) per block
ODOR_FIELDS = ("power", "advection_diffusion")  # kOdorPower, kOdorAdvectionDiffusion
"""The fields :func:`flycuda.ops.odor_intensity` evaluates, in the kernel's order."""

# csrc/kernels/odor_plume.cuh (a replayed odor plume at the sensors)
PLUME_THREADS = 128            # kPlumeThreads: (world, sensor) pairs per block
PLUME_TIME_MODES = ("clamp", "loop")  # kPlumeClamp, kPlumeLoop
"""How :func:`flycuda.ops.odor_plume` maps a time outside the recording into it, in the kernel's order."""

# csrc/kernels/connectome_step.cuh (one step of flyvis's network for a batch of eyes)
CONNECTOME_THREADS = 256       # kConnectomeThreads: (b, n) pairs per block

INT32_MAX = 2 ** 31 - 1


def named_slice(parts, name: str) -> slice:
    """Where part ``name`` lies in a layout of consecutive ``(name, length)`` parts (e.g.
    HYBRID_PARAMS in the params tensor)."""
    start = 0
    for n, length in parts:
        if n == name:
            return slice(start, start + length)
        start += length
    raise KeyError(name)


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def counter_has_ticket(numel: int, storage_offset: int, storage_bytes: int) -> bool:
    """``kernels::counter_has_ticket``: the layout new_step_counter makes."""
    return numel == 2 and storage_offset == 0 and storage_bytes == COUNTER_BYTES


def step_has_ticket(step) -> bool:
    """:func:`counter_has_ticket` of an int64 torch tensor (its storage's size in bytes)."""
    return counter_has_ticket(step.numel(), step.storage_offset(), step.untyped_storage().nbytes())


def ticket_of(step):
    """The hidden ticket of a counter that has one: an int32 [1] view of its bytes
    16..19 (for tests and the grid reference; the value is the unsigned ticket's bits)."""
    if not step_has_ticket(step):
        raise FlycudaError("this counter has no hidden ticket (not made by flycuda.new_step_counter)")
    return torch.empty(0, dtype=torch.int32, device=step.device).set_(step.untyped_storage(), TICKET_BYTE // 4,
                                                                      (1,), (1,))


def pool_blocks(S: int, E: int, O: int) -> int:
    """``kernels::PoolPlan::blocks``: blocks of a pool_ommatidia launch (one thread per
    (image, ommatidium), ``POOL_THREADS`` per block)."""
    return cdiv(S * E * O, POOL_THREADS)


@dataclass(frozen=True)
class MotionToCtrlPlan:
    """``kernels::MotionToCtrlPlan``."""

    blocks: int
    threads: int
    run_kernel: bool
    fused: bool
    advance_kernel: bool
    index32: bool
    too_large: bool


def plan_motion_to_ctrl(W: int, D: int, advance: int, has_ticket: bool,
                        threads: int = MOTION_TO_CTRL_THREADS) -> MotionToCtrlPlan:
    """``kernels::plan_motion_to_ctrl`` (``threads`` other than the header's only for
    the grid reference's small-block runs)."""
    n = W * D
    blocks = cdiv(n, threads) if n > 0 else 1
    fused = advance != 0 and has_ticket
    return MotionToCtrlPlan(blocks=blocks, threads=threads, run_kernel=n > 0 or fused, fused=fused,
                            advance_kernel=advance != 0 and not fused, index32=blocks * threads <= INT32_MAX,
                            too_large=blocks > INT32_MAX)


def render_blocks(tiles: int, height: int, width: int, pixels: int = 0) -> int:
    """Blocks (= timer rows) of a render_tiles launch over ``tiles`` images: 16 x 8
    pixel blocks of each image, or with a pixel list of ``pixels`` entries, 128
    consecutive entries (kernels/render_tiles.cuh plan_render_tiles)."""
    if pixels > 0:
        return cdiv(tiles * pixels, RENDER_THREADS)
    return tiles * cdiv(width, RENDER_TILE_W) * cdiv(height, RENDER_TILE_H)
