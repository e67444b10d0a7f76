"""flycuda.render.hfield: heightfield triangles as MuJoCo Warp renders them, and the warning for undrawn geoms."""

import warnings

import mujoco
import numpy as np
import pytest
from helpers.worlds import MJW_HFIELD_XML

from flycuda.render.hfield import HFIELD, hfield_triangles, undrawn_geoms, warn_undrawn

# every type but hfield and sdf, as the renderer draws today
SUPPORTED = {int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_SPHERE), int(mujoco.mjtGeom.mjGEOM_CAPSULE),
             int(mujoco.mjtGeom.mjGEOM_ELLIPSOID), int(mujoco.mjtGeom.mjGEOM_CYLINDER),
             int(mujoco.mjtGeom.mjGEOM_BOX), int(mujoco.mjtGeom.mjGEOM_MESH)}


def hfield_model(elevation: np.ndarray, size="1.3 0.7 0.4 0.15", frame='pos="0.3 -0.2 0.1" euler="10 -20 30"'):
    """A model with one heightfield geom named "terrain" (and a box named "rock") from an elevation grid."""
    nrow, ncol = elevation.shape
    return mujoco.MjModel.from_xml_string(f"""
    <mujoco>
      <asset><hfield name="h" nrow="{nrow}" ncol="{ncol}" size="{size}"
                     elevation="{' '.join(repr(float(v)) for v in elevation.ravel())}"/></asset>
      <worldbody>
        <geom name="rock" type="box" size="0.1 0.1 0.1" pos="0 0 2"/>
        <geom name="terrain" type="hfield" hfield="h" {frame}/>
      </worldbody>
    </mujoco>""")


def odd_terrain() -> np.ndarray:
    """7 x 11 elevation: random bumps, a flat plateau and a tilted plane (merged by MuJoCo Warp), on [0, 1]."""
    rng = np.random.default_rng(7)
    z = rng.integers(0, 9, (7, 11)) / 8.0  # exact in float32, so coplanar cells are exactly coplanar
    z[:3, :5] = 0.5                          # plateau
    r, c = np.mgrid[3:7, 6:11]
    z[3:, 6:] = (r - 3) / 8.0 + (c - 6) / 16.0  # tilted plane
    z[0, 0], z[6, 10] = 0.0, 1.0             # MuJoCo normalizes elevation to [0, 1]: keep it as is
    return z


def geom_id(mjm, name=None):
    return int(np.nonzero(mjm.geom_type == HFIELD)[0][0]) if name is None else mjm.geom(name).id


def nearest_hit(orig, dirs, tris):
    """float64 Moller-Trumbore, two-sided: (distance or inf, [R]) of each ray to the nearest of tris [T, 9]."""
    v0, e1, e2 = tris[:, 0:3], tris[:, 3:6] - tris[:, 0:3], tris[:, 6:9] - tris[:, 0:3]
    p = np.cross(dirs[:, None], e2[None])
    det = np.einsum("tk,rtk->rt", e1, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        s = orig[:, None] - v0[None]
        u = np.einsum("rtk,rtk->rt", s, p) * inv
        q = np.cross(s, e1[None])
        v = np.einsum("rk,rtk->rt", dirs, q) * inv
        t = np.einsum("tk,rtk->rt", e2, q) * inv
    hit = (det != 0) & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
    return np.where(hit, t, np.inf).min(axis=1)


def edge_distance(points, tris):
    """Distance of each point [R, 3] (rows of inf allowed) to the nearest edge of tris [T, 9]."""
    a = tris.reshape(-1, 3, 3)
    a, b = a.reshape(-1, 3), np.roll(a, -1, axis=1).reshape(-1, 3)
    ab = b - a
    pa = points[:, None] - a[None]
    f = np.clip(np.einsum("rek,ek->re", pa, ab) / np.einsum("ek,ek->e", ab, ab), 0.0, 1.0)
    return np.linalg.norm(pa - f[..., None] * ab, axis=-1).min(axis=1)


def all_cell_triangles(mjm, g):
    """Every cell's two triangles (MuJoCo's own grid, before MuJoCo Warp merges coplanar cells), local frame."""
    h = mjm.geom_dataid[g]
    nr, nc, (sx, sy, sz, _) = mjm.hfield_nrow[h], mjm.hfield_ncol[h], mjm.hfield_size[h]
    z = mjm.hfield_data[mjm.hfield_adr[h]:mjm.hfield_adr[h] + nr * nc].reshape(nr, nc) * sz
    y, x = np.meshgrid(np.linspace(-sy, sy, nr), np.linspace(-sx, sx, nc), indexing="ij")
    v = np.stack([x, y, z], -1)
    a, b, c, d = v[:-1, :-1], v[:-1, 1:], v[1:, 1:], v[1:, :-1]
    return np.concatenate([np.concatenate([a, b, c], -1), np.concatenate([a, c, d], -1)]).reshape(-1, 9)


def random_rays(rng, size, n=2000):
    """Local-frame rays at the hfield's box: from above, grazing, from the side and from below."""
    sx, sy, top, bot = size
    n_above, n_graze, n_side = int(0.4 * n), int(0.3 * n), int(0.2 * n)
    n_below = n - n_above - n_graze - n_side
    target = np.column_stack([rng.uniform(-1.05 * sx, 1.05 * sx, n), rng.uniform(-1.05 * sy, 1.05 * sy, n),
                              rng.uniform(-bot, top, n)])
    target[:n_above + n_graze, 2] = rng.uniform(0, top, n_above + n_graze)
    above = np.column_stack([rng.uniform(-1.3 * sx, 1.3 * sx, n_above), rng.uniform(-1.3 * sy, 1.3 * sy, n_above),
                             top + rng.uniform(0.1, 2.0, n_above)])
    phi, elev = rng.uniform(0, 2 * np.pi, n_graze), rng.uniform(0.02, 0.15, n_graze)
    graze_dir = np.column_stack([np.cos(elev) * np.cos(phi), np.cos(elev) * np.sin(phi), -np.sin(elev)])
    graze = target[n_above:n_above + n_graze] - 3.0 * max(sx, sy) * graze_dir
    side = np.column_stack([rng.choice([-1, 1], n_side) * (sx + rng.uniform(0.05, 1.0, n_side)),
                            rng.uniform(-1.2 * sy, 1.2 * sy, n_side), rng.uniform(-bot - 0.1, top + 0.1, n_side)])
    side[::2, :2] = side[::2, 1::-1] * [sx / sy, sy / sx]  # half of them across y instead of x
    below = np.column_stack([rng.uniform(-sx, sx, n_below), rng.uniform(-sy, sy, n_below),
                             -bot - rng.uniform(0.1, 1.0, n_below)])
    orig = np.concatenate([above, graze, side, below])
    dirs = target - orig
    return orig, dirs / np.linalg.norm(dirs, axis=1, keepdims=True)


@pytest.mark.parametrize("which", ["mjw_test_model", "odd_7x11"])
def test_rays_match_mj_ray_on_the_top_surface(which):
    mjm = mujoco.MjModel.from_xml_string(MJW_HFIELD_XML) if which == "mjw_test_model" else hfield_model(odd_terrain())
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    g = geom_id(mjm)
    size = mjm.hfield_size[mjm.geom_dataid[g]]
    pos, mat = mjd.geom_xpos[g].copy(), mjd.geom_xmat[g].reshape(3, 3).copy()

    local = hfield_triangles(mjm, g).astype(np.float64)
    world = (local.reshape(-1, 3, 3) @ mat.T + pos).reshape(-1, 9)
    lorig, ldirs = random_rays(np.random.default_rng(0), size)
    orig, dirs = lorig @ mat.T + pos, ldirs @ mat.T
    ours = nearest_hit(orig, dirs, world)
    ref = np.array([mujoco.mj_rayHfield(mjm, mjd, g, o, d) for o, d in zip(orig, dirs)])
    ref = np.where(ref < 0, np.inf, ref)

    # MuJoCo also hits the sides and the base box down to -z_bottom, which MuJoCo Warp does not draw
    def local_hit(t):
        return lorig + np.where(np.isfinite(t), t, 0.0)[:, None] * ldirs

    p, eps = local_hit(ref), 1e-9 * max(size)
    wall = np.isfinite(ref) & ((np.abs(p[:, 0]) >= size[0] - eps) | (np.abs(p[:, 1]) >= size[1] - eps)
                               | (p[:, 2] <= -size[3] + eps))
    # rays within 1e-6 of an edge (of MuJoCo Warp's triangles or of MuJoCo's cells) may slip through either
    edges = np.concatenate([local, all_cell_triangles(mjm, g)])
    near = np.full(len(ref), np.inf)
    for t in (ours, ref):
        near = np.minimum(near, np.where(np.isfinite(t), edge_distance(local_hit(t), edges), np.inf))
    near = near < 1e-6

    top = ~wall & ~near
    finite = np.isfinite(ref)
    err = np.zeros(len(ref))
    err[finite] = np.abs(ours[finite] - ref[finite]) / ref[finite]
    same = (np.isinf(ours) == ~finite) & (err <= 1e-5)
    print(f"\n{which}: {len(local)} triangles, {len(ref)} rays: {np.isfinite(ref[top]).sum()} top hits and "
          f"{np.isinf(ref[top]).sum()} misses agree {same[top].mean():.2%} (max rel. error {err[top].max():.1e}); {wall.sum()} hit MuJoCo's "
          f"sides/base (not drawn by MuJoCo Warp), {near.sum()} within 1e-6 of an edge")
    assert same[top].all(), np.nonzero(top & ~same)[0][:10]
    assert np.isfinite(ref[top]).sum() > 0.3 * len(ref) and wall.sum() > 0.05 * len(ref)
    # behind a side or the base, the drawn surface is never nearer than MuJoCo's hit
    assert (ours[wall] >= ref[wall] * (1 - 1e-5)).all()


def up_normals_and_area(tris):
    v = tris.astype(np.float64).reshape(-1, 3, 3)
    n = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    return n[:, 2], 0.5 * n[:, 2].sum()


def test_triangles_face_up_and_tile_the_grid():
    mjm = hfield_model(odd_terrain())
    g = geom_id(mjm)
    tris = hfield_triangles(mjm, g)
    sx, sy = mjm.hfield_size[0, :2]
    nz, area = up_normals_and_area(tris)
    assert tris.dtype == np.float32 and tris.shape[1] == 9 and tris.flags.c_contiguous
    assert (nz > 0).all() and area == pytest.approx(4 * sx * sy, rel=1e-6)
    assert len(tris) < 2 * 6 * 10  # the plateau and the tilted plane are merged
    assert np.abs(tris.reshape(-1, 3)[:, :2]).max(axis=0) == pytest.approx([sx, sy], rel=1e-6)


def test_2x2_grid_is_two_triangles_on_the_corners():
    mjm = hfield_model(np.array([[0.0, 0.25], [1.0, 0.5]]), size="2 1 0.5 0.1", frame="")
    tris = hfield_triangles(mjm, geom_id(mjm)).reshape(-1, 3, 3)
    z = mjm.hfield_data.reshape(2, 2) * np.float32(0.5)  # MuJoCo stores the XML's last row first (y = -size)
    assert z[0, 0] == 0.5
    # vertex (r, c) at (x_c, y_r, data[r, c] * size[2]), split along the (0, 0)-(1, 1) diagonal
    v00, v01, v10, v11 = [-2, -1, z[0, 0]], [2, -1, z[0, 1]], [-2, 1, z[1, 0]], [2, 1, z[1, 1]]
    np.testing.assert_array_equal(tris, np.float32([[v00, v01, v11], [v00, v11, v10]]))


def test_all_zero_data_is_one_flat_quad():
    mjm = hfield_model(np.zeros((5, 4)), size="1 3 0.2 0.5")
    tris = hfield_triangles(mjm, geom_id(mjm))
    nz, area = up_normals_and_area(tris)
    assert tris.shape == (2, 9) and (tris.reshape(-1, 3)[:, 2] == 0).all()
    assert (nz > 0).all() and area == pytest.approx(4 * 1 * 3)


def test_rejects_a_geom_that_is_not_an_hfield():
    mjm = hfield_model(odd_terrain())
    with pytest.raises(ValueError, match="'rock' is not a heightfield"):
        hfield_triangles(mjm, mjm.geom("rock").id)
    with pytest.raises(ValueError, match="out of range"):
        hfield_triangles(mjm, mjm.ngeom)


@pytest.mark.needs_warp
@pytest.mark.parametrize("which", ["mjw_test_model", "odd_7x11", "random_30x17", "zeros", "2x2", "steps_40x60"])
def test_same_triangles_as_mujoco_warp(which):
    """Bit for bit the triangles (and their order) of MuJoCo Warp's build_hfield_bvh."""
    import warp as wp
    from mujoco_warp._src.bvh import build_hfield_bvh

    rng = np.random.default_rng(3)
    y, x = np.mgrid[:40, :60]
    elevation = {"odd_7x11": odd_terrain(), "random_30x17": rng.random((30, 17)), "zeros": np.zeros((6, 9)),
                 "2x2": np.array([[0.0, 1.0], [0.3, 0.2]]),
                 "steps_40x60": np.where(x < 30, 0.01 * x, 0.5) + np.where(y > 20, 0.02 * y, 0.0)}.get(which)
    mjm = mujoco.MjModel.from_xml_string(MJW_HFIELD_XML) if elevation is None else hfield_model(elevation)
    g = geom_id(mjm)
    with wp.ScopedDevice("cpu"):
        mesh, _ = build_hfield_bvh(mjm, int(mjm.geom_dataid[g]))
    expected = mesh.points.numpy()[mesh.indices.numpy()].reshape(-1, 9)
    np.testing.assert_array_equal(hfield_triangles(mjm, g), expected)


SDF_XML = """
<mujoco>
  <extension>
    <plugin plugin="mujoco.sdf.torus">
      <instance name="torus"><config key="radius1" value="0.35"/><config key="radius2" value="0.15"/></instance>
    </plugin>
  </extension>
  <asset><mesh name="torus"><plugin instance="torus"/></mesh></asset>
  <worldbody>
    <geom name="ball" type="sphere" size="0.1"/>
    <geom name="rock" type="sdf" mesh="torus"><plugin instance="torus"/></geom>
    <geom type="sdf" mesh="torus" pos="1 0 0"><plugin instance="torus"/></geom>
    <geom name="hidden" type="sdf" mesh="torus" pos="2 0 0" rgba="1 1 1 0"><plugin instance="torus"/></geom>
    <geom name="group3" type="sdf" mesh="torus" pos="3 0 0" group="3"><plugin instance="torus"/></geom>
  </worldbody>
</mujoco>
"""


def test_one_warning_names_the_undrawn_geoms():
    mjm = mujoco.MjModel.from_xml_string(SDF_XML)
    assert undrawn_geoms(mjm, (0, 1, 2), SUPPORTED) == [("rock", "sdf"), ("geom 2", "sdf")]
    with pytest.warns(RuntimeWarning) as record:
        warn_undrawn(mjm, (0, 1, 2), SUPPORTED)
    assert len(record) == 1
    assert str(record[0].message) == ("flycuda renderer does not draw 2 geoms: 'rock' (sdf), 'geom 2' (sdf); "
                                      "they are missing from the images")
    assert undrawn_geoms(mjm, range(6), SUPPORTED)[-1] == ("group3", "sdf")
    # a heightfield is undrawn too until the renderer takes it
    assert undrawn_geoms(hfield_model(odd_terrain()), (0,), SUPPORTED) == [("terrain", "hfield")]


def test_no_warning_when_every_visible_geom_is_drawn():
    mjm = mujoco.MjModel.from_xml_string(SDF_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_undrawn(hfield_model(odd_terrain()), (0,), SUPPORTED | {HFIELD})
        warn_undrawn(mjm, (0,), SUPPORTED | {int(mujoco.mjtGeom.mjGEOM_SDF)})
        warn_undrawn(mjm, (1, 2), SUPPORTED)  # the sdf geoms are all in other groups
    assert undrawn_geoms(mjm, (0,), SUPPORTED | {int(mujoco.mjtGeom.mjGEOM_SDF)}) == []
