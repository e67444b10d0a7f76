"""flycuda.vision.connectome and .network without flyvis (issue 40): a small connectome file in
flyvis's format built as flyvis builds one (checked against a plain loop transcription of
flyvis's ConnectomeFromAvgFilters: nodes, edges, hull fill, parameter groups); the network's
steady state and fade-in equal flyvis's step (flycuda.reference.connectome) on that connectome bit
for bit; checkpoints and parameters refused in one line naming the parameter; the photoreceptor
input from the eyes' readouts. flyvis's own file and Network: tests/flygym_lane/test_connectome_flyvis.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from flycuda.errors import VisionError
from flycuda.reference.connectome import flyvis_step, stimulus_buffer
from flycuda.vision import connectome as cm
from flycuda.vision.connectome import Connectome
from flycuda.vision.network import ConnectomeNetwork, check_parameters, flyvis_weights, load_checkpoint, photoreceptors

EXTENT = 3  # 37 columns
SPEC = {
    "nodes": [{"name": "R1", "pattern": ["stride", [1, 1]]}, {"name": "R2", "pattern": ["stride", [1, 1]]},
              {"name": "L1", "pattern": ["stride", [1, 1]]}, {"name": "Lw", "pattern": ["stride", [2, 1]]},
              {"name": "T4", "pattern": ["tile", 1]}, {"name": "Am", "pattern": ["single", None]}],
    "edges": [
        {"src": "R1", "tar": "L1", "alpha": -1, "offsets": [[[0, 0], 40.5]], "lambda_mult": 1, "edge_type": "chem"},
        {"src": "R2", "tar": "L1", "alpha": -1, "offsets": [[[0, 0], 30.0], [[1, 0], 2.5]], "lambda_mult": 1,
         "edge_type": "chem"},
        {"src": "L1", "tar": "T4", "alpha": 1, "offsets": [[[0, 0], 5.0], [[2, -1], 1.5], [[-1, 2], 0.5], [[0, -2], 2.0],
                                                            [[-2, 0], 0.25]], "lambda_mult": 1, "edge_type": "chem"},
        {"src": "L1", "tar": "Lw", "alpha": 1, "offsets": [[[0, 0], 3.0], [[1, 0], 1.0], [[0, 1], 1.0]],
         "lambda_mult": 1, "edge_type": "chem"},
        {"src": "T4", "tar": "Am", "alpha": -1, "offsets": [[[0, 0], 7.0], [[1, 1], 2.0]], "lambda_mult": 1,
         "edge_type": "chem"},
        {"src": "Lw", "tar": "T4", "alpha": 1, "offsets": [[[1, -1], 4.0]], "lambda_mult": 1, "edge_type": "chem"},
        {"src": "T4", "tar": "T4", "alpha": -1, "offsets": [[[1, 0], 0.7], [[0, 1], 0.7], [[-1, -1], 0.7]],
         "lambda_mult": 1, "edge_type": "chem"},
    ],
    "receptors": [], "input_units": ["R1", "R2"], "output_units": ["T4"],
}


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("connectome") / "small.json"
    path.write_text(json.dumps(SPEC))
    return str(path)


@pytest.fixture(scope="module")
def small(spec_path):
    return Connectome.build(spec_path, extent=EXTENT)


def _loop_build(spec, extent):
    """flyvis's ConnectomeFromAvgFilters as plain loops (add_strided_nodes, add_conv_edges), the
    hull fill by brute force: every integer point of the offsets' box tested, in u-major order."""
    nodes = []
    for n in spec["nodes"]:
        pattern, args = n["pattern"]
        su, sv = {"stride": lambda: args, "tile": lambda: (args, args), "single": lambda: (1, 1)}[pattern]()
        ext = 0 if pattern == "single" else extent
        nodes += [(n["name"], u, v) for u in range(-ext, ext + 1) for v in range(max(-ext, -ext - u), min(ext, ext - u) + 1)
                  if u % su == 0 and v % sv == 0]
    where = {nd: i for i, nd in enumerate(nodes)}
    edges = []
    for e in spec["edges"]:
        offsets = list(e["offsets"])
        if len(offsets) >= 3:
            pts = np.array([o[0] for o in offsets], float)
            known = {tuple(o[0]) for o in offsets}
            for u in range(int(pts[:, 0].min()), int(pts[:, 0].max()) + 1):
                for v in range(int(pts[:, 1].min()), int(pts[:, 1].max()) + 1):
                    if (u, v) not in known and _inside(pts, (u, v)):
                        offsets.append([[u, v], 1.0])
        for (du, dv), n_syn in offsets:
            for i, (t, u, v) in enumerate(nodes):
                j = where.get((e["tar"], u + du, v + dv)) if t == e["src"] else None
                if j is not None:
                    edges.append((i, j, e["alpha"], n_syn))
    return nodes, edges


def _inside(pts, p):
    """Inside the convex hull of pts by matplotlib's point-in-path test on the hull's corners,
    flyvis's test (matplotlib decides the points on the boundary; flyvis's own file against flyvis:
    the FlyGym lane)."""
    from matplotlib.path import Path  # noqa: PLC0415

    corners = cm._hull(pts.astype(int))
    return bool(Path(corners).contains_point(p))


def test_build_is_flyvis_connectome_from_avg_filters(small):
    nodes, edges = _loop_build(SPEC, EXTENT)
    assert small.num_nodes == len(nodes) == 4 * 37 + 17 + 1  # Lw on stride (2, 1): the 17 columns of even u; Am single
    assert [(small.cell_types[t], u, v) for t, u, v in zip(small.node_type, small.u, small.v)] == nodes
    assert list(zip(small.source, small.target, small.sign, small.n_syn)) == [(s, t, a, np.float32(n)) for s, t, a, n
                                                                              in edges]
    assert small.num_edges > 200 and len(small.edge_type_keys) == 7
    filled = len(SPEC["edges"][2]["offsets"]) < len({(int(du), int(dv)) for du, dv in zip(
        small.u[small.target] - small.u[small.source], small.v[small.target] - small.v[small.source])})
    assert filled, "the hull of L1 -> T4's five offsets added points"


def test_parameter_groups_number_by_first_appearance(small):
    st, tt = small.node_type[small.source], small.node_type[small.target]
    du, dv = small.u[small.target] - small.u[small.source], small.v[small.target] - small.v[small.source]
    seen_et, seen_sg = {}, {}
    for i in range(small.num_edges):
        et = (small.cell_types[st[i]], small.cell_types[tt[i]])
        sg = et + (int(dv[i]), int(du[i]))
        assert small.edge_type[i] == seen_et.setdefault(et, len(seen_et))
        assert small.syn_group[i] == seen_sg.setdefault(sg, len(seen_sg))
    assert list(small.edge_type_keys) == list(seen_et)
    assert [(a, b, u, v) for a, b, u, v in small.syn_group_keys] == [(a, b, u, v) for a, b, v, u in seen_sg]
    assert small.parameter_shapes() == {"nodes_bias": (6,), "nodes_time_const": (6,), "edges_sign": (7,),
                                        "edges_syn_count": (len(seen_sg),), "edges_syn_strength": (7,)}
    assert small.input_layout() == (74, 37)
    assert small.central_node("T4") == int(np.flatnonzero((small.node_type == 4) & (small.u == 0) & (small.v == 0))[0])
    with pytest.raises(VisionError, match="unknown cell type 'T5'; the cell types are: R1, R2, L1, Lw, T4, Am"):
        small.nodes_of("T5")
    order, rowptr = small.rows()
    assert np.array_equal(small.target[order], np.sort(small.target)) and rowptr[-1] == small.num_edges
    for n in (0, 80, small.num_nodes - 1):  # each row in edge order
        assert np.all(np.diff(order[rowptr[n]:rowptr[n + 1]]) > 0)


def _params(c, seed=0) -> dict:
    g = torch.Generator().manual_seed(seed)
    shapes = c.parameter_shapes()
    return {"nodes_bias": torch.rand(shapes["nodes_bias"], generator=g) * 0.5,
            "nodes_time_const": torch.rand(shapes["nodes_time_const"], generator=g) * 0.08 + 0.01,
            "edges_sign": torch.as_tensor(c.sign[np.unique(c.edge_type, return_index=True)[1]]),
            "edges_syn_count": torch.log(torch.rand(shapes["edges_syn_count"], generator=g) * 10 + 1),
            "edges_syn_strength": torch.rand(shapes["edges_syn_strength"], generator=g) * 0.02 - 0.002}


def _flyvis_run(c, params, frames: list, dt: float, v0=None) -> list:
    """flyvis's step (flycuda.reference.connectome.flyvis_step) on flyvis's edge list."""
    p = check_parameters(c, params)
    nodes = torch.as_tensor(c.node_type, dtype=torch.int64)
    bias, tau = p["nodes_bias"][nodes], p["nodes_time_const"][nodes]
    w = flyvis_weights(c, p)
    src, tgt = torch.as_tensor(c.source), torch.as_tensor(c.target)
    v = bias.expand(frames[0].shape[0], -1).clone() if v0 is None else v0
    out = []
    for x in frames:
        v = flyvis_step(v, stimulus_buffer(x, c.num_nodes, 74), src, tgt, w, bias, tau, dt)
        out.append(v)
    return out


def test_steady_state_and_fade_in_are_flyvis(small):
    params = _params(small, 1)
    net = ConnectomeNetwork(small, params, 3, dt=0.02)
    grey = torch.full((3, 37), 0.5)
    want = _flyvis_run(small, params, [grey] * int(1.0 / 0.02), 0.02)[-1]
    assert torch.equal(net.steady_state(), want)
    frames = torch.rand(3, 37, generator=torch.Generator().manual_seed(2))
    T = int(0.1 / 0.002)
    ramp = torch.linspace(0, 1, T)[None, :, None] * (frames.unsqueeze(1).repeat(1, T, 1) - 0.5) + 0.5
    net = ConnectomeNetwork(small, params, 3, dt=0.002)
    assert torch.equal(net.fade_in(frames, seconds=0.1), _flyvis_run(small, params, list(ramp.unbind(1)), 0.002)[-1])
    assert net.voltages.stride() == (1, 3), "node-major: the CUDA kernel's gathers coalesce"


def test_a_stimulus_of_another_width_is_refused_with_the_voltages_untouched(small):
    """Two eyes' readouts flattened (2 x columns wide) divide the input nodes as one eye's do: the
    op alone would take them; the network refuses any width but its columns, and any batch but its own."""
    net = ConnectomeNetwork(small, _params(small), 2, dt=0.02)
    before = net.voltages.clone()
    C = net.columns
    for bad in (torch.rand(1, 2 * C), torch.rand(2, C // 2 + 1), torch.rand(3, C), torch.rand(2 * C)):
        with pytest.raises(VisionError, match=rf"stimulus must be \[batch, columns\] = \[2, {C}\] .*got shape"):
            net.step(bad)
    with pytest.raises(VisionError, match="got list"):
        net.run([0.5] * C, 1)
    assert torch.equal(net.voltages, before)
    net.step(torch.rand(2, C))  # the right width steps
    assert not torch.equal(net.voltages, before)


def test_parameters_and_checkpoints_are_checked(small, tmp_path):
    params = _params(small)
    cases = [({k: v for k, v in params.items() if k != "nodes_bias"}, "parameter 'nodes_bias' is missing"),
             (dict(params, extra=torch.zeros(1)), "unexpected parameter 'extra'"),
             (dict(params, edges_syn_count=params["edges_syn_count"][1:]), r"parameter 'edges_syn_count' has shape "
              r"\(\d+,\); the connectome needs \(\d+,\)"),
             (dict(params, nodes_time_const=params["nodes_time_const"] * float("nan")),
              "parameter 'nodes_time_const' holds a non-finite value")]
    for bad, match in cases:
        with pytest.raises(VisionError, match=match):
            ConnectomeNetwork(small, bad, 2, dt=0.02)
    with pytest.raises(VisionError, match="ConnectomeNetwork needs batch >= 1 and 0 < dt < 1 s"):
        ConnectomeNetwork(small, params, 0, dt=0.02)
    torch.save({"network": params, "val_loss": np.float64(0.3), "iteration": 5}, tmp_path / "chkpt_00000")
    torch.save(params, tmp_path / "bare.pt")
    for name in ("chkpt_00000", "bare.pt"):
        loaded = load_checkpoint(tmp_path / name)
        assert all(torch.equal(loaded[k], params[k]) for k in params)
    torch.save({"network": params, "hook": _params}, tmp_path / "code.pt")  # pickled code: refused
    with pytest.raises(VisionError, match="is not a flyvis checkpoint torch.load can read with weights_only=True"):
        load_checkpoint(tmp_path / "code.pt")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(VisionError, match="holds no flyvis network parameters"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(VisionError, match="does not exist"):
        load_checkpoint(tmp_path / "missing")


def test_without_a_file_or_flyvis_the_way_out_is_named(monkeypatch):
    monkeypatch.setattr(cm.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("FLYCUDA_CONNECTOME", raising=False)
    with pytest.raises(VisionError, match=r"pass the path to flyvis's fib25-fib19_v2.2.json \(or set "
                                          r"FLYCUDA_CONNECTOME\), or install the flyvis wheel that ships it"):
        Connectome.build()
    monkeypatch.setenv("FLYCUDA_CONNECTOME", "/elsewhere.json")
    with pytest.raises(VisionError, match="connectome file '/elsewhere.json' does not exist"):
        Connectome.build()
    with pytest.raises(VisionError, match="connectome file '/nowhere.json' does not exist"):
        Connectome.build("/nowhere.json")


def test_photoreceptors_take_the_lit_channel_in_flyvis_order():
    g = torch.Generator().manual_seed(3)
    readouts = torch.rand(2, 2, 721, 2, generator=g)
    readouts[..., 0][torch.rand(2, 2, 721, generator=g) > 0.5] = 0  # one channel lit per ommatidium
    order = torch.randperm(721, generator=g)
    out, scratch = torch.full((4, 721), float("nan")), torch.empty(2, 2, 721)
    photoreceptors(readouts, order, out, scratch)
    assert torch.equal(out.view(2, 2, 721), readouts.amax(3)[:, :, order])
