"""flycuda's connectome network (flycuda.vision.connectome and .network, flycuda.ops.connectome_step)
held against flyvis 1.2.0's own Network on the CPU (issue 40): the connectome and parameter groups
built without flyvis equal flyvis's; 200 steps from flyvis's steady state equal flyvis's
``simulate`` bit for bit, on the connectome's initial parameters and on a seeded perturbation of
every trainable one (time constants below dt, negative strengths that flyvis clamps); FlyGym 1.x's
step-by-step path (fade-in, then ``_next_state`` per vision update at 1/500 s) on inputs rendered by
flycuda's eyes from a turning fly; and a checkpoint written by flyvis's own ``checkpoint`` code,
read by flycuda without flyvis. flyvis is installed for these tests only (requirements-flyvis.txt);
its import sets torch's default device and matplotlib's rcParams, so the fixture pins the device to
the CPU and restores both after."""

from __future__ import annotations

import math
import os
import types

import numpy as np
import pytest
import torch

from flycuda.vision.connectome import Connectome
from flycuda.vision.network import (
    ConnectomeNetwork,
    flyvis_column_order,
    initial_parameters,
    load_checkpoint,
    photoreceptors,
)

pytestmark = [pytest.mark.needs_flyvis]

DT = 1 / 50  # flyvis' training step


@pytest.fixture(scope="module")
def flyvis_net(tmp_path_factory):
    """flyvis's default Network() on the CPU (its connectome cache under a temporary root). Its
    import changes process-wide state, restored after these tests: torch's default device and
    matplotlib's rcParams (dpi 300, tight bounding boxes, 5 pt fonts...)."""
    import matplotlib  # noqa: PLC0415

    before_env, before_device = os.environ.get("FLYVIS_ROOT_DIR"), torch.get_default_device()
    before_rc = matplotlib.rcParams.copy()
    os.environ["FLYVIS_ROOT_DIR"] = str(tmp_path_factory.mktemp("flyvis_root"))
    try:
        import flyvis  # noqa: PLC0415  (only these tests import it: it sets torch's default device)

        flyvis.device = torch.device("cpu")
        torch.set_default_device("cpu")
        from flyvis.network.network import Network  # noqa: PLC0415

        net = Network()
        net.eval()
        yield net
    finally:
        torch.set_default_device(before_device)
        matplotlib.rcParams.update(before_rc)
        if before_env is None:
            os.environ.pop("FLYVIS_ROOT_DIR", None)
        else:
            os.environ["FLYVIS_ROOT_DIR"] = before_env


@pytest.fixture(scope="module")
def connectome():
    return Connectome.build()  # flyvis's file, found in its installed wheel without importing it


def _params(net) -> dict:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _perturbed(net, seed: int = 40) -> dict:
    """Every trainable parameter moved by a seeded draw (so that a parameter read in the wrong
    order shows): biases, time constants (some below dt) and synapse strengths (some negative:
    flyvis clamps them to 0)."""
    g = torch.Generator().manual_seed(seed)
    p = _params(net)
    p["nodes_bias"] += torch.randn(p["nodes_bias"].shape, generator=g) * 0.1
    p["nodes_time_const"] *= torch.rand(p["nodes_time_const"].shape, generator=g) * 2.8 + 0.2
    p["edges_syn_strength"] *= torch.rand(p["edges_syn_strength"].shape, generator=g) * 2.5 - 0.25
    return p


def test_the_connectome_and_parameter_groups_are_flyvis(flyvis_net, connectome):
    c, fc = connectome, flyvis_net.connectome
    assert (c.num_nodes, c.num_edges) == (45669, 1513231)
    for mine, theirs in (("source", "source_index"), ("target", "target_index"), ("sign", "sign"), ("n_syn", "n_syn")):
        assert np.array_equal(getattr(c, mine), fc.edges[theirs][:]), mine
    for mine in ("u", "v"):
        assert np.array_equal(getattr(c, mine), fc.nodes[mine][:]), mine
    assert [c.cell_types[t] for t in c.node_type] == [t.decode() for t in fc.nodes.type[:]]
    groups = {"nodes_bias": c.node_type, "edges_sign": c.edge_type, "edges_syn_count": c.syn_group,
              "edges_syn_strength": c.edge_type}
    params = {**{f"nodes_{k}": v for k, v in flyvis_net.node_params.items()},
              **{f"edges_{k}": v for k, v in flyvis_net.edge_params.items()}}
    for name, mine in groups.items():
        assert np.array_equal(np.asarray(params[name].indices.cpu()), mine), name
    assert [tuple(k) for k in params["edges_sign"].keys] == list(c.edge_type_keys)
    assert [tuple(k) for k in params["edges_syn_count"].keys] == list(c.syn_group_keys)
    assert c.parameter_shapes() == {k: tuple(v.shape) for k, v in flyvis_net.state_dict().items()}


def test_initial_parameters_are_flyvis_defaults_on_the_cpu(flyvis_net, connectome):
    """flyvis's Network() on a machine without CUDA (its generator on the CPU): every parameter."""
    mine = initial_parameters(connectome)
    for name, theirs in flyvis_net.state_dict().items():
        assert torch.equal(mine[name], theirs.detach()), name


@pytest.mark.parametrize("which", ["connectome", "perturbed"])
def test_200_steps_equal_flyvis_simulate(flyvis_net, connectome, which):
    """flyvis's ``simulate(movie, dt)``: its steady state (1 s of grey from rest), then the movie."""
    params = _params(flyvis_net) if which == "connectome" else _perturbed(flyvis_net)
    default = _params(flyvis_net)
    flyvis_net.load_state_dict(params)
    try:
        movie = torch.rand(2, 200, 1, 721, generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            want = flyvis_net.simulate(movie, dt=DT)
    finally:
        flyvis_net.load_state_dict(default)
    if which == "perturbed":
        assert (params["nodes_time_const"] < DT).any() and (params["edges_syn_strength"] < 0).any()
    net = ConnectomeNetwork(connectome, params, 2, dt=DT)
    net.steady_state()
    for t in range(200):
        got = net.step(movie[:, t, 0])
        assert torch.equal(got, want[:, t]), f"step {t}: max difference {(got - want[:, t]).abs().max().item()}"
    assert want[:, -1].std() > 0.05, "the network moved"


def _flyvis_one_steps(net, fade_frames: torch.Tensor, frames: list, dt: float, t_fade: float) -> list:
    """FlyGym 1.x's path (v1.2.1 examples/vision: RealisticVisionFly, RealTimeVisionNetwork):
    fade_in_state, then setup_step_by_step_simulation's frozen parameters and one _next_state per
    forward_one_step, the frame written into a zero buffer at R1-R8."""
    with torch.no_grad():
        state = net.fade_in_state(t_fade_in=t_fade, dt=dt, initial_frames=fade_frames.unsqueeze(1))
        net.clamp()
        params = net._param_api()
        layer_index = {k: v[:] for k, v in net.connectome.nodes.layer_index.items()}
        inputs = np.array([layer_index[t.decode()] for t in net.connectome.input_cell_types[:]])
        out = []
        for x in frames:
            buf = torch.zeros((2, net.n_nodes))
            for i in range(2):
                buf[i, inputs] += x[i]
            state = net._next_state(params=params, state=state, x_t=buf, dt=dt)
            out.append(state.nodes.activity.clone())
    return out


@pytest.mark.needs_warp
@pytest.mark.needs_flygym
def test_flygym_1x_path_on_flycudas_eyes_of_a_turning_fly(flyvis_net, connectome):
    """Ten frames of flycuda's eyes (exact mode) while NeuroMechFly turns in place, each held
    for 20 network steps at FlyGym 1.x's 1/500 s, from a 0.1 s fade-in on the first: 200 steps,
    bit for bit."""
    from flygym.vision.retina import Retina  # noqa: PLC0415
    from helpers.worlds import nmf_with_eyes  # noqa: PLC0415

    from flycuda.vision import Vision  # noqa: PLC0415

    sim, _, _ = nmf_with_eyes(1)
    vision = Vision(sim)
    order = torch.as_tensor(flyvis_column_order(Retina().ommatidia_id_map))
    scratch, frames = torch.empty(1, 2, 721), []
    root = int(sim.mjm.jnt_qposadr[0])
    q = sim.view("qpos")
    for k in range(10):
        yaw = 0.25 * k  # rad: the scene sweeps across both eyes
        q[0, root + 3:root + 7] = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
        sim.kinematics()
        frame = torch.empty(2, 721)
        photoreceptors(vision.update(), order, frame, scratch)
        frames.append(frame)
    assert not torch.equal(frames[0], frames[5]) and (frames[0] > 0).float().mean() > 0.5
    steps = [f for f in frames for _ in range(20)]
    want = _flyvis_one_steps(flyvis_net, frames[0], steps, 1 / 500, 0.1)
    net = ConnectomeNetwork(connectome, _params(flyvis_net), 2, dt=1 / 500)
    net.fade_in(frames[0], seconds=0.1)
    for t, x in enumerate(steps):
        got = net.step(x)
        assert torch.equal(got, want[t]), f"step {t}: max difference {(got - want[t]).abs().max().item()}"


def test_a_checkpoint_written_by_flyvis_is_read_without_it(flyvis_net, connectome, tmp_path):
    """flyvis's own MultiTaskSolver.checkpoint writes the perturbed network (its format: the state
    dict under "network", a numpy validation loss, the optimizer's state); flycuda reads it with
    torch.load(weights_only=True) and steps as flyvis does."""
    from flyvis.solver import MultiTaskSolver  # noqa: PLC0415

    default, params = _params(flyvis_net), _perturbed(flyvis_net, seed=41)
    flyvis_net.load_state_dict(params)
    try:
        solver = types.SimpleNamespace(
            network=flyvis_net, decoder={}, optimizer=torch.optim.Adam(flyvis_net.parameters()),
            test=lambda **kw: np.float64(0.25), task=types.SimpleNamespace(val_data=None, val_batch=None,
                                                                          train_data=None, train_batch=None,
                                                                          dataset=types.SimpleNamespace(dt=DT)),
            iteration=1, checkpoint_path=tmp_path, checkpoints=[], _last_chkpt_ind=-1, _curr_chkpt_ind=-1,
            _val_loss=math.inf, dir=types.SimpleNamespace(extend=lambda *a: None))
        MultiTaskSolver.checkpoint(solver)
        movie = torch.rand(2, 20, 1, 721, generator=torch.Generator().manual_seed(8))
        with torch.no_grad():
            want = flyvis_net.simulate(movie, dt=DT)
    finally:
        flyvis_net.load_state_dict(default)
    path = tmp_path / "chkpt_00000"
    raw = torch.load(path, weights_only=False)
    assert isinstance(raw["val_loss"], np.floating) and "optim" in raw, "flyvis's own format"
    loaded = load_checkpoint(path)
    assert all(torch.equal(loaded[k], params[k]) for k in params)
    net = ConnectomeNetwork(connectome, loaded, 2, dt=DT)
    net.steady_state()
    for t in range(20):
        assert torch.equal(net.step(movie[:, t, 0]), want[:, t]), t
