"""The episode ops (flycuda.ops.episode: motion_at, scatter_actions, gather_columns,
episode_step, reset_worlds) against their references (flycuda.reference.episode), on
the CPU and on CUDA when present: random inputs of odd sizes, strided views, poisoned
outputs, the special values each op must handle; bad input leaves outputs untouched."""

import pytest
import torch
from helpers.cases import EPISODE_OPS, args_to, clone_args, episode_args
from helpers.devices import cpu_and_cuda, poison_like

import flycuda
from flycuda import ops
from flycuda.reference import episode as ref

KINDS = ("contiguous", "row_stride", "transposed")


def _outputs(op: str, args: dict) -> dict:
    names = {"motion_at": ["out"], "scatter_actions": ["ctrl"], "gather_columns": ["out"],
             "episode_step": ["world_steps", "terminated", "truncated"],
             "reset_worlds": ["qpos", "qvel", "world_steps", "episodes", "offsets"]}[op]
    return {n: args[n] for n in names}


def _call(fn, op: str, args: dict) -> None:
    a = dict(args)
    if op in ("motion_at",):
        fn(a.pop("frames"), a.pop("world_steps"), a.pop("out"), **a)
    elif op == "episode_step":
        pos = [a.pop(n) for n in ("world_steps", "qpos", "qvel", "terminated", "truncated")]
        fn(*pos, **a)
    else:
        fn(**a)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("op", EPISODE_OPS)
@pytest.mark.parametrize("W", [1, 4, 37, 1000])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_matches_reference(device, op, W, kind, seed):
    args = episode_args(op, W, kind, seed)
    want = clone_args(args)
    _call(getattr(ref, op), op, want)
    got = args_to(args, device)
    _call(getattr(ops, op), op, got)
    for name, t in _outputs(op, got).items():
        w = _outputs(op, want)[name]
        assert torch.equal(t.cpu(), w) or (t.dtype.is_floating_point and torch.equal(t.cpu().isnan(), w.isnan()) and
                                           torch.equal(t.cpu().nan_to_num(), w.nan_to_num())), f"{op}: {name} differs"


def test_motion_at_equals_the_global_ops():
    """World w's row is what motion_to_ctrl / spline_to_ctrl write at global step world_steps[w]."""
    W, T, D = 6, 40, 5
    frames = torch.randn(1, T, D)
    steps = torch.tensor([0, 3, 17, 39, 80, -2])
    offsets = torch.rand(W, dtype=torch.float64) * 7
    for buf, glob in ((frames, flycuda.motion_to_ctrl), (flycuda.spline_coeffs(frames), flycuda.spline_to_ctrl)):
        out = poison_like(torch.empty(W, D))
        ops.motion_at(buf, steps, out, offsets=offsets, frames_per_step=0.66, mode="clamp")
        for w in range(W):
            ctrl = poison_like(torch.empty(W, D))
            glob(buf, flycuda.new_step_counter("cpu", int(steps[w])), ctrl, torch.arange(D), offsets=offsets,
                 frames_per_step=0.66)
            assert torch.equal(out[w], ctrl[w])


def test_scatter_actions_touches_only_its_columns():
    args = episode_args("scatter_actions", 9, "row_stride", 3)
    before = args["ctrl"].clone()
    ops.scatter_actions(**args)
    others = [c for c in range(before.shape[1]) if c not in args["act_ids"].tolist()]
    assert torch.equal(args["ctrl"][:, others], before[:, others])
    low, high = args["action_map"][2], args["action_map"][3]
    assert torch.equal(args["ctrl"][0, args["act_ids"][0]], low[0])   # NaN -> low
    assert torch.equal(args["ctrl"][1, args["act_ids"][1]], high[1])  # +inf -> high
    assert torch.equal(args["ctrl"][2, args["act_ids"][2]], low[2])   # -inf -> low


def test_episode_step_rules():
    """Each rule on its own: an upright world at a good height runs on; too low, too high,
    tilted past min_up, a NaN anywhere terminate; the time limit truncates."""
    W, nq, nv = 6, 9, 8
    qpos, qvel = torch.zeros(W, nq), torch.zeros(W, nv)
    qpos[:, 2], qpos[:, 3] = 0.05, 1.0  # z, quaternion w: upright
    qpos[1, 2], qpos[2, 2] = 0.001, 0.5
    qpos[3, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # upside down (180 degrees about x)
    qvel[4, 7] = float("nan")
    steps = torch.tensor([0, 0, 0, 0, 0, 29])
    term, trunc = torch.ones(W, dtype=torch.bool), torch.ones(W, dtype=torch.bool)
    ops.episode_step(steps, qpos, qvel, term, trunc, root_adr=0, min_height=0.01, max_height=0.2, min_up=0.0,
                     max_steps=30)
    assert term.tolist() == [False, True, True, True, True, False]
    assert trunc.tolist() == [False] * 5 + [True]
    assert steps.tolist() == [1, 1, 1, 1, 1, 30]


def test_reset_worlds_reproducible_and_spread():
    """The same seed and episode counts give the same states; other seeds or episodes
    others; untouched worlds stay bit for bit; picks cover every initial state."""
    args = episode_args("reset_worlds", 400, "contiguous", 1)
    args["done"][:] = True
    args["done"][::7] = False
    a, b = clone_args(args), clone_args(args)
    ops.reset_worlds(**a)
    ops.reset_worlds(**b)
    for n in ("qpos", "qvel", "offsets", "episodes"):
        assert torch.equal(a[n], b[n])
    kept = ~args["done"]
    assert torch.equal(a["qpos"][kept], args["qpos"][kept]) and torch.equal(a["world_steps"][kept],
                                                                           args["world_steps"][kept])
    assert (a["world_steps"][args["done"]] == 0).all()
    assert set(a["offsets"][args["done"]].tolist()) == set(args["init_frames"].tolist())
    c = clone_args(args)
    c["seed"] += 1
    ops.reset_worlds(**c)
    assert not torch.equal(c["qpos"][args["done"]], a["qpos"][args["done"]])
    u = (a["qvel"][args["done"]] - args["init_qvel"][0]).abs()  # noise stays within its bound
    picked = [int((args["init_frames"] == f).nonzero()) for f in a["offsets"][args["done"]].tolist()]
    dev = (a["qvel"][args["done"]] - args["init_qvel"][picked]).abs()
    assert (dev <= args["qvel_noise"] + 1e-6).all() and u.max() > 0
    assert torch.equal(a["qpos"][args["done"]][:, :3], args["init_qpos"][picked][:, :3])  # zero noise: exact


BAD = {
    "motion_at": [("out", lambda a: a["out"].double(), "'out' must be a float32"),
                  ("world_steps", lambda a: a["world_steps"].int(), "'world_steps' must have dtype Long"),
                  ("frames", lambda a: a["frames"][..., :-1].contiguous(), "'frames' must have size"),
                  ("frames_per_step", lambda a: float("nan"), "'frames_per_step' must be finite")],
    "scatter_actions": [("actions", lambda a: a["actions"][:-1], "'actions' must have size"),
                        ("act_ids", lambda a: a["act_ids"].flip(0) * 0, "act_ids"),
                        ("action_map", lambda a: a["action_map"][:3].contiguous(), "'action_map' must have shape"),
                        ("act_ids", lambda a: a["act_ids"] + 100, "act_ids")],
    "gather_columns": [("columns", lambda a: a["columns"].long(), "'columns' must have dtype Int"),
                       ("columns", lambda a: a["columns"] + torch.tensor([0, 50], dtype=torch.int32),
                        "names column"),
                       ("columns", lambda a: a["columns"] + torch.tensor([3, 0], dtype=torch.int32),
                        "names source"),
                       ("sources", lambda a: a["sources"] * 3, "1 to 8")],
    "episode_step": [("qpos", lambda a: a["qpos"].double(), "'qpos' must have dtype Float"),
                     ("terminated", lambda a: a["terminated"].to(torch.uint8), "'terminated' must have dtype Bool"),
                     ("root_adr", lambda a: 20, "'root_adr' must be -1"),
                     ("max_steps", lambda a: -1, "'max_steps' must be >= 0")],
    "reset_worlds": [("init_qpos", lambda a: a["init_qpos"][:, :-1].contiguous(), "'init_qpos' must have size"),
                     ("init_frames", lambda a: a["init_frames"].float(), "'init_frames' must have dtype Double"),
                     ("qvel_noise", lambda a: a["qvel_noise"][:-1], "'qvel_noise' must have size"),
                     ("offsets", lambda a: a["qpos"][:, 0], "'offsets' must have dtype Double")],
}


@pytest.mark.parametrize("op,i", [(op, i) for op in EPISODE_OPS for i in range(4)])
def test_bad_input_names_the_argument_and_writes_nothing(op, i):
    name, make, msg = BAD[op][i]
    args = episode_args(op, 5, "contiguous", 0)
    args[name] = make(args)
    before = {n: t.clone() for n, t in _outputs(op, args).items()}
    with pytest.raises((RuntimeError, ValueError), match=msg):
        _call(getattr(ops, op), op, args)
    for n, t in _outputs(op, args).items():
        assert torch.equal(t.nan_to_num(), before[n].nan_to_num()), f"{op} wrote '{n}' on bad input"


def test_outputs_must_not_alias_inputs():
    a = episode_args("gather_columns", 5)
    with pytest.raises(RuntimeError, match="'out' must not share memory with argument 'sources'"):
        ops.gather_columns(a["sources"], a["columns"], a["sources"][0][:, :1].expand(5, 12))
    r = episode_args("reset_worlds", 5)
    r["episodes"] = r["world_steps"]
    with pytest.raises(RuntimeError, match="must not share memory"):
        ops.reset_worlds(**r)


@pytest.mark.parametrize("op", EPISODE_OPS)
def test_opcheck(op):
    args = episode_args(op, 6, "contiguous", 2)
    schema = getattr(torch.ops.flycuda, op).default
    if op == "motion_at":
        pos = (args["frames"], args["world_steps"], args["out"], args["offsets"], args["frames_per_step"],
               args["mode"])
    elif op == "episode_step":
        pos = tuple(args[n] for n in ("world_steps", "qpos", "qvel", "terminated", "truncated", "root_adr",
                                      "min_height", "max_height", "min_up", "max_steps"))
    elif op == "reset_worlds":
        pos = tuple(args[n] for n in ("done", "init_qpos", "init_qvel", "init_frames", "qpos_noise", "qvel_noise"))
        pos += (args["seed"] - 2 ** 64,) + tuple(args[n] for n in ("qpos", "qvel", "world_steps", "episodes",
                                                                  "offsets"))
    else:
        pos = tuple(args.values())
    torch.library.opcheck(schema, pos)
