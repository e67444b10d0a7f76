"""Typed Python wrappers of flycuda's ops, each with its fake kernel for torch.compile.

Every op works in place on tensors that may be zero-copy views of MuJoCo Warp
arrays (``wp.to_torch(d.ctrl)``), reads the step counter on the device and
never synchronizes with the host while a CUDA graph is being captured, so a
sequence of them can be captured once and replayed every simulation step.

Shapes: W worlds, T recorded frames, D driven DOFs, nu controls, nq positions,
R recorded samples. One module per kernel family (csrc/<family>.cpp):
:mod:`.step` (the counter), :mod:`.targets`, :mod:`.record`, :mod:`.render`,
:mod:`.pool`, :mod:`.episode` (a batched environment's step), :mod:`.walking` (FlyGym's
walking controllers), :mod:`.senses` (their sensory inputs from MuJoCo Warp's Data), :mod:`.odor` (smell at the sensors); :mod:`.launch_plan` mirrors the C++ launch constants and
:mod:`.spline` computes the cubic pieces :func:`spline_to_ctrl` reads.
"""

from .. import _ext  # noqa: F401  (loads flycuda._C: the schemas exist before the fakes register)
from .brain import BRAIN_CONSTS, brain_step
from .connectome import connectome_step
from .episode import action_map, episode_step, gather_columns, motion_at, reset_worlds, scatter_actions
from .odor import ODOR_FIELDS, PLUME_TIME_MODES, odor_intensity, odor_plume
from .pool import pool_ommatidia
from .record import record_chunk, record_qpos
from .render import render_tiles, render_tiles_args
from .senses import CONTACT_FIELDS, geom_segments, hybrid_senses
from .spline import SplineError, spline_coeffs
from .step import advance_step, new_step_counter
from .targets import MODES, motion_to_ctrl, spline_to_ctrl
from .walking import hybrid_params, hybrid_step, rule_params, rule_rng, rule_step

__all__ = ["motion_to_ctrl", "spline_to_ctrl", "advance_step", "new_step_counter", "record_qpos", "record_chunk",
           "render_tiles", "render_tiles_args", "pool_ommatidia", "spline_coeffs", "SplineError", "MODES",
           "motion_at", "scatter_actions", "gather_columns", "episode_step", "reset_worlds", "action_map",
           "hybrid_step", "hybrid_params", "rule_step", "rule_params", "rule_rng", "hybrid_senses", "geom_segments",
           "CONTACT_FIELDS", "odor_intensity", "ODOR_FIELDS", "odor_plume", "PLUME_TIME_MODES", "connectome_step",
           "brain_step", "BRAIN_CONSTS"]
