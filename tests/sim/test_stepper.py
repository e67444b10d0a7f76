"""The step loop (flycuda.sim.stepper): when it calls each hook of each stage, on stand-in
worlds (no physics, no Warp): the order of set-up, initial state and steps, launches that
respect every stage's room, finish on success and abort on any error (set-up included),
and the device counter held against the steps run. The replay's own stages run through it
in tests/replay."""

from __future__ import annotations

import pytest
import torch

from flycuda.sim.stepper import SPLIT_STEPS, LoopOptions, Stage, run_stages


class Worlds:
    """Stand-in worlds on the CPU: they count their steps."""

    device = torch.device("cpu")
    wp_device = "cpu"
    timestep = 1e-4
    nworld = 3

    def __init__(self):
        self.steps = 0

    def step(self) -> None:
        self.steps += 1

    def overflowed(self) -> dict:
        return {}


class Log(Stage):
    """Writes every hook it is told into ``events``; ``advance``: it moves the device
    counter in every step (as the replay's targets op); ``every``: its room."""

    def __init__(self, name: str, events: list, advance: bool = False, every: int = 0, fail: str = ""):
        self.name, self.events, self.advance, self.every, self.fail = name, events, advance, every, fail

    def _log(self, *what) -> None:
        self.events.append((self.name, *what))
        if what[0] == self.fail:
            raise ValueError(f"{self.name} fails in {self.fail}")

    def setup(self, loop):
        self._log("setup")

    def start(self, loop):
        self._log("start", loop.sim.steps)

    def before_physics(self, loop):
        if self.advance:
            loop.step += 1

    def after_physics(self, loop):
        self._log("after_physics", loop.sim.steps)

    def room(self, loop, done):
        return min(loop.steps, (done // self.every + 1) * self.every) if self.every else loop.steps

    def prepare(self, loop, first, last):
        self._log("prepare", first, last)

    def after(self, loop, done):
        self._log("after", done)

    def end(self, loop):
        self._log("end", loop.done)

    def finish(self, loop):
        self._log("finish")

    def abort(self, loop, why):
        self.events.append((self.name, "abort", why))


def _run(stages, steps=23, per_launch=4, warmup_steps=3, sim=None):
    return run_stages(sim or Worlds(), stages, LoopOptions(steps, per_launch, warmup_steps=warmup_steps, progress=False))


def _of(events, name, hook):
    return [e[2:] for e in events if e[0] == name and e[1] == hook]


def test_hooks_in_order_and_every_step_once():
    events, sim = [], Worlds()
    stats = _run([Log("a", events, advance=True), Log("b", events)], sim=sim)
    hooks = [e[1] for e in events if e[0] == "b"]
    assert hooks[:4] == ["setup", "start", "after_physics", "after"] and hooks[-2:] == ["end", "finish"]
    assert [e[:2] for e in events[:2]] == [("a", "setup"), ("b", "setup")]  # set-up in the stages' order
    assert _of(events, "a", "start") == [(0,)]                              # before the warm-up's steps
    assert _of(events, "a", "after_physics")[0] == (3,)                      # sample 0: after the warm-up
    assert sim.steps == 3 + 23
    assert [d for (d,) in _of(events, "a", "after")] == sorted(set(d for (d,) in _of(events, "a", "after")))
    assert _of(events, "a", "after")[-1] == (23,)
    assert stats.launched + stats.eager == 23 and stats.split_steps == SPLIT_STEPS
    warm = -(-(1 + SPLIT_STEPS) // 4) * 4
    assert stats.eager == warm + (23 - warm) % 4


def test_no_launch_runs_past_a_stages_room():
    events = []
    stats = _run([Log("a", events, advance=True), Log("frames", events, every=6)], steps=60, per_launch=4)
    launches = [(f, last) for f, last in _of(events, "a", "prepare") if last > f]
    assert launches and stats.launched == 4 * len(launches) and stats.eager > 12  # frames off the grid: eager steps
    for first, last in launches:  # a launch may end on a frame, never run across one
        assert last - first == 3 and all(m % 6 for m in range(first, last)), (first, last)


@pytest.mark.parametrize("hook", ["setup", "start", "after"])
def test_an_error_aborts_every_stage_and_finishes_none(hook):
    events = []
    with pytest.raises(ValueError, match=f"b fails in {hook}"):
        _run([Log("a", events, advance=True), Log("b", events, fail=hook), Log("c", events)])
    aborted = [e[0] for e in events if e[1] == "abort"]
    assert aborted == ["a", "b", "c"] and not _of(events, "a", "finish")
    assert all(e[2] == f"ValueError: b fails in {hook}" for e in events if e[1] == "abort")


def test_a_counter_nobody_advances_is_an_error_and_aborts():
    events = []
    with pytest.raises(RuntimeError, match=r"device step counter 0 != 23 steps run"):
        _run([Log("a", events)])
    assert _of(events, "a", "abort") and not _of(events, "a", "finish")
