"""Helpers shared by the op tests."""

import pytest
import torch


def cpu_and_cuda():
    """Device parameters: "cpu" always, "cuda" marked needs_cuda (skipped without GPU)."""
    return ("cpu", pytest.param("cuda", marks=pytest.mark.needs_cuda))


def poison_like(t: torch.Tensor) -> torch.Tensor:
    """Random values far from any motion value, so that a stale entry shows up."""
    return torch.randn(t.shape, dtype=t.dtype) * 100.0 + 7777.0


def synthetic_retina(height: int, width: int, n_omm: int, seed: int = 0):
    """A small retina without FlyGym: (id_map int16 [H, W], pale int8 [O]) with the
    ommatidia as the Voronoi cells of jittered points inside an ellipse (0 outside
    it), as FlyGym's hex lattice is; every id 1..O present."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[0:height, 0:width]
    inside = ((rows - (height - 1) / 2) / (0.48 * height)) ** 2 + ((cols - (width - 1) / 2) / (0.48 * width)) ** 2 <= 1
    cand = np.flatnonzero(inside.ravel())
    seeds = rng.choice(cand, size=n_omm, replace=False)
    pts = np.stack([seeds // width, seeds % width], axis=1).astype(float) + rng.uniform(-0.3, 0.3, (n_omm, 2))
    d = (rows.ravel()[:, None] - pts[None, :, 0]) ** 2 + (cols.ravel()[:, None] - pts[None, :, 1]) ** 2
    ids = np.where(inside.ravel(), np.argmin(d, axis=1) + 1, 0).astype(np.int16)
    pale = (rng.random(n_omm) < 0.3).astype(np.int8)
    return ids.reshape(height, width), pale


def smooth_image(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """A smooth uint8 RGB test image [H, W, 3]: a few low-frequency waves per channel
    (a stand-in for a rendered scene's shading, without its edges)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.linspace(0, 1, height, dtype=torch.float64)[:, None]
    x = torch.linspace(0, 1, width, dtype=torch.float64)[None, :]
    chans = []
    for _ in range(3):
        f = torch.rand(4, 4, generator=g, dtype=torch.float64)
        v = 0.5 + 0.2 * torch.sin(2 * torch.pi * (f[0, 0] * 2 * y + f[0, 1] * 2 * x + f[0, 2]))
        v = v + 0.15 * torch.cos(2 * torch.pi * (f[1, 0] * 3 * y - f[1, 1] * 3 * x + f[1, 2])) + 0.1 * (x - y)
        chans.append(v)
    return (torch.stack(chans, dim=-1).clamp(0, 1) * 255).round().to(torch.uint8)


def flygym_pool(image, id_map, pale, lookup):
    """FlyGym's Retina._pool_fisheye_image, line by line in Python (float64, raster
    order), without numba or FlyGym: float64 [O, 2]."""
    import numpy as np

    ids = np.asarray(id_map).ravel()
    O = len(pale)
    sizes = np.unique(ids, return_counts=True)[1][1:]
    vals = np.zeros((O, 2))
    flat = np.asarray(image).reshape(-1, 3)
    for i in range(ids.size):
        o, src = int(ids[i]) - 1, int(lookup[i])
        if o != -1 and src != -1:
            ch = int(pale[o])
            vals[o, ch] += float(flat[src, ch + 1]) / float(sizes[o])
    return vals / 255


def strided_view(rows: int, cols: int, kind: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A [rows, cols] float32 view of a poisoned parent buffer, and that parent.

    kind: "contiguous", "row_stride" (a column slice of a wider buffer, as a
    view of MuJoCo Warp's ctrl with extra actuators) or "transposed".
    """
    if kind == "contiguous":
        parent = poison_like(torch.empty(rows, cols)).to(device)
        return parent, parent
    if kind == "row_stride":
        parent = poison_like(torch.empty(rows, cols + 5)).to(device)
        return parent[:, 2:2 + cols], parent
    if kind == "transposed":
        parent = poison_like(torch.empty(cols, rows)).to(device)
        return parent.t(), parent
    raise ValueError(kind)


# --- render_tiles: scenes and image comparison, shared by the renderer's tests ------
# (test_render_tiles.py, test_render_top.py, test_emu.py: tests import helpers from here,
# never from one another).

def _prims_sim(worlds=2):
    """flycuda.sim.hexapod.primitives_xml on CPU: world 0 at rest, every other world with
    its own random body orientations (seeded)."""
    from flycuda.sim import Sim
    from flycuda.sim.hexapod import primitives_xml

    sim = Sim.build(primitives_xml(), worlds, device="cpu")
    q = sim.view("qpos")
    g = torch.Generator().manual_seed(3)
    for w in range(1, worlds):  # every world but 0 gets its own orientations
        for b in range(6):
            quat = torch.randn(4, generator=g)
            q[w, 7 * b + 3:7 * b + 7] = quat / quat.norm()
    sim.forward()
    return sim


def _fly_sim(worlds=3, steps=30, model=None):
    """The built-in hexapod (or ``model``) after ``steps`` steps under spread controls."""
    from flycuda.sim import Sim

    sim = Sim.build(model, worlds, device="cpu")
    ctrl = sim.view("ctrl")
    ctrl.copy_(torch.linspace(-0.3, 0.3, ctrl.numel()).view_as(ctrl))
    for _ in range(steps):
        sim.step()
    return sim


def _edges(seg):
    """Silhouette-edge pixels of seg [..., H, Wd] (a label differing from a 4-neighbour's)."""
    e = torch.zeros_like(seg, dtype=torch.bool)
    e[..., 1:, :] |= seg[..., 1:, :] != seg[..., :-1, :]
    e[..., :-1, :] |= seg[..., :-1, :] != seg[..., 1:, :]
    e[..., 1:] |= seg[..., 1:] != seg[..., :-1]
    e[..., :-1] |= seg[..., :-1] != seg[..., 1:]
    return e


def assert_images_close(rgb, depth, seg, ref_rgb, ref_depth, ref_seg):
    """The op's images against the float64 reference's, with the op tests' bounds
    (test_render_tiles.py's docstring): segmentation equal but on silhouette edges
    (at most 1% of pixels), depth within 1e-4 relative, rgb within 2 levels."""
    edges = _edges(ref_seg)
    bad = seg.cpu() != ref_seg
    assert not (bad & ~edges).any(), "segmentation differs away from silhouette edges"
    assert bad.float().mean() <= 0.01
    same = ~bad
    rel = (depth.cpu() - ref_depth).abs() / ref_depth.abs().clamp(min=1e-12)
    assert rel[same & (ref_seg >= 0)].max() <= 1e-4
    assert torch.equal(depth.cpu()[same & (ref_seg < 0)], torch.zeros_like(ref_depth[same & (ref_seg < 0)]))
    diff = (rgb.cpu().int() - ref_rgb.int()).abs().amax(-1)
    assert diff[same & ~edges].max() <= 2


def _op_args(tr, **over):
    """The pose and camera arguments of render_tiles for TileRenderer ``tr`` (``over`` replaces some)."""
    a = dict(geom_xpos=tr.geom_xpos, geom_xmat=tr.geom_xmat, cam_pos=tr.cam_pos, cam_mat=tr.cam_mat,
             worlds=tr.worlds)
    a.update(over)
    return a


def _render(sim, cam, W, H, device="cpu", **kw):
    """A TileRenderer (rgb, depth, seg) of ``sim`` on ``device``, outputs poisoned, rendered once."""
    from flycuda.render import TileRenderer

    tr = TileRenderer(sim, cam, W, H, rgb=True, depth=True, seg=True, **kw)
    if device != "cpu":  # same poses, moved to the GPU
        for name in ("geom_xpos", "geom_xmat", "cam_pos", "cam_mat", "worlds"):
            setattr(tr, name, getattr(tr, name).to(device))
        tr.scene = tr.scene.to(device)
        tr.rgb, tr.depth, tr.seg = (t.to(device) if t is not None else None for t in (tr.rgb, tr.depth, tr.seg))
        tr.top_boxes = tr.top_boxes.to(device)
        tr.timers = tr.timers.to(device) if tr.timers is not None else None
    tr.rgb.fill_(123), tr.depth.fill_(-7.0), tr.seg.fill_(-99)  # poison
    tr.render()
    return tr


def corrupt_scenes(scene):
    """Scenes the host check refuses, for unchecked runs (check=False): (name, scene).
    test_emu.py runs them on the emulated grid, test_render_packets.py through both CPU walks."""
    from dataclasses import replace

    from flycuda.render.scene import make_leaf

    top = scene.top_links.clone()
    inner = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] >= 0]
    leaves = [(j, i) for j in range(len(top)) for i in range(2) if top[j, i] < 0]
    top[inner[-1]] = 999                   # a link out of the tree
    top[inner[0]] = 0                      # a link back (to the root itself)
    top[leaves[0]] = make_leaf(99, 1)      # a leaf of a geom that does not exist
    top[leaves[1]] = make_leaf(int(top[leaves[1]].bitwise_not()) >> 3, 2)  # a leaf of two geoms
    unb = torch.cat([scene.unbounded, torch.tensor([-3, 50], dtype=torch.int32)])  # out-of-range entries
    links = scene.bvh_links.clone()
    N, T = len(links), scene.tris.shape[0]
    mesh_inner = [(j, i) for j in range(N) for i in range(2) if links[j, i] >= 0]
    mesh_leaves = [(j, i) for j in range(N) for i in range(2) if links[j, i] < 0]
    for j, i in mesh_inner[1::7]:
        links[j, i] = j if i == 0 else N + 100  # links back (a cycle) and past the end
    for j, i in mesh_leaves[::5]:
        links[j, i] = make_leaf(T - 2, 7)      # triangles past the end
    info = scene.geom_info.clone()
    mesh = int(torch.nonzero(info[:, 0] == 7)[0, 0])
    info[mesh, 1] = N + 3                      # a mesh whose root is past the nodes
    # A top level deeper than the stack: a chain of 45 nodes, each with the next node and a
    # leaf of the mesh (both boxes alike: the leaf is pushed), the last with two mesh
    # leaves. The pushes past kStack are dropped, and so is a mesh entry when the marker
    # would not fit; the rays stay in bounds.
    chain = [[j + 1, make_leaf(mesh, 1)] for j in range(44)] + [[make_leaf(mesh, 1)] * 2]
    deep = torch.tensor(chain, dtype=torch.int32)
    # The same past the kernels' shared-memory limits: 1,100 nodes, more than the refit
    # holds in shared memory (256: its global-memory path) and than a block culls (1024).
    long_chain = [[j + 1, make_leaf(mesh, 1)] for j in range(1099)] + [[make_leaf(mesh, 1)] * 2]
    longer = torch.tensor(long_chain, dtype=torch.int32)
    return [("top", replace(scene, top_links=top, unbounded=unb)), ("mesh-links", replace(scene, bvh_links=links)),
            ("top-deeper-than-the-stack", replace(scene, top_links=deep)),
            ("top-past-the-shared-limits", replace(scene, top_links=longer)),
            ("mesh-root", replace(scene, geom_info=info)),
            ("mesh-root-negative", replace(scene, geom_info=info.index_put((torch.tensor(mesh), torch.tensor(1)),
                                                                           torch.tensor(-5, dtype=torch.int32))))]


# --- motion_to_ctrl: the op tests' shapes and inputs (test_motion_to_ctrl.py, test_emu.py) ---

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
MJW_HFIELD_XML = """
<mujoco>
  <asset>
    <hfield name="terrain" nrow="3" ncol="3" size="1 1 0.1 0.3" elevation="0 0 0  0 1 0  0 0 0"/>
  </asset>
  <worldbody>
    <geom type="plane" size="2 2 0.1" pos="0 0 -0.3" rgba="0.8 0.8 0.8 1"/>
    <geom type="hfield" hfield="terrain" pos="0 0 0" rgba="0.4 0.6 0.4 1"/>
    <body pos="0 0.1 0.3">
      <freejoint/>
      <geom type="sphere" size="0.1 0.1 0.1" rgba="0.8 0.2 0.2 1"/>
    </body>
  </worldbody>
</mujoco>
"""


# --- vision without FlyGym: the hexapod with two eye cameras, and a small retina ------

def eyed_fly_xml() -> str:
    """The built-in hexapod with FlyGym's eye camera names (looking left and right,
    fovy 157 as FlyGym's), so flycuda.vision.eyes runs without FlyGym."""
    from flycuda.sim.hexapod import fly_model_xml

    track = '<camera name="track"'
    eyes = ('<camera name="l_eye_cam_camera" pos="0.04 0.008 0.008" xyaxes="1 0 0 0 0.3 1" fovy="157"/>\n'
            '      <camera name="r_eye_cam_camera" pos="0.04 -0.008 0.008" xyaxes="-1 0 0 0 -0.3 1" fovy="157"/>\n'
            '      ')
    xml = fly_model_xml()
    return xml.replace(track, eyes + track, 1)


def small_retina(height=37, width=30, cell=3, seed=5):
    """A RetinaMap of odd size: cell x cell ommatidia on a grid (a border of pixels
    outside the lattice), random pale/yellow types, FlyGym's fisheye constants."""
    import numpy as np

    from flycuda.vision import RetinaMap

    rows, cols = (height - 2) // cell, (width - 2) // cell
    id_map = np.zeros((height, width), np.int64)
    for r in range(rows):
        for c in range(cols):
            id_map[1 + r * cell:1 + (r + 1) * cell, 1 + c * cell:1 + (c + 1) * cell] = r * cols + c + 1
    pale = np.random.default_rng(seed).integers(0, 2, rows * cols)
    return RetinaMap.from_arrays(id_map, pale)


def nmf_with_eyes(worlds=2):
    """NeuroMechFly with FlyGym's eye cameras on Warp's CPU device, its worlds in
    different poses (spread controls, every other world's flipped at each of 4 steps):
    (sim, fly, world). FlyGym lane."""
    from flycuda import flygym as fg

    fly, world, _ = fg.neuromechfly(vision=True)
    sim = fg.wrap(fg.gpu_simulation(world, worlds, device="cpu"))
    ctrl = sim.view("ctrl")
    ctrl.copy_(torch.linspace(-0.2, 0.2, ctrl.numel()).view_as(ctrl))
    for _ in range(4):
        sim.step()
        ctrl[1::2] *= -1
    return sim, fly, world


# --- the episode ops: random inputs shared by tests/test_episode_ops.py and test_emu.py ------

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
