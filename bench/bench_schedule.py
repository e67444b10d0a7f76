"""The replay's launch schedule at scale (no physics: flycuda.sim.stepper.Schedule is pure
arithmetic): the share of steps run eagerly, outside any launch, for the cases issue 27
named (angles every step in chunks sized for the worlds, frames or vision samples every
20 steps), with the previous rule (a launch could not pass the end of the filling chunk
until it was queued out) and the current one (it may run to the end of the next chunk;
its slot is waited for on the device right before), interleaved in one run.

    python bench/bench_schedule.py [--steps 20000] [--no-results]
"""

from __future__ import annotations

import argparse

from _results import append_results, format_table

from flycuda.recording import recorder as rec
from flycuda.recording.recorder import CHUNK_BYTES, RING, rows_per_chunk
from flycuda.sim.stepper import Schedule, due_room

CASES = [(2, 10), (1000, 10), (8192, 10), (8192, 20)]  # (worlds, K); NeuroMechFly's 42 angles per world


def counts(worlds: int, K: int, steps: int, previous: bool) -> tuple[int, int, int]:
    """(rows per chunk, steps in launches, eager steps) of a replay of ``steps`` steps."""
    C = rows_per_chunk(worlds, 42, steps + 1, CHUNK_BYTES, K) if worlds > 2 else 260
    s = Schedule(steps, K, lambda done: min(due_room(20, steps, done), rec.chunk_room(done, ((steps + 1, C, 1),))))
    if previous:  # the room of the previous rule: up to the end of the filling chunk
        room = rec.slot_room
        rec.slot_room = lambda f, c, e: (f + RING - 1) * c * e - 1
        try:
            warm = 11
            launched, eager = s.counts(warm)
        finally:
            rec.slot_room = room
    else:
        warm = s.warmup_end(11)
        launched, eager = s.counts(warm)
    return C, launched, eager + warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000, help="steps per replay (2 s at 0.1 ms)")
    ap.add_argument("--no-results", action="store_true", help="do not append to bench/RESULTS.md")
    args = ap.parse_args()
    rows = []
    for worlds, K in CASES:
        for previous in (True, False):
            C, launched, eager = counts(worlds, K, args.steps, previous)
            rows.append([worlds, K, C, "previous" if previous else "current", launched, eager,
                         f"{100 * eager / args.steps:.1f}%"])
    table = format_table(["worlds", "K", "rows/chunk", "rule", "steps in launches", "eager steps", "eager"], rows)
    print(table)
    if not args.no_results:
        append_results("the replay's launch schedule: eager steps at chunk edges (issue 27)", "cpu", table,
                       f"{args.steps} steps, a frame or vision sample every 20 steps; counted by the schedule "
                       "the replay runs (no physics, no device)")


if __name__ == "__main__":
    main()
