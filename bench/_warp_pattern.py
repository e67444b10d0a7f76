"""The well-known Warp pattern the benchmarks compare against (FlyGym GPU tutorial):
one Warp kernel copies ``buffer[w, counter[0], d]`` into the controls, a second
advances the device counter (wrapping at the buffer's length)."""

import warp as wp


@wp.kernel
def copy_targets(buffer: wp.array3d(dtype=wp.float32), counter: wp.array(dtype=wp.int32),
                 act: wp.array(dtype=wp.int32), out: wp.array2d(dtype=wp.float32)):
    w, d = wp.tid()
    out[w, act[d]] = buffer[w, counter[0], d]


@wp.kernel
def increment(counter: wp.array(dtype=wp.int32), n: int):
    counter[0] = (counter[0] + 1) % n


def make_step(buffer, act_ids, out, device: str):
    """A function launching both kernels: buffer [W, steps, D], act_ids [D], out [W, nu] (Warp arrays)."""
    counter = wp.zeros(1, dtype=wp.int32, device=device)
    W, n, D = buffer.shape

    def step():
        wp.launch(copy_targets, dim=(W, D), inputs=[buffer, counter, act_ids, out], device=device)
        wp.launch(increment, dim=1, inputs=[counter, n], device=device)

    return step
