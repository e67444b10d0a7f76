"""Zero-copy with MuJoCo Warp on Warp's CPU device: motion_to_ctrl writes into
`wp.to_torch(d.ctrl)` and mjw.step sees it (position actuators move the joints)."""

import pytest
import torch

import flycuda

pytestmark = pytest.mark.needs_warp

XML = """
<mujoco>
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="a">
      <joint name="j0" type="hinge" axis="0 0 1" damping="0.5"/>
      <geom type="capsule" size="0.02" fromto="0 0 0 0.2 0 0" mass="0.1"/>
      <body name="b" pos="0.2 0 0">
        <joint name="j1" type="hinge" axis="0 0 1" damping="0.5"/>
        <geom type="capsule" size="0.02" fromto="0 0 0 0.2 0 0" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="p1" joint="j1" kp="2"/>
    <position name="p0" joint="j0" kp="2"/>
  </actuator>
</mujoco>
"""


def test_motion_to_ctrl_drives_mjwarp_worlds():
    mujoco = pytest.importorskip("mujoco")
    wp = pytest.importorskip("warp")
    mjw = pytest.importorskip("mujoco_warp")
    from flycuda.sim.mjwarp import quiet_warp
    quiet_warp(wp)
    mjm = mujoco.MjModel.from_xml_string(XML)
    W = 3
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
        d = mjw.make_data(mjm, nworld=W)
        ctrl, qpos = wp.to_torch(d.ctrl), wp.to_torch(d.qpos)
        # Zero-copy: the torch views share Warp's memory.
        assert ctrl.data_ptr() == d.ctrl.ptr and qpos.data_ptr() == d.qpos.ptr
        assert ctrl.shape == (W, 2) and qpos.shape == (W, 2)
        # Per-world targets for (j0, j1); actuator order is (p1, p0).
        targets = torch.tensor([[0.3, -0.2], [-0.4, 0.5], [0.6, 0.1]])
        motion = targets[:, None, :].repeat(1, 4, 1).contiguous()  # [W, T=4, D=2]
        act_ids = torch.tensor([1, 0], dtype=torch.int32)  # j0 -> p0, j1 -> p1
        step = flycuda.new_step_counter("cpu")
        history = torch.full((W, 5, 2), 99.0)
        adrs = torch.tensor([0, 1])
        for _ in range(400):
            flycuda.record_qpos(qpos, adrs, history, step, every=100)
            flycuda.motion_to_ctrl(motion, step, ctrl, act_ids, advance=1)
            mjw.step(m, d)
        assert int(step[0]) == 400
        assert torch.equal(ctrl[:, [1, 0]], targets)
        got = wp.to_torch(d.qpos).clone()
    # The worlds moved towards their own targets (critically-damped-ish servo,
    # 0.8 s simulated): each joint within 0.1 rad of its target, and far from 0.
    assert torch.allclose(got, targets, atol=0.1), got
    # The history saw the joints move: row 0 is the start (zeros), rows 1..3 later.
    assert torch.equal(history[:, 0], torch.zeros(W, 2))
    assert (history[:, 3] - targets).abs().max() < (history[:, 1] - targets).abs().max()
    assert torch.equal(history[:, 4], torch.full((W, 2), 99.0))  # step 400 never recorded
