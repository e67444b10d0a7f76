"""The one grammar of a vision spec, ``MODE[:K][@RATE]``, for the replay (``--vision``,
``replay(vision=)``) and the environments (``make(vision=)``) alike.

MODE is ``exact`` (every raw pixel FlyGym's retina reads) or ``fast`` (K rays per ommatidium,
4 by default); RATE is ``STEPS`` (physics steps between samples) or ``RATEhz``: how often the
replay samples the eyes (default 500 Hz, FlyGym 1.x's vision_refresh_rate). An environment
reads the eyes at every control step, so it takes MODE[:K] and refuses a rate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import VisionError
from ..recording.observables import parse_rate

__all__ = ["VisionSpec", "parse_vision", "DEFAULT_HZ"]

DEFAULT_HZ = 500.0  # FlyGym 1.x's vision_refresh_rate


@dataclass(frozen=True)
class VisionSpec:
    """A parsed ``MODE[:K][@RATE]`` (``every`` steps or ``hz``; neither: DEFAULT_HZ)."""

    mode: str = "exact"
    k: int = 4
    every: int | None = None
    hz: float | None = None

    def steps(self, timestep: float) -> int:
        """Steps between samples (at least 1)."""
        if self.every is not None:
            return self.every
        return max(1, round(1.0 / ((self.hz or DEFAULT_HZ) * timestep)))

    def __str__(self) -> str:
        rate = f"@{self.every}" if self.every is not None else f"@{self.hz or DEFAULT_HZ:g}hz"
        return ("exact" if self.mode == "exact" else f"fast:{self.k}") + rate


def parse_vision(text) -> VisionSpec:
    """``"exact"``, ``"fast:8@100hz"``, ``"exact@20"``, True (exact at 500 Hz) or a
    VisionSpec -> VisionSpec; a bad spec is one line naming what is valid."""
    if isinstance(text, VisionSpec):
        return text
    if text is True:
        return VisionSpec()
    if not isinstance(text, str) or not text.strip():
        raise VisionError(f"vision must be a spec such as 'exact', 'fast:4' or 'exact@100hz', got {text!r}")
    body, _, rate = text.strip().lower().partition("@")
    m = re.fullmatch(r"(exact|fast)(?::([0-9]+))?", body.strip())
    if m is None or (m.group(1) == "exact" and m.group(2)) or (m.group(2) and int(m.group(2)) < 1):
        raise VisionError(f"bad vision spec {text!r}: use exact or fast[:K] (K >= 1 rays per ommatidium), "
                          f"optionally @STEPS or @RATEhz, e.g. fast:4@100hz")
    every, hz = parse_rate(rate)
    if every is None and hz is None and rate:
        raise VisionError(f"bad vision rate in {text!r}: use @STEPS (an integer >= 1) or @RATEhz, e.g. @500hz")
    return VisionSpec(m.group(1), int(m.group(2) or 4), every, hz)
