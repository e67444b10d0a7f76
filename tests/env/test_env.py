"""flycuda.env: batched fly environments (the built-in hexapod on Warp's CPU device).

The reference policy reproduces the replay bit for bit; autoreset touches only the
worlds that ended; seeds reproduce; every observation column is the Data it names;
gymnasium's vector API; bad input raises before anything is stepped."""

import json
import math
import warnings

import numpy as np
import pytest
import torch

import flycuda.env as fe
from flycuda.errors import EnvError

pytestmark = pytest.mark.needs_warp
DT = 0.0005  # the hexapod's timestep


def _ref(env, obs):
    return obs[:, env.obs_slice("reference")].clone()


def test_reference_policy_equals_the_replay():
    """With actions = the reference observation and one physics step per control step, the
    joint angles equal replay()'s at every step, bit for bit, for the same worlds and
    start frames (both start with the joints at the recording's pose there, at rest)."""
    from flycuda.replay import replay

    W, n = 3, 40
    frames = torch.tensor([0.0, 101.5, 400.25], dtype=torch.float64)
    res = replay(worlds=W, offsets=frames, duration=n * DT, mode="loop", progress=False, record="memory",
                 device="cpu")
    env = fe.make("imitate", worlds=W, device="cpu", control_dt=DT, noise=0.0, max_episode_steps=0)
    obs, _ = env.reset(seed=0, options={"start_frames": frames})
    assert torch.equal(env.angles, res.recorded[:, 0])
    for k in range(n):
        obs, *_ = env.step(_ref(env, obs))
        assert torch.equal(env.angles, res.recorded[:, k + 1]), f"step {k + 1}"
    assert not env.terminated.any()


def _run(env, actions, steps, poison=None):
    """Steps ``env``; returns the observations, rewards and final observations; ``poison(k,
    env)`` may corrupt the state before step k."""
    obs, _ = env.reset(seed=7)
    out = [obs.clone()]
    for k in range(steps):
        if poison is not None:
            poison(k, env)
        obs, rew, term, trunc, info = env.step(actions[k])
        out.append(torch.cat([obs, rew[:, None], term[:, None], trunc[:, None], info["final_obs"],
                              info["_final_obs"][:, None]], 1).clone())
    return out


def test_autoreset_touches_only_the_worlds_that_ended():
    """A world whose state goes NaN terminates at that step and starts its next episode from
    the initial distribution; no NaN of it reaches what the step returns (its final_obs is its
    last observation, its reward 0: FlyGym #271), it is marked and counted; every other world's
    run is bit for bit the run without it."""
    W, steps, bad = 5, 12, 2
    actions = [torch.randn(W, 42) * 0.1 for _ in range(steps)]
    a = _run(fe.make("imitate", worlds=W, device="cpu", control_dt=2 * DT), actions, steps)
    marked = []

    def poison(k, env):
        if k == 6:
            env.sim.view("qvel")[bad, 8] = float("nan")
        marked.append(env.nonfinite.state.clone())  # the previous step's marks

    env = fe.make("imitate", worlds=W, device="cpu", control_dt=2 * DT)
    b = _run(env, actions, steps, poison)
    others = [w for w in range(W) if w != bad]
    for k in range(steps + 1):
        assert torch.equal(a[k][others], b[k][others]), f"step {k}: another world changed"
        assert torch.isfinite(b[k]).all(), f"step {k}: a NaN reached what the step returned"
    O = len(env.obs_names)
    row = b[7][bad]  # the step whose physics went NaN
    assert bool(row[O + 1]) and bool(row[-1]), "terminated and marked in _final_obs"
    assert torch.equal(row[O + 3:2 * O + 3], b[6][bad][:O]), "final_obs is the last observation it had"
    assert row[O] == env.task.nonfinite_reward == 0, "its reward: the task's (imitate: 0)"
    assert not torch.equal(row[:O], b[6][bad][:O]), "the returned obs is the new episode's first"
    assert not b[7][others][:, -1].any()
    assert [m.nonzero().flatten().tolist() for m in marked[7:9]] == [[bad], []], "info['nonfinite_state']"
    assert env.nonfinite_episodes.tolist() == [0, 0, 1, 0, 0]


def test_a_nonfinite_observation_ends_its_world_as_nonfinite_physics_does():
    """flycuda.env.nonfinite on its own: a NaN or inf in a world's qpos, qvel or observation
    marks it, terminates it, counts it, and its row goes back to its last observation, its
    reward to the task's; the other worlds are untouched."""
    from flycuda.env.nonfinite import NonFinite

    g = torch.Generator().manual_seed(3)
    W, nq, nv, O = 5, 7, 6, 9
    qpos, qvel, obs = torch.randn(W, nq, generator=g), torch.randn(W, nv, generator=g), torch.randn(W, O, generator=g)
    nf = NonFinite(W, nq, nv, obs)
    last = obs.clone()
    qvel[1, 2] = float("inf")
    nf.check(qpos, qvel, obs)
    new = torch.randn(W, O, generator=g)
    new[3, 4] = float("nan")  # world 3: its physics finite, its observation not (e.g. a controller's state)
    obs.copy_(new)
    terminated = torch.tensor([False, False, False, False, True])
    nf.observed(obs, terminated)
    rewards = torch.randn(W, generator=g)
    kept = rewards.clone()
    measures = {"distance": torch.full((W,), float("nan")), "counts": torch.ones(W, 2)}
    nf.mask(obs, rewards, measures, reward=-10.0)
    assert nf.state.tolist() == [False, True, False, True, False] and nf.episodes.tolist() == [0, 1, 0, 1, 0]
    assert terminated.tolist() == [False, True, False, True, True]
    assert torch.equal(obs[[1, 3]], last[[1, 3]]) and torch.equal(obs[[0, 2, 4]], new[[0, 2, 4]])
    assert rewards[[1, 3]].tolist() == [-10.0, -10.0] and torch.equal(rewards[[0, 2, 4]], kept[[0, 2, 4]])
    assert measures["distance"][[1, 3]].tolist() == [0.0, 0.0] and measures["distance"][0].isnan()
    assert measures["counts"].eq(1).all(), "only float [W] measures are the task's to zero"


@pytest.mark.parametrize("settle", [0.0, 0.05])
def test_new_episode_starts_from_the_initial_distribution(settle):
    env = fe.make("imitate", worlds=4, device="cpu", control_dt=DT, max_episode_steps=3, noise=0.0, settle=settle)
    obs, _ = env.reset(seed=3)
    starts = set(env.task.init_frames(env).tolist())
    for _ in range(3):
        obs, _, _, trunc, info = env.step(_ref(env, obs))
    assert trunc.all() and info["_final_obs"].all()
    assert (env.world_steps == 0).all() and (env.episodes == 2).all()
    assert set(env.offsets.tolist()) <= starts
    # a fresh episode (no noise) starts on the recording: joints = reference at step 0 (settled:
    # where the held pose came to rest on the ground, within 0.05 rad of it)
    if settle:
        assert torch.allclose(env.angles, env.reference, atol=0.05) and not torch.equal(env.angles, env.reference)
    else:
        assert torch.equal(env.angles, env.reference)


def test_seeds_reproduce():
    actions = [torch.randn(6, 42) * 0.2 for _ in range(5)]
    runs = [_run(fe.make("walk", worlds=6, device="cpu", noise=0.05, max_episode_steps=2), actions, 5)
            for _ in range(2)]
    assert all(torch.equal(x, y) for x, y in zip(*runs))
    env = fe.make("walk", worlds=6, device="cpu", noise=0.05)
    o1 = env.reset(seed=1)[0].clone()
    o2 = env.reset(seed=2)[0].clone()
    assert not torch.equal(o1, o2)
    assert torch.equal(env.reset(seed=1)[0], o1)
    assert not torch.equal(env.reset()[0], o1)  # no seed: new draws


def test_observation_columns_are_the_data_they_name():
    env = fe.make("imitate", worlds=3, device="cpu", observe=("joints", "joint_vel", "thorax_height",
                                                              "thorax_quat", "thorax_vel", "reference", "phase",
                                                              "action", "forces"))
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(torch.randn(3, 42) * 0.1)
    sim, lay = env.sim, env.layout
    qpos, qvel, ctrl, force = (sim.view(f) for f in ("qpos", "qvel", "ctrl", "actuator_force"))
    ids = lay.act_ids.long()
    want = {"joints": qpos[:, lay.qpos_adrs], "joint_vel": qvel[:, lay.dof_adrs],
            "thorax_height": qpos[:, lay.root_adr + 2:lay.root_adr + 3],
            "thorax_quat": qpos[:, lay.root_adr + 3:lay.root_adr + 7],
            "thorax_vel": qvel[:, lay.root_dof:lay.root_dof + 6], "action": ctrl[:, ids], "forces": force[:, ids]}
    for g, w in want.items():
        assert torch.equal(obs[:, env.obs_slice(g)], w), g
    assert len(env.obs_names) == obs.shape[1] and env.obs_names[0] == "joint:joint_LFCoxa"
    from flycuda.ops import motion_at
    ref = torch.empty(3, 42)
    motion_at(env.frames, env.world_steps, ref, offsets=env.offsets, frames_per_step=env.frames_per_step, mode="loop")
    assert torch.equal(obs[:, env.obs_slice("reference")], ref)
    T = env.motion.num_frames
    ph = ((env.world_steps.double() * env.frames_per_step + env.offsets) % T) / T
    assert torch.allclose(obs[:, env.obs_slice("phase")].double()[:, 0], ph, atol=1e-6)


def test_walk_reward_is_its_docstring():
    env = fe.make("walk", worlds=4, device="cpu")
    env.reset(seed=0)
    a = torch.randn(4, 42) * 0.3
    _, rew, term, _, _ = env.step(a)
    lay, q, v = env.layout, env.sim.view("qpos").double(), env.sim.view("qvel").double()
    w, x, y, z = (q[:, lay.root_adr + 3 + i] for i in range(4))
    fx, fy = 1 - 2 * (y * y + z * z), 2 * (x * y + w * z)
    vf = (v[:, lay.root_dof] * fx + v[:, lay.root_dof + 1] * fy) / torch.sqrt(fx * fx + fy * fy)
    clamped = torch.minimum(torch.maximum(a, env.action_map[2]), env.action_map[3])
    want = vf / 0.06 - 0.05 * (a.double() ** 2).mean(1) - 10 * term.double() + 0.1
    assert torch.allclose(rew.double(), want, atol=1e-4)
    assert torch.equal(env.sim.view("ctrl")[:, lay.act_ids.long()], clamped)


def test_gymnasium_vector_api():
    from gymnasium.vector import AutoresetMode, VectorEnv

    env = fe.make("walk", worlds=3, device="cpu", control_dt=5 * DT)
    assert isinstance(env, VectorEnv) and env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, info = env.reset(seed=0)
    assert obs.shape == (3,) + env.single_observation_space.shape == env.observation_space.shape
    assert env.action_space.shape == (3, 42) and env.num_envs == 3
    sample = env.action_space.sample()  # numpy, as gymnasium's tools make them
    obs, rew, term, trunc, info = env.step(sample)
    assert obs.dtype == torch.float32 and rew.shape == (3,) and term.dtype == torch.bool and trunc.dtype == torch.bool
    assert env.single_action_space.contains(np.asarray(env.sim.view("ctrl")[0, env.layout.act_ids.long()]))
    assert math.isclose(env.control_dt, 5 * DT)


@pytest.mark.parametrize("bad,match", [
    (lambda: fe.make("fly-to-the-moon"), "unknown task 'fly-to-the-moon'; the tasks are: imitate, walk"),
    (lambda: fe.make("walk", model="drosophila"), "unknown model 'drosophila'; the models are: hexapod"),
    (lambda: fe.make("walk", worlds=2, observe=("joints", "smell")), "unknown observation 'smell'"),
    (lambda: fe.make("walk", worlds=2, observe=("contacts",)), "'contacts' needs contact sensors"),
    (lambda: fe.make("walk", worlds=2, vision="exact"), "add_vision"),
    (lambda: fe.make("walk", worlds=2, vision="blurry"), "vision must be None or a spec such as 'exact', 'fast'"),
    (lambda: fe.make("walk", worlds=2, vision="fast:2@100hz"), r"a rate \(@\.\.\.\) is the replay's: drop it"),
    (lambda: fe.make("walk", worlds=2, control_dt=0.0007), "control_dt must be a whole multiple"),
    (lambda: fe.make("imitate", worlds=2, sigma=-1), "sigma must be > 0"),
    (lambda: fe.make("walk", worlds=2, flavour=3), "task 'walk' has no option 'flavour'; its options are: "),
    (lambda: fe.make("walk", worlds=2, device="cpu", graph=True), "graph=True needs a CUDA device"),
])
def test_bad_settings_say_what_is_valid(bad, match):
    with pytest.raises(EnvError, match=match):
        bad()


@pytest.mark.parametrize("actions,match", [
    (torch.zeros(3, 41), r"float32 \[3, 42\]"), (torch.zeros(3, 42, dtype=torch.int64), "float32"),
    ("left", "torch tensor"), (torch.full((3, 42), float("nan")), "non-finite"),
    (torch.full((3, 42), float("inf"), dtype=torch.float64), "non-finite"),
])
def test_bad_actions_raise_before_stepping(actions, match):
    env = fe.make("walk", worlds=3, device="cpu")
    env.reset(seed=0)
    qpos = env.sim.view("qpos").clone()
    with pytest.raises(EnvError, match=match):
        env.step(actions)
    assert torch.equal(env.sim.view("qpos"), qpos) and (env.world_steps == 0).all()


def test_float64_actions_are_cast_as_gymnasium_users_expect():
    """float64 torch tensors and numpy arrays step as their float32 casts do, bit for bit."""
    runs = []
    for kind in ("float32", "torch float64", "numpy float64"):
        env = fe.make("imitate", worlds=3, device="cpu")
        obs, _ = env.reset(seed=0)
        a = _ref(env, obs).double() + 1e-9  # (a float64 value the cast rounds)
        act = {"float32": a.float(), "torch float64": a, "numpy float64": a.numpy()}[kind]
        runs.append([t.clone() for t in env.step(act)[:2]])
    for got in runs[1:]:
        assert all(torch.equal(x, y) for x, y in zip(got, runs[0]))


@pytest.mark.needs_cuda
def test_graph_captured_step_equals_eager_on_cuda():
    """On a GPU the captured control step runs what the eager one does (MuJoCo Warp on a GPU
    is not bitwise reproducible: compared with the replay's GPU tolerance)."""
    W, n = 64, 20
    envs = [fe.make("imitate", worlds=W, device="cuda", graph=g, noise=0.0) for g in (True, False)]
    runs = []
    for env in envs:
        obs, _ = env.reset(seed=0)
        for _ in range(n):
            obs, *_ = env.step(_ref(env, obs))
        torch.cuda.synchronize()
        runs.append(env.angles.cpu().clone())
        assert (env.world_steps == n).all()
    assert envs[0].captured and not envs[1].captured
    assert torch.rad2deg((runs[0] - runs[1]).abs()).max() < 0.5


def _cli(tmp_path, *args):
    from flycuda.cli.main import main

    return main(["env", *args, "--no-progress"])


def test_cli_runs_a_policy_into_a_store_and_a_video(tmp_path, capsys):
    import xarray as xr

    store, video = tmp_path / "r.zarr", tmp_path / "r.mp4"
    assert _cli(tmp_path, "imitate", "--worlds", "3", "--policy", "reference", "--duration", "0.02",
                "--record", str(store), "--render", str(video), "--render-size", "32x24", "--render-worlds", "0,2",
                "--json", str(tmp_path / "r.json")) == 0
    out = capsys.readouterr().out
    assert "env steps/s" in out and "mean reward" in out and video.stat().st_size > 0
    assert "graph          none" not in out  # the CPU has no graphs: nothing to warn of
    assert json.loads((tmp_path / "r.json").read_text())["captured"] is False
    assert "policy         reference; vision none" in out and "frames x 2 worlds)" in out
    ds = xr.open_zarr(store)
    assert list(ds["episode"].episode_column.values) == ["terminated", "truncated", "overflow"]
    assert ds["episode"].shape == (3, 5, 3) and float(ds["episode"].max()) == 0.0  # nothing ended
    units = dict(zip(ds["obs"].attrs["columns"], ds["obs"].attrs["units"]))
    assert units["thorax:z"] == "m" and units["thorax:vx"] == "m/s" and units["joint_vel:" + ds["action"].attrs[
        "columns"][0]] == "rad/s" and ds["reward"].attrs["units"] == ["1"] and ds["action"].attrs["units"][0] == "rad"
    thorax_z = ds["obs"].sel(obs_column="thorax:z")
    assert thorax_z.shape == (3, 5) and float(ds["reward"].isel(reward_time=slice(1, None)).min()) > 0.8
    assert float(abs(ds["obs_time"][1] - 0.005)) < 1e-9


def test_cli_policy_from_a_file(tmp_path, capsys):
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "cpg.py")
    assert _cli(tmp_path, "walk", "--worlds", "2", "--policy", path, "--duration", "0.02") == 0
    assert "walk: 2 worlds" in capsys.readouterr().out


@pytest.mark.parametrize("args,match", [
    (("walk", "--policy", "reference"), "--policy reference needs the task's reference observation"),
    (("walk", "--policy", "nonsense.txt"), "--policy must be random, reference or an existing PATH.py"),
    (("walk", "--render", "x.mp4"), "--render draws the stored run: add --record"),
    (("walk", "--record", "out.npz"), "--record writes a zarr store (a folder), not a .npz file: name it OUT.zarr"),
    (("walk", "--terrain", "gapped"), "terrain='gapped' is FlyGym's world around NeuroMechFly"),
])
def test_cli_errors_speak_in_options(tmp_path, capsys, args, match):
    assert _cli(tmp_path, *args, "--worlds", "2", "--duration", "0.005") == 2
    assert match in capsys.readouterr().err


def test_ppo_example_runs_end_to_end():
    """examples/ppo.py, one iteration on the CPU (learning curves wait for a GPU)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "ppo.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_ppo", path)
    ppo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ppo)
    curve = ppo.main(["--task", "imitate", "--worlds", "4", "--iterations", "2", "--horizon", "4", "--device", "cpu"])
    assert len(curve) == 2 and all(0.0 < r <= 1.0 for r in curve)


def test_torchrl_adapter_passes_check_env_specs():
    pytest.importorskip("torchrl")
    from torchrl.envs.utils import check_env_specs

    from flycuda.env.torchrl import TorchRLEnv

    env = TorchRLEnv(fe.make("imitate", worlds=3, device="cpu", max_episode_steps=2))
    check_env_specs(env)
    td = env.rollout(5, break_when_any_done=False)
    assert td.batch_size == (3, 5) and td["next", "truncated"][:, 1].all()
    # after the truncation the next step starts from the new episode's first observation
    first = td["observation"][:, 2]
    assert torch.isfinite(first).all() and not torch.equal(first, td["next", "observation"][:, 1])


def test_reset_worlds_resets_only_the_masked():
    env = fe.make("walk", worlds=4, device="cpu")
    env.reset(seed=0)
    env.step(torch.zeros(4, 42))
    before = env.obs.clone()
    env.reset_worlds(torch.tensor([False, True, False, False]))
    assert torch.equal(env.obs[[0, 2, 3]], before[[0, 2, 3]]) and not torch.equal(env.obs[1], before[1])
    assert env.world_steps.tolist() == [1, 0, 1, 1]


@pytest.mark.needs_flygym
def test_neuromechfly_wrapped_gpu_simulation_with_eyes():
    """FlyGym's GPUSimulation wrapped (as a FlyGym user has one), NeuroMechFly imitating the
    Spotlight clip with cubic targets, both eyes' readouts among the observations: equal to
    flycuda.vision's of the same state."""
    from flycuda import flygym as fg
    from flycuda.vision import Vision

    setup = fg.Setup("neuromechfly", 2, device="cpu", vision=True)
    env = fe.make("imitate", sim=setup.sim, act_ids=setup.act_ids, motion=fg.spotlight(setup.fly),
                  model="neuromechfly", control_dt=2e-4, vision="fast:2", noise=0.0,
                  observe=fe.Imitate.observe + ("contacts", "vision"))
    assert env.frames.dtype == torch.float64 and env.model_unit == "mm"  # FlyGym's cubic resampling
    obs, _ = env.reset(seed=0)
    for _ in range(2):
        obs, rew, term, *_ = env.step(obs[:, env.obs_slice("reference")].clone())
    assert not term.any() and (rew > 0.9).all()
    names = [n for n in env.obs_names if n.startswith("vision:")]
    assert len(names) == 2 * 721 * 2 and names[0] == "vision:left:0:yellow" and names[-1] == "vision:right:720:pale"
    contacts = [n for n in env.obs_names if n.startswith("contact:")]
    assert contacts and torch.equal(obs[:, env.obs_slice("contacts")],
                                    env.sim.view("sensordata")[:, [a for _, a in env.layout.contacts]])
    env.sim.kinematics()
    want = Vision(env.sim, mode="fast", k=2).update().reshape(2, -1)
    assert torch.equal(obs[:, env.obs_slice("vision")], want)


def test_approach_places_the_pillar_and_rewards_closing_speed():
    env = fe.make("approach", worlds=5, device="cpu", jitter=0.0, noise=0.0)
    _, info = env.reset(seed=4)
    q = env.sim.view("qpos")
    ax, ay = env.task._target_adrs(env)
    lay = env.layout
    d = torch.hypot(q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1])
    assert torch.allclose(d, torch.full_like(d, 4.0 * 0.06), atol=1e-5)  # 4 body lengths of the hexapod
    assert torch.allclose(info["distance"], d / 0.06, atol=1e-4)  # the success measures, in info
    w, x, y, z = (q[:, lay.root_adr + 3 + i].double() for i in range(4))
    to = torch.atan2(q[:, ay] - q[:, lay.root_adr + 1], q[:, ax] - q[:, lay.root_adr]).double()
    rel = to - torch.atan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z))
    assert torch.allclose(torch.remainder(info["bearing"].double() - rel + math.pi, 2 * math.pi) - math.pi,
                          torch.zeros(5, dtype=torch.float64), atol=1e-5)
    b = torch.atan2(q[:, ay] - q[:, lay.root_adr + 1], q[:, ax] - q[:, lay.root_adr]).double()
    want = env.task.bearing(env.offsets.cpu())  # the state's bearing, from the frame it starts at
    assert torch.allclose(torch.remainder(b - want + math.pi, 2 * math.pi) - math.pi, torch.zeros(5, dtype=torch.float64),
                          atol=1e-5)
    _, rew, _, _, info = env.step(torch.zeros(5, 42))
    assert set(info) >= {"distance", "bearing"} and info["distance"].shape == (5,)
    q, v = env.sim.view("qpos").double(), env.sim.view("qvel").double()
    dx, dy = q[:, ax] - q[:, lay.root_adr], q[:, ay] - q[:, lay.root_adr + 1]
    closing = (v[:, lay.root_dof] * dx + v[:, lay.root_dof + 1] * dy) / torch.hypot(dx, dy) / 0.06
    assert torch.allclose(rew.double(), closing, atol=1e-4) and rew.abs().max() > 0


def test_steering_example_sides_and_sign():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "steer.py")
    spec = importlib.util.spec_from_file_location("flycuda_example_steer", path)
    steer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steer)
    sides = steer.leg_sides(["c_thorax-lf_coxa-yaw", "lh_tibia-lh_tarsus1-pitch", "c_thorax-rm_coxa-roll",
                             "joint_LFCoxa", "joint_RHTibia", "nmf/rf_coxa-rf_trochanterfemur-pitch", "thorax"])
    assert sides.tolist() == [1, 1, -1, 1, -1, -1, 0]


@pytest.mark.needs_flygym
def test_cli_approach_with_the_steering_example(tmp_path, capsys):
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "steer.py")
    assert _cli(tmp_path, "approach", "--policy", path, "--worlds", "2", "--duration", "0.04",
                "--record", str(tmp_path / "a.zarr"), "--render", str(tmp_path / "a.mp4")) == 0  # NMF, eyes by default
    assert "approach: 2 worlds of neuromechfly" in capsys.readouterr().out
    import zarr

    group = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert group["vision"].attrs["sample_shape"] == [2, 721, 2]  # what the video draws the eyes from
    assert (tmp_path / "a.mp4").stat().st_size > 0


@pytest.mark.parametrize("task,observe", [("imitate", None), ("walk", None), ("approach", None), ("follow", None),
                                          ("odor_taxis", None),
                                          ("odor_obstacles", None),
                                          ("imitate", tuple(g for g in fe.GROUPS if g not in
                                                            ("vision", "contacts", "drive", "cpg", "corrections",
                                                             "odor", "connectome")))])
def test_the_control_step_allocates_nothing(task, observe):
    """What the CUDA graph capture refuses, checked on the CPU: no torch op of a control step (the
    actions, observations, reward, done mask, resets) returns new memory (the capture's own
    allocation guard, flycuda.sim.streams.allocation_guard, run around the step)."""
    from flycuda.sim.streams import allocation_guard

    env = fe.make(task, worlds=3, device="cpu", max_episode_steps=2, observe=observe)
    env.reset(seed=0)
    env.actions.copy_(torch.randn(3, 42) * 0.1)
    for _ in range(3):  # a reset inside the second step
        with allocation_guard(env.device, "a control step"):
            env._advance()
    assert env.episodes.min() >= 2


def test_actions_with_autograd_history_are_taken_as_values():
    env = fe.make("walk", worlds=2, device="cpu")
    env.reset(seed=0)
    w = torch.zeros(2, 42, requires_grad=True)
    for _ in range(2):
        env.step(w * 1.0)  # a policy's output, part of its graph
    assert not env.actions.requires_grad and env.actions.grad_fn is None


def test_a_failed_capture_returns_the_step_and_goes_on_eagerly(monkeypatch):
    """The capture follows the first (eager) step: when it fails, that step's results are
    returned (a caller's retry must not step twice), a warning says so once, and later steps
    run eagerly without capturing again."""
    env = fe.make("walk", worlds=2, device="cpu")
    twin = fe.make("walk", worlds=2, device="cpu")
    for e in (env, twin):
        e.reset(seed=3)
    calls = []

    def failing_capture():
        calls.append(1)
        raise RuntimeError("operation not permitted when stream is capturing")

    env._use_graph = True  # as on CUDA
    monkeypatch.setattr(env, "_capture", failing_capture)
    actions = torch.randn(2, 42) * 0.1
    with pytest.warns(RuntimeWarning, match="capture of the control step failed.*later steps run eagerly"):
        obs, rew, *_ = env.step(actions)
    want, want_rew, *_ = twin.step(actions)
    assert torch.equal(obs, want) and torch.equal(rew, want_rew) and int(env.world_steps[0]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.step(actions)
    assert calls == [1] and int(env.world_steps[0]) == 2


@pytest.mark.needs_flygym
def test_eyes_after_a_partial_reset_equal_a_full_render():
    """After a step in which one world ended, the eyes redraw only the reset world (the
    others have not moved since the step's own render): the observation equals a full
    render of every world's state."""
    from flycuda import flygym as fg
    from flycuda.vision import Vision

    setup = fg.Setup("neuromechfly", 3, device="cpu", vision=True)
    env = fe.make("imitate", sim=setup.sim, act_ids=setup.act_ids, motion=fg.spotlight(setup.fly),
                  model="neuromechfly", control_dt=2e-4, vision="fast:2", observe=("joints", "vision"))
    obs, _ = env.reset(seed=1)
    calls = []
    update = env.vision.update
    env.vision.update = lambda only=None: calls.append(None if only is None else only.tolist()) or update(only)
    env.sim.view("overflow")[1] = 1  # world 1 ends in this step (as a MuJoCo Warp overflow would end it)
    obs, _, term, trunc, _ = env.step(torch.zeros(3, 42))
    assert (term | trunc).tolist() == [False, True, False] and calls == [None, [False, True, False]]
    env.sim.kinematics()
    want = Vision(env.sim, mode="fast", k=2).update().reshape(3, -1)
    assert torch.equal(obs[:, env.obs_slice("vision")], want)


def test_walk_energy_reads_the_applied_targets_and_nonfinite_actions_end_their_world():
    """The energy term costs the targets the step applied (clamped to the ranges): an action of
    1e6 costs what the range's end costs. With check_actions=False a non-finite action is applied
    as the range's low end and ends its world (info["nonfinite_action"]); the reward stays finite."""
    env = fe.make("walk", worlds=3, device="cpu", check_actions=False, c_fall=0.0)
    twin = fe.make("walk", worlds=3, device="cpu", check_actions=False, c_fall=0.0)
    lo, hi = (x.clone() for x in env.layout.ctrl_range)
    for e in (env, twin):
        e.reset(seed=2)
    huge = torch.zeros(3, 42)
    huge[0] = 1e6
    huge[1, 5] = float("nan")
    huge[2, 7] = float("-inf")
    at_ends = huge.clone()
    at_ends[0] = hi
    at_ends[1, 5] = lo[5]
    at_ends[2, 7] = lo[7]
    _, rew, term, _, info = env.step(huge)
    _, want, *_ = twin.step(at_ends)
    assert torch.isfinite(rew).all() and rew.abs().max() < 10
    assert torch.equal(rew, want)
    assert info["nonfinite_action"].tolist() == [False, True, True] and term.tolist() == [False, True, True]
    terms = info["reward/forward"] + info["reward/energy"] + info["reward/fall"] + env.task.alive  # logged terms
    assert torch.allclose(terms, rew, atol=1e-6) and (info["reward/energy"] < 0).all()


def test_observe_takes_one_group_by_name_and_task_options_are_named():
    env = fe.make("walk", worlds=2, device="cpu", observe="joints")
    assert env.obs.shape == (2, 42) and env.observes("joints")
    with pytest.raises(EnvError, match=r"task 'walk' has no option 'nosie'; its options are: .*noise"):
        fe.make("walk", worlds=2, device="cpu", nosie=0.1)


def test_gymnasium_make_vec_and_copies_on_request():
    """gymnasium.make_vec("flycuda/<task>-v0", num_envs=N) builds a FlyVecEnv; by default a step
    returns the environment's own buffers (refilled by the next step), copies with copy=True."""
    import gymnasium

    env = gymnasium.make_vec("flycuda/walk-v0", num_envs=3, device="cpu", max_episode_steps=7)
    assert isinstance(env.unwrapped, fe.FlyVecEnv) and env.num_envs == 3 and env.unwrapped.max_episode_steps == 7
    for task in fe.TASKS:
        assert f"flycuda/{task}-v0" in gymnasium.registry
    a = torch.zeros(3, 42)
    obs0, _ = env.reset(seed=0)
    obs1, *_ = env.step(a)
    assert obs1 is obs0  # the same buffer, refilled
    copying = fe.make("walk", worlds=3, device="cpu", copy=True)
    c0, _ = copying.reset(seed=0)
    c1, r1, *_, info = copying.step(a)
    c2, r2, *_ = copying.step(a)
    assert c1 is not c2 and r1 is not r2 and info["overflow"] is not copying.overflow
    assert not torch.equal(c0, c1) and torch.equal(c1, obs1)  # the same values as the buffers'


@pytest.mark.parametrize("example", ["cpg.py", "steer.py", "ppo.py", "follow.py"])
def test_every_example_says_how_to_run_it(example):
    import os
    import subprocess
    import sys

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", example)
    out = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("usage:"), out.stderr[-500:]


def test_the_cpg_example_checks_the_dof_names():
    """A rhythm whose DOFs are not the env's driven DOFs, in order, is refused in one line."""
    import dataclasses
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "cpg.py")
    spec = importlib.util.spec_from_file_location("cpg_example", path)
    cpg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cpg)
    env = fe.make("walk", worlds=2, device="cpu")
    env.reset(seed=0)
    policy = cpg.make_policy(env)
    assert policy(env.obs).shape == (2, 42)
    names = list(env.motion.dof_names)
    env.motion = dataclasses.replace(env.motion, dof_names=tuple(names[1:] + names[:1]))
    with pytest.raises(ValueError, match="the rhythm's DOFs .* are not the environment's driven DOFs"):
        cpg.make_policy(env)



@pytest.mark.parametrize("model", ["hexapod", pytest.param("neuromechfly", marks=pytest.mark.needs_flygym)])
def test_the_action_space_is_bounded(model):
    """The actuators' ranges where they have them (the hexapod), else their joints' (NeuroMechFly's
    position actuators have no ctrl range): gymnasium's RescaleAction and sample() need bounds."""
    env = fe.make("walk", worlds=2, model=model, device="cpu")
    lo, hi = env.single_action_space.low, env.single_action_space.high
    assert np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()
    ctrl = env.layout.ctrl_range.cpu().numpy()
    finite = np.isfinite(ctrl[0])
    assert np.array_equal(lo[finite], ctrl[0][finite]) and np.array_equal(hi[finite], ctrl[1][finite])
    mjm = env.sim.mjm
    for a, (l, h) in enumerate(zip(lo, hi)):
        if not finite[a]:
            j = int(mjm.actuator_trnid[int(env.layout.act_ids[a]), 0])
            assert (l, h) == tuple(np.float32(mjm.jnt_range[j])) if mjm.jnt_limited[j] else (l, h) == (
                np.float32(-math.pi), np.float32(math.pi))


def test_a_tasks_objects_are_recorded_and_drawn_again(tmp_path, capsys):
    """approach's pillar: its qpos is recorded with the fly's and its body with the facts, so
    that `flycuda render` (and --render) rebuilds the model with it (nq must fit the stored qpos)."""
    from flycuda.recording import Recording
    from flycuda.replay.playback import render_recording

    video, store2 = tmp_path / "a.mp4", tmp_path / "b.zarr"
    assert _cli(tmp_path, "approach", "--model", "hexapod", "--worlds", "2", "--duration", "0.01",
                "--record", str(store2), "--render", str(video), "--render-size", "32x24") == 0
    rec = Recording.open(str(store2))
    assert rec.info["task"] == "approach" and rec.info["bodies"][0]["name"] == "pillar"
    assert any("pillar" in c for c in rec.columns("qpos")) and video.stat().st_size > 0
    frames = []
    res = render_recording(str(store2), None, size=(32, 24), progress=False, frame_callback=frames.append)
    assert res.frames == len(frames) > 0



@pytest.mark.parametrize("spec", ["exact", "fast", "fast:3", "FAST:2"])
def test_env_and_replay_share_the_vision_grammar(spec):
    """One grammar (flycuda.vision.spec) for both: every mode string the replay takes passes the
    env's check (the hexapod then has no eyes: the next check speaks)."""
    from flycuda.vision import spec as vspec
    from flycuda.vision import stage as vision_stage

    assert vision_stage.parse_vision is vspec.parse_vision
    vspec.parse_vision(spec)
    with pytest.raises(EnvError, match="add_vision"):
        fe.make("walk", worlds=2, vision=spec)
