"""The Warp kernel of FlyGym's ``GPUSimulation`` that :class:`flycuda.flygym.frozen.FrozenSimulation`
transcribes (``wp_scatter_indexed_cols_2d``): imported on first use (it imports Warp)."""

import warp as wp


@wp.kernel
def scatter_indexed_cols_2d(src: wp.array2d(dtype=wp.float32), dst: wp.array2d(dtype=wp.float32),
                            indices: wp.array(dtype=wp.int32)):
    """``dst[w, indices[j]] = src[w, j]``: the controls of the actuators ``indices`` from ``src``."""
    w, j = wp.tid()
    dst[w, indices[j]] = src[w, j]
