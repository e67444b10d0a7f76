"""The replay's ``connectome`` observables (issue 40): flyvis's network behind both eyes of every
world, one step per eye sample, stored next to the readouts; every stored sample equals the network
run by hand on the stored readouts (bit for bit). The eyed hexapod (tests/helpers/worlds.py) with
FlyGym's retina; flyvis's connectome file from its installed wheel: the FlyGym lane."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.worlds import eyed_fly_xml

from flycuda.vision import Connectome, ConnectomeNetwork, flyvis_column_order, photoreceptors
from flycuda.vision.eyes import flygym_retina
from flycuda.vision.network import initial_parameters

pytestmark = [pytest.mark.needs_flyvis, pytest.mark.needs_flygym, pytest.mark.needs_warp]

TYPES = ("T4a", "Mi1")


def test_the_stored_network_is_the_network_run_on_the_stored_eyes():
    from flycuda.replay import replay
    from flycuda.sim import Sim

    every, steps, W = 8, 40, 2
    sim = Sim.build(eyed_fly_xml(), W, device="cpu")
    res = replay(sim=sim, worlds=W, duration=steps * sim.timestep, progress=False, vision=f"fast:2@{every}",
                 record="memory", observe=("angles", f"connectome:{','.join(TYPES)}"))
    rec = res.recording
    eyes, got = rec.vision(), rec.samples("connectome")
    rows = steps // every + 1
    assert got.shape == (W, rows, 2 * len(TYPES)) and rec.every("connectome") == every
    a = rec["connectome"].attrs
    assert a["cell_types"] == list(TYPES) and a["observed_columns"] == "central" and a["dt"] == pytest.approx(every * sim.timestep)
    assert rec.columns("connectome") == [f"connectome:{t}:{eye}" for eye in ("left", "right") for t in TYPES]
    c = Connectome.build()
    params = initial_parameters(c)
    net = ConnectomeNetwork(c, params, 2 * W, dt=every * sim.timestep)
    net.voltages.copy_(ConnectomeNetwork(c, params, 1, dt=every * sim.timestep).steady_state().expand(2 * W, -1))
    order = torch.as_tensor(flyvis_column_order(flygym_retina().id_map))
    nodes = [c.central_node(t) for t in TYPES]
    stimulus, scratch = torch.empty(2 * W, 721), torch.empty(W, 2, 721)
    for k in range(rows):
        photoreceptors(torch.from_numpy(eyes[:, k]), order, stimulus, scratch)
        net.step(stimulus)
        want = net.voltages.view(W, 2, -1)[:, :, nodes].reshape(W, -1).numpy()
        assert np.array_equal(got[:, k], want), k
    assert not np.array_equal(got[:, 0], got[:, -1]), "the eyes moved the network"


def test_an_unknown_cell_type_is_refused_naming_the_valid_ones():
    from flycuda.replay import ReplayError, replay
    from flycuda.sim import Sim

    sim = Sim.build(eyed_fly_xml(), 1, device="cpu")
    with pytest.raises(ReplayError, match=r"observe connectome:T9: unknown cell type 'T9'; the cell types are: R1"):
        replay(sim=sim, worlds=1, duration=4 * sim.timestep, progress=False, vision="fast:2@2", record="memory",
               observe=("connectome:T9",))
