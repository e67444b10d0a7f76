"""What a replay measured: :class:`ReplayResult` and its report, and the tracking error."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

SETTLE_SECONDS = 0.01  # tracking error ignores the first 10 ms (servos settle)
SPLIT_STEPS = 10       # eager steps timed stage by stage


@dataclass
class ReplayResult:
    """What a replay did and measured. ``recorded``/``targets``: float32 [W, R, D]."""

    worlds: int
    steps: int
    timestep: float
    device: str
    graph: bool
    steps_per_graph: int
    record_every: int
    dof_names: tuple
    recorded: torch.Tensor
    targets: torch.Tensor
    sim_seconds: float
    wall_seconds: float
    jit_seconds: float
    split_seconds: dict = field(default_factory=dict)
    peak_memory: str = ""
    rmse_per_dof: torch.Tensor | None = None
    outputs: list = field(default_factory=list)
    profile_summary: str = ""
    render_frames: int = 0     # mosaics rendered
    render_tiles: int = 0      # worlds in each
    out_dir: str = ""          # the output folder, when one was asked for
    interp: str = "linear"     # targets between frames: linear or cubic
    model: str = ""            # what was replayed (set by the CLI)
    motion: str = ""

    @property
    def render_images_per_s(self) -> float:
        """Rendered world images per second of render time (nan when nothing was rendered)."""
        t = self.split_seconds.get("render", 0.0)
        return self.render_frames * self.render_tiles / t if self.render_frames and t > 0 else math.nan

    @property
    def timed_steps(self) -> int:
        """Steps inside ``wall_seconds``: all but the first (JIT/warm-up) step."""
        return self.steps - 1

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds (all worlds together) per wall second, over the timed steps."""
        if self.wall_seconds <= 0 or self.timed_steps <= 0:
            return math.nan
        return self.worlds * self.timed_steps * self.timestep / self.wall_seconds

    @property
    def world_steps_per_s(self) -> float:
        if self.wall_seconds <= 0 or self.timed_steps <= 0:
            return math.nan
        return self.worlds * self.timed_steps / self.wall_seconds

    def report(self) -> str:
        """A human-readable report of the run."""
        split = self.split_seconds
        tot = sum(split.values()) or 1.0
        split_s = ", ".join(f"{k} {100 * v / tot:.0f}%" for k, v in split.items())
        rmse = self.rmse_per_dof
        worst = ""
        if rmse is not None and rmse.numel():
            k = int(torch.argmax(rmse))
            worst = f" (worst {self.dof_names[k]} {math.degrees(float(rmse[k])):.2f} deg)"
        lines = [
            f"flycuda replay: {self.worlds} worlds x {self.steps} steps of {self.timestep * 1e3:g} ms on {self.device}"
            f" ({'CUDA graph, ' + str(self.steps_per_graph) + ' step(s)/launch' if self.graph else 'eager'})",
            *([f"  model          {self.model}; motion {self.motion}; {self.interp} targets"] if self.model else []),
            f"  simulated      {self.sim_seconds:.3f} s per world ({self.worlds * self.sim_seconds:.3f} s in all)",
            f"  wall (timed)   {self.wall_seconds:.3f} s for {self.timed_steps} steps   +  setup/JIT/first step {self.jit_seconds:.2f} s",
            f"  x real time    {self.realtime_factor:.3f}  ({self.world_steps_per_s:,.0f} world-steps/s)",
            f"  time split     {split_s}   (physics/ops from {SPLIT_STEPS} synchronized eager steps)",
            f"  peak memory    {self.peak_memory}",
        ]
        if rmse is not None and rmse.numel():
            lines.append(f"  tracking RMSE  {math.degrees(float(rmse.pow(2).mean().sqrt())):.2f} deg over "
                         f"{len(self.dof_names)} DOFs after {SETTLE_SECONDS * 1e3:.0f} ms{worst}")
        if self.render_frames:
            t = self.split_seconds.get("render", 0.0)
            lines.append(f"  render         {self.render_frames} frames x {self.render_tiles} worlds: "
                         f"{self.render_images_per_s:,.0f} images/s, {1e3 * t / self.render_frames:.1f} ms per frame")
        if self.out_dir:
            lines.append(f"  output folder  {self.out_dir}")
        for p in self.outputs:
            lines.append(f"  wrote          {p}")
        return "\n".join(lines)


def tracking_rmse(recorded: torch.Tensor, targets: torch.Tensor, timestep: float,
                  record_every: int) -> torch.Tensor:
    """RMSE per DOF ([D]) of recorded vs target angles [W, R, D], over worlds and the
    samples after the first SETTLE_SECONDS (always at least the last sample)."""
    R = recorded.shape[1]
    settle = min(int(math.ceil(SETTLE_SECONDS / (timestep * record_every))), R - 1)
    return (recorded[:, settle:] - targets[:, settle:]).pow(2).mean(dim=(0, 1)).sqrt()
