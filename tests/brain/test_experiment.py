"""flycuda.brain's experiments (run: trials as brains of one batch), its connectome files and the
``flycuda brain run`` command: the same spikes at any batch size, silencing that reaches downstream,
rates keyed by FlyWire root id, model.py's result table, the files written and read back, and the
refusals in one line."""

import numpy as np
import pytest
import torch

from flycuda import brain
from flycuda.errors import FlycudaError


@pytest.fixture(scope="module")
def net():
    return brain.synthetic(800, 100, seed=4)


def _excited(c, k=80, seed=1):
    return c.root_ids[np.sort(np.random.default_rng(seed).choice(c.N, k, replace=False))]


def test_a_trial_is_the_same_in_any_batch(net):
    """Trial k is brain k with seed + k: 5 trials in one batch or in batches of 2 give the same spikes."""
    exc = _excited(net)
    a = brain.run(net, exc, trials=5, duration=0.05, progress=False)
    b = brain.run(net, exc, trials=5, duration=0.05, batch=2, progress=False)
    for f in ("trial", "neuron", "t"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert len(a.t) > 0 and len(np.unique(a.trial)) == 5


def test_an_activation_experiment_and_its_silencing(net):
    """The paper's shape on a generated network: excite a set, read the rates; silence the neurons
    that most of the downstream activity goes through, and the downstream rates fall, while the
    excited set's own rates (Poisson-driven) stay."""
    exc = _excited(net)
    on = brain.run(net, exc, trials=4, duration=0.2, progress=False)
    rates = on.rates().mean(0)
    excited = np.isin(net.root_ids, exc)
    downstream = np.argsort(-np.where(excited, 0, rates))[:100]  # the most active non-excited neurons
    off = brain.run(net, exc, net.root_ids[downstream], trials=4, duration=0.2, progress=False)
    r_off = off.rates().mean(0)
    others = ~excited & ~np.isin(np.arange(net.N), downstream)
    assert rates[others].sum() > 0 and r_off[others].sum() < 0.75 * rates[others].sum()  # measured 0.58
    assert abs(r_off[excited].mean() - rates[excited].mean()) < 0.1 * rates[excited].mean()
    means = on.mean_rates()
    assert set(means) <= set(int(r) for r in net.root_ids) and all(v > 0 for v in means.values())
    df = on.to_dataframe()
    assert list(df.columns) == ["t", "trial", "flywire_id"] and len(df) == len(on.t)


def test_the_files_round_trip_and_say_what_they_are(tmp_path, net):
    net.write(str(tmp_path))
    back = brain.Connectome.load(str(tmp_path))
    assert back.synthetic and np.array_equal(back.root_ids, net.root_ids)
    for name in ("rowptr", "post", "count"):
        assert torch.equal(getattr(back, name), getattr(net, name)), name


def test_without_the_files_it_says_where_to_get_them(tmp_path):
    with pytest.raises(FlycudaError, match=r"Completeness_783.csv not found; .*philshiu/Drosophila_brain_model"):
        brain.run(str(tmp_path), [1])


def test_bad_requests_are_refused_in_one_line(net):
    with pytest.raises(FlycudaError, match="root id 5 is not one of its 800 neurons"):
        brain.run(net, [5], progress=False)
    with pytest.raises(FlycudaError, match="trials must be >= 1"):
        brain.run(net, net.root_ids[:1], trials=0, progress=False)
    b = brain.Brains(net, 2)
    with pytest.raises(FlycudaError, match=r"rate must be finite and >= 0 Hz"):
        b.set_rates([0], -1.0)
    with pytest.raises(FlycudaError, match=r"brain 2 is not in \[0, 2\)"):
        b.set_silenced([0], brains=[2])
    with pytest.raises(FlycudaError, match=r"neuron indices must lie in \[0, 800\)"):
        b.set_rates([800])
    with pytest.raises(FlycudaError, match="pre indices must lie in"):
        brain.Connectome.from_edges([1, 2], [0, 2], [1, 0], [1, 1])


def test_a_log_that_overflows_says_so(net):
    b = brain.Brains(net, 1, log_capacity=8)
    b.set_rates(np.arange(100), 5000.0)
    b.step(20)
    with pytest.raises(FlycudaError, match=r"spikes since the last drain, but the log holds 8"):
        b.spikes()


def test_the_command_line(tmp_path, capsys):
    from flycuda.cli.main import main

    out = tmp_path / "spikes.parquet"
    assert main(["brain", "run", "--connectome", "synthetic:500", "--excite", "720575940600000003,720575940600000007",
                 "--trials", "3", "--duration", "0.05", "--out", str(out), "--no-progress", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "3 trials x 0.05 s on a synthetic connectome of 500 neurons" in text and out.exists()
    assert main(["brain", "run", "--connectome", str(tmp_path), "--excite", "1"]) == 2
    assert "flycuda: error: connectome:" in capsys.readouterr().err
    assert main(["brain", "run", "--connectome", "synthetic:500", "--excite", "x1"]) == 2


def test_reset_and_the_step_range(net):
    """reset() brings every brain back to rest at step 0, the same run then repeats bit for bit; a run
    past 2^31 - 1 steps (int32 spike steps) is refused before it starts."""
    b = brain.Brains(net, 2, seeds=[1, 2])
    b.set_rates(np.arange(0, 800, 9))
    b.step(60)
    first, v = b.spikes(), b.v.clone()
    b.reset()
    assert b.steps_done == 0 and (b.v == brain.Model().v_0).all() and (b.g == 0).all()
    b.step(60)
    again = b.spikes()
    assert len(first) > 0 and all(np.array_equal(getattr(first, f), getattr(again, f)) for f in ("step", "brain", "neuron"))
    assert torch.equal(b.v, v)
    b._steps = 2 ** 31 - 10
    with pytest.raises(FlycudaError, match=r"would pass 2\^31 - 1"):
        b.step(20)
