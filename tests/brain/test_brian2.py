"""flycuda.brain against Brian2 2.10 (the FlyGym lane: Python 3.11 gets Brian2 2.9, which fails on
import with NumPy 2), built as philshiu/Drosophila_brain_model's model.py builds its network:
NeuronGroup (method 'linear', threshold, reset, refractory 'rfc'), Synapses 'g += w' with the delay,
its inputs onto v. Brian2's numpy target (its cython target compiles for minutes; the update's code
is the same)."""

import numpy as np
import pytest

from flycuda import brain
from flycuda.reference.brain import poisson_events

pytestmark = pytest.mark.needs_brian2

EQS = """
dv/dt = (v_0 - v + g) / t_mbr : volt (unless refractory)
dg/dt = -g / tau              : volt (unless refractory)
rfc                           : second
exc                           : 1
"""


def _brian2_network(c: brain.Connectome, model: brain.Model, copies: int, excited, silenced=()):
    """model.py's network, ``copies`` disjoint copies in one group (one per trial): neurons,
    synapses (silenced neurons' weights 0), a monitor. Excited neurons: rfc 0, exc 1."""
    import brian2 as b2

    b2.prefs.codegen.target = "numpy"
    ns = dict(v_0=model.v_0 * b2.volt, v_rst=model.v_rst * b2.volt, v_th=model.v_th * b2.volt,
              t_mbr=model.t_mbr * b2.second, tau=model.tau * b2.second, w_poi=model.w_syn * model.f_poi * b2.volt)
    N = c.N
    neu = b2.NeuronGroup(N * copies, EQS, method="linear", threshold="v > v_th", reset="v = v_rst; g = 0 * mV",
                         refractory="rfc", namespace=ns)
    neu.v = ns["v_0"]
    neu.g = 0 * b2.volt
    rfc = np.full(N * copies, model.t_rfc)
    exc = np.zeros(N * copies)
    for k in range(copies):
        rfc[k * N + np.asarray(excited, dtype=np.int64)] = 0.0
        exc[k * N + np.asarray(excited, dtype=np.int64)] = 1.0
    neu.rfc = rfc * b2.second
    neu.exc = exc
    pre, post, count = c.edges()
    syn = b2.Synapses(neu, neu, "w : volt", on_pre="g += w", delay=model.t_dly * b2.second)
    offs = np.repeat(np.arange(copies) * N, len(pre))
    syn.connect(i=np.tile(pre, copies) + offs, j=np.tile(post, copies) + offs)
    w = count.astype(np.float64) * model.w_syn
    w[np.isin(pre, np.asarray(silenced, dtype=np.int64))] = 0.0
    syn.w = np.tile(w, copies) * b2.volt
    mon = b2.SpikeMonitor(neu)
    return b2, ns, neu, syn, mon


def _brian2_given_trains(c, model, events, steps, excited, silenced=()):
    """One brain in Brian2 with flycuda's Poisson events given as a SpikeGeneratorGroup onto v
    (delay 0, the 'synapses' slot: where PoissonInput adds); its spikes as (step, neuron)."""
    b2, ns, neu, syn, mon = _brian2_network(c, model, 1, excited, silenced)
    gen = b2.SpikeGeneratorGroup(c.N, events[:, 2], events[:, 0] * model.dt * b2.second)
    inp = b2.Synapses(gen, neu, on_pre="v += w_poi", namespace=ns)
    inp.connect(j="i")
    net = b2.Network(neu, syn, mon, gen, inp)
    net.run(steps * model.dt * b2.second, namespace=ns)
    step = np.round(np.asarray(mon.t / b2.second) / model.dt).astype(np.int64)
    return _sorted(step, np.asarray(mon.i, dtype=np.int64))


def _sorted(step, neuron):
    order = np.lexsort((neuron, step))
    return np.stack([step[order], neuron[order]], axis=1)


def _flycuda(c, model, steps, excited, silenced=(), seeds=(3,), rate=None):
    brains = brain.Brains(c, len(seeds), model=model, seeds=list(seeds), log_capacity=1 << 22)
    brains.set_rates(excited, rate)
    if len(silenced):
        brains.set_silenced(silenced)
    brains.step(steps)
    s = brains.spikes()
    return brains, s


@pytest.mark.parametrize("n,silence", [(1000, False), (1000, True), (5000, False)],
                         ids=["1000", "1000-silenced", "5000"])
def test_the_spike_trains_are_brian2s_over_one_second(n, silence):
    """Generated networks, 1 s (10,000 steps): the same input trains (flycuda's Poisson events,
    given to Brian2 as a SpikeGeneratorGroup onto v) give the same spikes, step for step and neuron
    for neuron. The network's own spikes are a fifth of them or more (the recurrence is exercised), and
    silencing changes them (the silencing is exercised)."""
    c = brain.synthetic(n, 100, seed=n)
    model = brain.Model()
    rng = np.random.default_rng(1)
    excited = np.sort(rng.choice(n, n // 10, replace=False))
    silenced = np.sort(rng.choice(np.setdiff1d(np.arange(n), excited), n // 5, replace=False)) if silence else []
    steps = 10_000
    brains, s = _flycuda(c, model, steps, excited, silenced)
    got = _sorted(s.step, s.neuron)
    rate = np.zeros((1, n))
    rate[0, excited] = model.r_poi
    events = poisson_events(brains.seeds.numpy(), rate, steps, model.dt)
    want = _brian2_given_trains(c, model, events, steps, excited, silenced)
    assert len(want) > 0 and np.array_equal(got, want), _first_difference(got, want)
    recurrent = ~np.isin(got[:, 1], excited)
    assert recurrent.sum() > 0.2 * len(got), (recurrent.sum(), len(got))  # measured: 27% at 1,000 neurons
    if silence:
        _, unsilenced = _flycuda(c, model, steps, excited)
        assert len(unsilenced) != len(got)


def _first_difference(got, want) -> str:
    k = next((i for i in range(min(len(got), len(want))) if not np.array_equal(got[i], want[i])),
             min(len(got), len(want)))
    return f"{len(got)} vs {len(want)} spikes; first difference at #{k}: " \
           f"{got[k] if k < len(got) else None} vs {want[k] if k < len(want) else None}"


def test_with_poisson_input_on_both_sides_the_rates_agree_over_30_trials():
    """Brian2's own PoissonInput (150 Hz, weight w_syn f_poi, onto the excited neurons) against
    flycuda's stream: 30 trials of 1 s each side (Brian2: 30 disjoint copies in one network; flycuda:
    30 brains). Each neuron's mean rate agrees within sampling error (Welch's t over the trials,
    |t| < 6 for every neuron that fired), and so do the excited and the recurrent populations'."""
    import brian2 as b2

    n, trials, steps = 600, 30, 10_000
    c = brain.synthetic(n, 100, seed=7)
    model = brain.Model()
    excited = np.sort(np.random.default_rng(2).choice(n, n // 10, replace=False))
    _, s = _flycuda(c, model, steps, excited, seeds=range(100, 100 + trials))
    ours = np.zeros((trials, n))
    np.add.at(ours, (s.brain, s.neuron), 1)
    b2.seed(11)
    b2_, ns, neu, syn, mon = _brian2_network(c, model, trials, excited)
    poi = b2.PoissonInput(neu, "v", 1, model.r_poi * b2.Hz, weight="exc * w_poi")
    net = b2.Network(neu, syn, mon, poi)
    net.run(steps * model.dt * b2.second, namespace=ns)
    idx = np.asarray(mon.i, dtype=np.int64)
    theirs = np.bincount(idx, minlength=n * trials).reshape(trials, n).astype(np.float64)
    fired = (ours.sum(0) + theirs.sum(0)) > 0
    t = _welch(ours[:, fired], theirs[:, fired])
    assert np.all(np.abs(t) < 6), (np.abs(t).max(), np.nonzero(fired)[0][np.argmax(np.abs(t))])
    for name, cols in (("excited", excited), ("recurrent", np.setdiff1d(np.arange(n), excited))):
        a, b = ours[:, cols].sum(1), theirs[:, cols].sum(1)
        assert abs(_welch(a[:, None], b[:, None])[0]) < 5, (name, a.mean(), b.mean())
    assert theirs[:, excited].mean() > 100  # ~150 Hz of input, nearly every event a spike


def _welch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Welch's t per column of two [trials, k] samples (a zero variance counts as one spike's)."""
    va, vb = a.var(0, ddof=1), b.var(0, ddof=1)
    se = np.sqrt(np.maximum(va + vb, 1.0) / len(a))
    return (a.mean(0) - b.mean(0)) / se
