"""Random inputs of the ops, shared by each op's tests and the emulator's: motion_to_ctrl's shapes and
cases, the episode ops' arguments, hybrid_step's and hybrid_senses' inputs."""

import numpy as np
import torch

from flycuda import ops
from flycuda.control import load_steps, tripod_params
from flycuda.ops.launch_plan import HYBRID_COLUMNS
from helpers.devices import poison_like, strided_view

M2C_MODES = ["clamp", "loop"]
M2C_SHAPES = [  # (W, M, T, D, nu)
    (1, 1, 1, 1, 1),
    (1, 1, 9, 42, 42),
    (3, 1, 1, 5, 9),
    (7, 7, 2, 3, 4),
    (33, 33, 13, 7, 11),
    (257, 1, 661, 42, 50),
    (1000, 1000, 17, 42, 42),
]


def make_m2c_case(W, M, T, D, nu, offsets_kind, device, act_dtype=torch.int64):
    """(motion [M, T, D], act_ids [D], offsets [W] or None) for motion_to_ctrl;
    offsets_kind: None, "int" (whole frames) or "wild" (negative, fractional, beyond T)."""
    motion = torch.randn(M, T, D).to(device)
    act_ids = torch.randperm(nu)[:D].to(device=device, dtype=act_dtype)
    if offsets_kind is None:
        offsets = None
    elif offsets_kind == "int":
        offsets = torch.randint(0, T, (W,)).to(device=device, dtype=torch.float32)
    elif offsets_kind == "wild":  # negative, fractional, beyond T
        offsets = ((torch.rand(W, dtype=torch.float64) * 3 - 1) * (T + 2)).to(device)
    else:
        raise ValueError(offsets_kind)
    return motion, act_ids, offsets


# mujoco_warp/test_data/hfield/hfield.xml (its active hfield, plane and sphere)


EPISODE_OPS = ("motion_at", "scatter_actions", "gather_columns", "episode_step", "reset_worlds")


def episode_args(op: str, W: int, kind: str = "contiguous", seed: int = 0) -> dict:
    """Keyword arguments of ``flycuda.ops.<op>`` on the CPU: random inputs of odd sizes,
    strided views (``kind`` as :func:`strided_view`) where the op takes any strides, and
    poisoned outputs. A few worlds get the special values each op must handle (NaN,
    inf, out-of-range poses, counters past the recording)."""
    g = torch.Generator().manual_seed(seed)

    def view(rows, cols):
        t, _ = strided_view(rows, cols, kind, "cpu")
        t.copy_(torch.randn(rows, cols, generator=g))
        return t

    if op == "motion_at":
        T, D = 13, 9
        frames = torch.randn(1 if seed % 2 else W, T, D, generator=g)
        if seed % 3 == 1:
            from flycuda.ops.spline import spline_coeffs
            frames = spline_coeffs(frames)
        out, _ = strided_view(W, D, kind, "cpu")
        offsets = (torch.rand(W, generator=g, dtype=torch.float64) * 20 - 5)
        if W > 2:
            offsets[1] = float("nan")
        return dict(frames=frames, world_steps=torch.randint(-4, 60, (W,), generator=g), out=out,
                    offsets=offsets if seed % 4 else offsets.float(), frames_per_step=0.37 + seed * 0.1,
                    mode="loop" if seed % 2 else "clamp")
    if op == "scatter_actions":
        A, nu = 7, 11
        actions = view(W, A) * 2
        if W > 2:
            actions[0, 0], actions[1, 1], actions[2, 2] = float("nan"), float("inf"), -float("inf")
        low = -torch.rand(A, generator=g)
        from flycuda.ops import action_map
        amap = action_map(torch.rand(A, generator=g) + 0.5, torch.randn(A, generator=g) * 0.1, low,
                          torch.rand(A, generator=g))
        ctrl, _ = strided_view(W, nu, kind, "cpu")
        ids = torch.randperm(nu, generator=g)[:A].to(torch.int32 if seed % 2 else torch.int64)
        return dict(actions=actions, act_ids=ids, action_map=amap, ctrl=ctrl)
    if op == "gather_columns":
        sources = [view(W, n) for n in (5, 1, 8)]
        O = 12
        k = torch.randint(0, 3, (O,), generator=g)
        c = torch.stack([torch.randint(0, sources[i].shape[1], (1,), generator=g)[0] for i in k.tolist()])
        out, _ = strided_view(W, O, kind, "cpu")
        return dict(sources=sources, columns=torch.stack([k, c], 1).to(torch.int32).contiguous(), out=out)
    if op == "episode_step":
        nq, nv = 14, 13
        qpos, qvel = view(W, nq), view(W, nv)
        root = 3
        quat = torch.randn(W, 4, generator=g)
        qpos[:, root + 3:root + 7] = quat / quat.norm(dim=1, keepdim=True)
        qpos[:, root + 2] = torch.rand(W, generator=g) * 0.1
        if W > 3:
            qpos[0, 5], qvel[1, 2], qpos[2, root + 2] = float("nan"), float("inf"), float("nan")
        return dict(world_steps=torch.randint(0, 40, (W,), generator=g), qpos=qpos, qvel=qvel,
                    terminated=torch.rand(W, generator=g) < 0.5, truncated=torch.rand(W, generator=g) < 0.5,
                    root_adr=root if seed % 2 == 0 else -1, min_height=0.02, max_height=0.09, min_up=0.3,
                    max_steps=30 if seed % 3 else 0)
    if op == "reset_worlds":
        nq, nv, K = 12, 11, 5
        noise_q = torch.rand(nq, generator=g) * 0.1
        noise_q[:3] = 0  # exact copies there
        return dict(done=torch.rand(W, generator=g) < 0.5, init_qpos=torch.randn(K, nq, generator=g),
                    init_qvel=torch.randn(K, nv, generator=g), init_frames=torch.rand(K, generator=g,
                                                                                       dtype=torch.float64) * 100,
                    qpos_noise=noise_q, qvel_noise=torch.rand(nv, generator=g), seed=seed * 7919 + 2 ** 63 + 5,
                    qpos=view(W, nq), qvel=view(W, nv), world_steps=torch.randint(0, 99, (W,), generator=g),
                    episodes=torch.randint(0, 5, (W,), generator=g),
                    offsets=poison_like(torch.empty(W, dtype=torch.float64)))
    raise ValueError(op)


def clone_args(args: dict) -> dict:
    """A deep copy of an op's arguments (views stay views of their own copied parents)."""
    def one(v):
        if isinstance(v, torch.Tensor):
            base = torch.as_strided(v, (v.untyped_storage().nbytes() // v.element_size(),), (1,), 0).clone()
            return torch.as_strided(base, v.shape, v.stride(), v.storage_offset())
        if isinstance(v, list):
            return [one(x) for x in v]
        return v
    return {k: one(v) for k, v in args.items()}


def args_to(args: dict, device) -> dict:
    """The same arguments on ``device`` (strided views keep their layout)."""
    def one(v):
        if isinstance(v, torch.Tensor):
            base = torch.as_strided(v, (v.untyped_storage().nbytes() // v.element_size(),), (1,), 0).to(device)
            return torch.as_strided(base, v.shape, v.stride(), v.storage_offset())
        if isinstance(v, list):
            return [one(x) for x in v]
        return v
    return {k: one(v) for k, v in args.items()}


# --- hybrid_step (FlyGym's walking controllers): the op tests' and the emulator's inputs -------

HYBRID_MODES = {"cpg": dict(rules=False, turning=False, swing_extension=0.0), "hybrid": dict(turning=False),
         "turning": dict()}


def hybrid_params(mode: str, device="cpu", dt: float = 1e-4) -> torch.Tensor:
    t, c = load_steps(), tripod_params()
    return ops.hybrid_params(t.knots, t.coeffs, t.neutral, t.swing_end, c.freqs, c.amps, c.weights, c.biases,
                             c.convergence, timestep=dt, device=device, **HYBRID_MODES[mode])


def hybrid_senses(rng: np.random.Generator, W: int, dtype, step: int):
    """Drives (changing sign) and sensory inputs that fire the retraction (a leg hanging for
    long stretches: persistence too) and stumbling rules; every 10th step world 0 has a NaN
    tarsus height (no leg retracts) and a NaN force (no stumble)."""
    drive = rng.uniform(-1.2, 1.2, (W, 2))
    thorax = 1.0 + 0.05 * rng.standard_normal(W)
    tarsi = 0.3 + 0.02 * rng.standard_normal((W, 6))
    if step % 300 < 240:
        tarsi[np.arange(W), np.arange(W) % 6] -= 0.2
    forces = 1.3 * rng.standard_normal((W, 6, 3, 3)) * (rng.random((W, 6, 1, 1)) < 0.2)
    if step % 10 == 0:
        tarsi[0, 2] = forces[0, 1, 0, 0] = np.nan
    heading = rng.standard_normal((W, 3))
    heading /= np.linalg.norm(heading, axis=1, keepdims=True)
    return [torch.tensor(a, dtype=dtype) for a in (drive, thorax, tarsi, forces, heading)]


def hybrid_state(W: int, seed: int):
    """A mid-walk state: phases, magnitudes, retraction corrections on both sides of the
    persistence threshold (20), stumbling corrections, counters running (some about to stop)."""
    g = torch.Generator().manual_seed(seed)
    state = torch.zeros(W, 5, 6, dtype=torch.float64)
    state[:, 0] = torch.rand(W, 6, generator=g, dtype=torch.float64) * 2 * np.pi
    state[:, 1] = torch.rand(W, 6, generator=g, dtype=torch.float64)
    state[:, 2] = torch.rand(W, 6, generator=g, dtype=torch.float64) * 30 * (torch.rand(W, 6, generator=g) < 0.5)
    state[:, 3] = torch.rand(W, 6, generator=g, dtype=torch.float64) * 5 * (torch.rand(W, 6, generator=g) < 0.5)
    return state, torch.randint(0, 22, (W, 6), generator=g) * (torch.rand(W, 6, generator=g) < 0.5)


def hybrid_controls(W: int, kind: str, index_dtype, seed: int):
    """ctrl [W, 60] (poisoned) with the op's 48 columns scattered among them: ``kind`` "contiguous",
    "strided" (every other column of a wider buffer) or "transposed"."""
    g = torch.Generator().manual_seed(seed)
    nu = 60
    ids = torch.randperm(nu, generator=g)[:HYBRID_COLUMNS].to(index_dtype)
    if kind == "transposed":
        return ids, torch.full((nu, W), float("nan")).t()
    if kind == "strided":
        return ids, torch.full((W, 2 * nu), float("nan"))[:, ::2]
    return ids, torch.full((W, nu), float("nan"))


# --- hybrid_senses (the controllers' inputs from MuJoCo Warp's Data): the op tests' and the emulator's inputs ---

def senses_args(W: int, slots: int, used: int, seed: int, cone: int = 0, index_dtype=torch.int64) -> dict:
    """hybrid_senses' arguments: W worlds of 11 bodies (random poses), 40 geoms (18 leg
    segments, 5 ground, the rest neither), a pool of ``slots`` contacts of which the first
    ``used`` count (nacon), poisoned float64 outputs. The contacts in use: segment-ground pairs
    in both geom orders (several on one segment of one world: sums), pairs that must not
    count (segment-segment, segment-other, other-ground, ground-ground), constraints out of
    the solver (efc_address -1), rows running past njmax, condim 1, 3, 4 and 6, nonzero
    adhesion, and a world and geom id outside the arrays; the slots past nacon are valid
    segment-ground contacts that must not count either."""
    g = np.random.default_rng(seed)
    nbody, ngeom, njmax = 11, 40, 64
    perm = g.permutation(ngeom)
    segment, ground = perm[:18], perm[18:23]
    seg_table = ops.geom_segments(ngeom, segment, ground)
    other = perm[23:]
    pick = g.integers(0, 10, slots)
    geom = np.stack([g.choice(segment, slots), g.choice(ground, slots)], axis=1)
    geom[pick == 1] = geom[pick == 1][:, ::-1]                                     # ground first
    geom[pick == 2, 1] = g.choice(segment, int((pick == 2).sum()))                # segment-segment
    geom[pick == 3, 1] = g.choice(other, int((pick == 3).sum()))                  # segment-other
    geom[pick == 4, 0] = g.choice(other, int((pick == 4).sum()))                  # other-ground
    geom[pick == 5, 0] = g.choice(ground, int((pick == 5).sum()))                 # ground-ground
    worldid = g.integers(0, W, slots)
    if used > 3:
        worldid[1], geom[2, 0] = W, ngeom  # outside the arrays: skipped
    dim = g.choice([1, 3, 3, 4, 6], slots)
    efc_address = np.stack([g.integers(0, njmax - 12, slots) + 2 * i for i in range(6)], axis=1)
    efc_address[g.random(slots) < 0.1, 0] = -1                                    # not in the solver
    efc_address[g.random(slots) < 0.05, :] += njmax - 14                          # rows past njmax
    frame = g.standard_normal((slots, 3, 3))
    contacts = dict(geom=geom, worldid=worldid, frame=frame, friction=g.uniform(0.1, 1.5, (slots, 5)), dim=dim,
                    efc_address=efc_address, adhesion=g.uniform(0, 0.3, slots) * (g.random(slots) < 0.3),
                    efc_force=g.uniform(-0.5, 2.0, (W, njmax)), nacon=np.array([used]))
    ints = ("geom", "worldid", "dim", "efc_address", "nacon")
    tensors = [torch.tensor(contacts[n], dtype=torch.int32 if n in ints else torch.float32).contiguous()
               for n in ops.CONTACT_FIELDS]
    xmat = torch.tensor(g.standard_normal((W, nbody, 3, 3)), dtype=torch.float32)
    return dict(xpos=torch.tensor(g.standard_normal((W, nbody, 3)), dtype=torch.float32), xmat=xmat,
                body_ids=torch.tensor(g.permutation(nbody)[:7], dtype=index_dtype), contacts=tensors,
                geom_segment=seg_table, cone=cone, thorax_z=torch.full((W,), float("nan"), dtype=torch.float64),
                tarsus5_z=torch.full((W, 6), float("nan"), dtype=torch.float64),
                stumbling_forces=torch.full((W, 6, 3, 3), float("nan"), dtype=torch.float64),
                heading=torch.full((W, 3), float("nan"), dtype=torch.float64))


SENSE_OUTPUTS = ("thorax_z", "tarsus5_z", "stumbling_forces", "heading")


def ulps32(a, b) -> int:
    """The largest distance in float32 ulps between ``a`` and ``b`` (tensors or arrays; float64
    values are rounded to float32 first, as FlyGym's angles reach MuJoCo Warp's ctrl)."""
    ia = torch.as_tensor(a).to(torch.float32).contiguous().view(torch.int32).long()
    ib = torch.as_tensor(b).to(torch.float32).contiguous().view(torch.int32).long()
    return int((ia - ib).abs().max()) if ia.numel() else 0


def assert_refused_untouched(op, args: dict, outputs, match: str) -> None:
    """``op(**args)`` raises a RuntimeError matching ``match`` and leaves every output untouched."""
    import pytest  # noqa: PLC0415  (a test helper)

    before = {k: args[k].clone() for k in outputs}
    with pytest.raises(RuntimeError, match=match):
        op(**args)
    for k, v in before.items():
        assert torch.equal(args[k].nan_to_num(), v.nan_to_num()), k


def assert_graph_replays_eager(op, args: dict, outputs, replays: int) -> None:
    """``op`` captured once into a CUDA graph and replayed ``replays`` times equals as many
    eager calls, bit for bit (args on the GPU; the op's ids checked once outside the capture)."""
    eager = {k: v.clone() for k, v in args.items()}
    for _ in range(replays):
        op(**eager)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        op(**{k: v.clone() for k, v in args.items()})  # the ids checked once, outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        op(**args)
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    for name in outputs:
        assert torch.equal(args[name].nan_to_num(), eager[name].nan_to_num()), name


ODOR_LAYOUTS = ("contiguous", "strided", "shared", "per_world")


def odor_args(W: int, n: int, k: int, s: int, field: str = "power", layout: str = "contiguous", seed: int = 0,
              exponent: float = 2.0) -> dict:
    """odor_intensity's arguments (flycuda.ops.odor_intensity's names), out poisoned with NaN.
    Positions within +-20 (both branches of k0e at the course's D and decay). Layouts:
    "contiguous"; "strided" (the sensors a column subset of a [W, 2s+1, 3] site table, the
    sources' and out's dims transposed in memory, the wind a column of [W, 3]); "shared" (one
    set of sources for every world, an expand: stride 0); "per_world" (peaks [W, n, k])."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g) * 40 - 20  # noqa: E731
    sources, sensors = rand(W, n, 3), rand(W, s, 3)
    peaks = torch.rand(W if layout == "per_world" else n, *((n,) if layout == "per_world" else ()), k, generator=g)
    peaks = peaks * 100 + 0.5
    out = torch.full((W, k, s), float("nan"))
    wind = (torch.rand(W, 2, generator=g) * 800 - 400) if field == "advection_diffusion" else None
    if layout == "strided":
        sites = rand(W, 2 * s + 1, 3)
        sites[:, 1::2] = sensors
        sensors = sites[:, 1::2]
        sources = sources.transpose(0, 1).contiguous().transpose(0, 1)
        out = out.permute(2, 1, 0).contiguous().permute(2, 1, 0)
        if wind is not None:
            wind = torch.cat([wind, rand(W, 1)], 1)[:, :2]
    elif layout == "shared":
        sources = sources[:1].expand(W, n, 3)
    return dict(sources=sources, peaks=peaks, sensors=sensors, out=out, field=field, exponent=exponent, wind=wind,
                diffusivity=20000.0, decay=500.0)


def plume_args(W: int, s: int, dims: int = 2, T: int = 7, shape=(9, 6, 4), layout: str = "contiguous", seed: int = 0,
               time_mode: str = "clamp") -> dict:
    """odor_plume's arguments (flycuda.ops.odor_plume's names), out poisoned with NaN: a random grid
    [T, X, Y(, Z)], sensors spread a little past the grid on every side (some outside: NaN), times
    from before the recording to past its end. "strided": the sensors a column subset of a site
    table, out transposed in memory, time a column of [W, 2]."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.rand(T, *shape[:dims], generator=g) * 10
    origin = [(-1.5, 0.5, -0.25)[d] for d in range(dims)]
    spacing = [(0.5, 0.25, 0.4)[d] for d in range(dims)]
    span = torch.tensor([[origin[d] - 0.4 * spacing[d], origin[d] + spacing[d] * (n - 0.6)]  # half a cell past
                         for d, n in enumerate(shape[:dims])] + [[0.0, 1.0]] * (3 - dims))
    sensors = span[:, 0] + torch.rand(W, s, 3, generator=g) * (span[:, 1] - span[:, 0])
    fps = 20.0
    time = (torch.rand(W, generator=g) * 1.4 - 0.2) * (T - 1) / fps
    out = torch.full((W, s), float("nan"))
    if layout == "strided":
        sites = torch.rand(W, 2 * s + 1, 3, generator=g)
        sites[:, 1::2] = sensors
        sensors = sites[:, 1::2]
        out = out.t().contiguous().t()
        time = torch.stack([time, torch.rand(W, generator=g)], 1)[:, 0]
    return dict(plume=grid, sensors=sensors, time=time, out=out, origin=origin, spacing=spacing, fps=fps,
                time_mode=time_mode)
