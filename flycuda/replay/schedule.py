"""The replay's launch schedule: which steps run inside launches of K steps (a CUDA graph
on the GPU, K plain calls on the CPU) and which run eagerly, one by one.

A launch may start at any step; it must end before the next step at which the host has
work between launches (a frame, a vision sample: every ``dues`` steps) and before a
recording ring slot would be overwritten before its chunk is queued out
(:func:`flycuda.recording.recorder.slot_room`). The warm-up's synchronized eager steps end
on a multiple of K, so with dues that are multiples of K and chunks of at least K rows
(the recorder sizes them so) every step runs in a launch but the warm-up's and the last
partial launch's. Pure arithmetic: the loop asks it, tests run it at any scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..recording.recorder import chunks_complete, slot_room

__all__ = ["Schedule"]


@dataclass(frozen=True)
class Schedule:
    """``steps`` steps in launches of ``per_launch`` (None: no launches, every step eager);
    ``dues``: intervals at whose multiples the host works between launches; ``chunks``:
    (rows, rows per chunk, every) of each recorded stream."""

    steps: int
    per_launch: int | None
    dues: tuple = ()
    chunks: tuple = ()

    def warmup_end(self, at_least: int) -> int:
        """The step the warm-up's eager steps end at: the first multiple of K from
        ``at_least`` (capped at the run's end)."""
        K = self.per_launch or 1
        return min(self.steps, -(-at_least // K) * K)

    def room(self, done: int) -> int:
        """The last step a launch starting after ``done`` steps may reach."""
        room = self.steps
        for every in self.dues:
            room = min(room, (done // every + 1) * every)
        for rows, C, every in self.chunks:
            room = min(room, slot_room(chunks_complete(done, rows, C, every), C, every))
        return room

    def next(self, done: int) -> int:
        """The steps the next launch runs after ``done``: K when a whole launch fits, else
        1 (an eager step)."""
        K = self.per_launch
        return K if K is not None and done + K <= self.room(done) else 1

    def counts(self, done: int) -> tuple[int, int]:
        """(steps in launches, eager steps) from ``done`` to the end."""
        launched = eager = 0
        while done < self.steps:
            n = self.next(done)
            if self.per_launch is not None and n == self.per_launch:
                launched += n
            else:
                eager += n
            done += n
        return launched, eager
