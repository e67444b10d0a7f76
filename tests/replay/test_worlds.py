"""One door: the resolver of named worlds (flycuda.worlds) and one set of defaults, shared by
``flycuda replay``, ``replay()``, ``env.make`` and the playback."""

from __future__ import annotations

import dataclasses

import pytest

from flycuda import worlds as fw
from flycuda.cli.main import build_parser
from flycuda.cli.replay import settings_of
from flycuda.errors import FlycudaError, ReplayError
from flycuda.replay import Outputs, ReplaySettings
from flycuda.sim.motion import tripod_gait


def test_the_cli_and_the_api_agree_on_every_default():
    """``flycuda replay`` with no options asks for exactly what ReplaySettings() and Outputs()
    ask for: the same worlds (None: 100 on CUDA, 4 on the CPU), duration (the recording's),
    model, motion, interpolation, warm-up, observables, rates and outputs."""
    settings, outputs = settings_of(build_parser().parse_args(["replay"]))
    api = ReplaySettings()
    for f in dataclasses.fields(ReplaySettings):
        if f.name in ("chunk_bytes", "keep_state", "nconmax", "njmax"):  # the API's own (no option)
            continue
        assert getattr(settings, f.name) == getattr(api, f.name), f.name
    assert outputs == Outputs()


@pytest.mark.parametrize("device,expected", [("cpu", fw.WORLDS_ON_CPU), ("cuda", fw.WORLDS_ON_CUDA),
                                             ("cuda:1", fw.WORLDS_ON_CUDA)])
def test_default_worlds_by_device(device, expected):
    assert fw.default_worlds(device) == expected


@pytest.mark.needs_warp
def test_resolve_brings_the_hexapods_defaults():
    ws = fw.resolve(None, 2, device="cpu")
    assert (ws.sim.nworld, ws.camera, ws.interp, ws.warmup, ws.unit, ws.thorax, ws.model, ws.motion_name) == \
        (2, "track", "linear", 0.0, "m", "Thorax", "hexapod", "tripod")
    assert ws.motion.dof_names == tripod_gait().dof_names and ws.act_ids is None
    assert ws.observables(("angles",), qpos_every="30hz", thorax=True) == ["angles", "qpos@30hz", "body_pos:Thorax"]
    assert ws.observables(("angles", "qpos@5"), qpos_every=3) == ["angles", "qpos@5"]  # never twice
    given = fw.resolve("hexapod", sim=ws.sim, motion=False, interp="cubic", warmup=0.2)
    assert (given.sim, given.motion, given.interp, given.warmup) == (ws.sim, None, "cubic", 0.2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(model="nope.xml"), "model file not found: nope.xml"),
    (dict(motion="nope.npz"), "motion file not found: nope.npz"),
    (dict(motion="spotlight"), "motion='spotlight' is NeuroMechFly's recording"),
    (dict(model="neuromechfly", motion="tripod"), "motion='tripod' drives the built-in hexapod"),
    (dict(worlds=0), "worlds must be a positive integer"),
])
def test_resolve_refuses_before_building(kwargs, match):
    with pytest.raises(ReplayError, match=match):
        fw.resolve(**kwargs)


def test_units_and_stored_names():
    assert [fw.length_unit(m) for m in (None, "hexapod", "neuromechfly", "my.xml")] == ["m", "m", "mm", "the model's"]
    assert [fw.model_name(m) for m in (None, "neuromechfly", "a/b.xml", "<mujoco/>")] == \
        ["hexapod", "neuromechfly", "a/b.xml", None]
    assert fw.is_flygym_model("neuromechfly-capsules") and not fw.is_flygym_model(None)


@pytest.mark.parametrize("options,match", [
    (dict(duration=-1.0), "duration must be > 0"),
    (dict(snippet=0.1, offsets=[0.0]), "give snippet or offsets, not both"),
    (dict(worlds=3, offsets=[0.0, 0.1]), "needs 1 or 3"),  # neither one nor one per world: known without the model
    (dict(snippet=-1.0), "must be > 0 seconds, got -1.0"),
])
def test_replay_checks_before_anything_is_built(monkeypatch, options, match):
    """Settings and the motion's window are checked before a world is built (the hexapod's own
    recording, a file or a Motion are known without the model)."""
    from flycuda.replay import replay
    from flycuda.sim.mjwarp import Sim

    def no_build(*args, **kwargs):
        raise AssertionError("built before the checks")

    monkeypatch.setattr(Sim, "build", no_build)
    with pytest.raises(FlycudaError, match=match):
        replay(progress=False, **options)


@pytest.mark.needs_warp
def test_a_ranks_share_runs_the_snippet(tmp_path):
    """A torchrun rank's share of a ``--snippet`` job (no --duration) runs the snippet's seconds,
    as one process does, over its own worlds."""
    from flycuda.replay.job import replay_share

    s = ReplaySettings(snippet=0.01, device="cpu", progress=False)
    res = replay_share(s, Outputs(), "cpu", 4, (2, 2), primary=False)
    one = replay_share(s, Outputs(), "cpu", 4, None, primary=False)
    assert (res.worlds, res.steps) == (2, one.steps) and one.steps == round(0.01 / res.timestep)


def test_torchrun_refuses_a_record_that_is_no_zarr_path():
    from flycuda.recording import Target
    from flycuda.replay.job import _run_distributed

    with pytest.raises(ReplayError, match="record must be a .zarr path with torchrun"):
        _run_distributed(ReplaySettings(record=Target(store="memory")), Outputs(), info=None)


def test_settings_keep_their_positions():
    """Fields are only ever added at the end (``motion``, then issue 52's): the earlier ones keep
    their positions."""
    names = [f.name for f in dataclasses.fields(ReplaySettings)]
    assert names[:3] == ["model", "worlds", "duration"] and names.index("motion") == 24
    assert names[25:] == ["resume", "snapshots", "preemptible", "snapshot_seconds"]
