"""What the renderer's tests share: the scenes they draw (built once per test module)."""

import pytest
from helpers.worlds import fly_sim, prims_sim


@pytest.fixture(scope="module")
def scenes():
    """{name: (sim, camera)}: the primitives scene (3 worlds), the hexapod of capsules and of
    triangle meshes (2 worlds each, after 20 steps)."""
    from flycuda.sim.hexapod import fly_mesh_model

    return {"prims": (prims_sim(3), "overview"), "fly": (fly_sim(2, steps=20), "track"),
            "fly_mesh": (fly_sim(2, steps=20, model=fly_mesh_model(around=8)), "track")}
