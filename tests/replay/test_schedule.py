"""The step loop's launch schedule (flycuda.sim.stepper.Schedule): which steps run inside launches
of K steps and which run eagerly. The model runs the loop's own rule at any scale (no
physics); a real replay runs the same schedule, and the recorder's slot check
(Recorder.ensure_slots) would raise if the schedule let a launch overwrite a chunk not
yet queued out."""

from __future__ import annotations

import pytest

from flycuda.recording.recorder import CHUNK_BYTES, chunk_room, chunks_complete, rows_per_chunk, slot_room
from flycuda.sim.stepper import Schedule, due_room

SPLIT = 11  # the first step + SPLIT_STEPS: the warm-up's eager steps end at the first multiple of K from here


def _schedule(worlds: int, K: int, C: int, due: int, steps: int, qpos_every: int = 67) -> Schedule:
    """Angles every step in chunks of C rows (at least K: the recorder's rule), qpos at
    ~30 Hz in chunks sized as the recorder sizes them for ``worlds`` worlds, and the host
    working every ``due`` steps (frames, vision samples)."""
    q_rows = steps // qpos_every + 1
    chunks = ((steps + 1, max(C, K), 1), (q_rows, rows_per_chunk(worlds, 60, q_rows, CHUNK_BYTES, K), qpos_every))
    return _of(steps, K, (due,), chunks)


def _of(steps: int, K: int | None, dues: tuple, chunks: tuple) -> Schedule:
    """The schedule of a loop whose stages work every ``dues`` steps and record ``chunks``
    ((rows, rows per chunk, every) per stream), as the replay's stages give their rooms."""
    def room(done: int) -> int:
        return min([due_room(e, steps, done) for e in dues] + [chunk_room(done, chunks) or steps])
    return Schedule(steps, K, room)


@pytest.mark.parametrize("worlds", [2, 1000, 8192])
@pytest.mark.parametrize("K", [1, 4, 10, 20])
@pytest.mark.parametrize("C", [20, 100, 256])
@pytest.mark.parametrize("due", ["K", "2K", 20])
@pytest.mark.parametrize("steps", [2000, 2013])
def test_eager_steps_only_in_the_warm_up_and_the_last_partial_launch(worlds, K, C, due, steps):
    every = {"K": K, "2K": 2 * K}.get(due, due)
    sched = _schedule(worlds, K, C, every, steps)
    warm = sched.warmup_end(SPLIT)
    assert warm % K == 0 and warm >= SPLIT
    launched, eager = sched.counts(warm)
    assert eager == (steps - warm) % K, (launched, eager)
    assert launched + eager == steps - warm


def test_a_due_off_the_launch_grid_costs_eager_steps():
    """Frames every 15 steps with K = 10: launches cannot cross a frame, so steps between
    run eagerly (the CLI's and replay()'s rates are multiples of K to avoid this)."""
    sched = _of(300, 10, (15,), ((301, 100, 1),))
    launched, eager = sched.counts(sched.warmup_end(SPLIT))
    assert eager > 0 and launched % 10 == 0


def test_without_launches_every_step_is_eager():
    sched = _of(100, None, (), ((101, 20, 1),))
    assert sched.warmup_end(SPLIT) == SPLIT and sched.counts(SPLIT) == (0, 100 - SPLIT)


@pytest.mark.parametrize("rows,C,every", [(101, 20, 1), (34, 8, 3), (5, 8, 7)])
def test_slot_room_never_reaches_a_chunk_whose_slot_is_not_free(rows, C, every):
    """At every step, the room ends before the first row of chunk (complete + RING), the one
    that would reuse the filling chunk's slot; and it always allows the next step."""
    for done in range(0, rows * every):
        full = chunks_complete(done, rows, C, every)
        room = slot_room(full, C, every)
        assert room >= done + 1
        assert room // every < (full + 2) * C  # the ring holds 2 chunks


@pytest.mark.needs_warp
@pytest.mark.parametrize("K,observe", [(4, ("angles", "qpos@3")), (10, ("angles",)), (1, ("angles",))])
def test_a_replay_runs_the_schedule(K, observe):
    """A replay on the CPU (launches of K plain steps) with chunks of few rows, so that many
    chunk edges pass inside launches: its counts are the schedule's, and every step but the
    warm-up's and the last partial launch's runs in a launch."""
    from flycuda.replay import replay

    res = replay(worlds=2, duration=0.05, steps_per_graph=K, observe=observe, chunk_bytes=2 * 42 * 4 * 8,
                 progress=False)
    warm = -(-SPLIT // K) * K
    assert res.eager_steps == warm + (res.steps - warm) % K
    assert res.steps_in_launches + res.eager_steps == res.steps
    assert f"{res.steps_in_launches} steps in launches of {K}" in res.report()
