"""Small worlds for the tests: the primitives scene, the hexapod after some steps, a heightfield scene,
the hexapod with two eye cameras (and NeuroMechFly's, in the FlyGym lane)."""

import torch


def prims_sim(worlds=2):
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


def fly_sim(worlds=3, steps=30, model=None):
    """The built-in hexapod (or ``model``) after ``steps`` steps under spread controls."""
    from flycuda.sim import Sim

    sim = Sim.build(model, worlds, device="cpu")
    ctrl = sim.view("ctrl")
    ctrl.copy_(torch.linspace(-0.3, 0.3, ctrl.numel()).view_as(ctrl))
    for _ in range(steps):
        sim.step()
    return sim


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
