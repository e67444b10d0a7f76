"""The well-known Warp pattern the benchmarks compare against (FlyGym GPU tutorial):
one Warp kernel copies ``buffer[w, counter[0], d]`` into the controls, a second
advances the device counter (wrapping at the buffer's length). On NeuroMechFly,
:func:`make_flygym_step` is FlyGym's own loop body (its kernels and
``GPUSimulation.set_actuator_inputs``)."""

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


@wp.kernel
def update_target_angles_kernel(dof_angles_all_worlds_gpu: wp.array3d(dtype=wp.float32),
                                step_counter_gpu: wp.array(dtype=wp.int32),
                                curr_target_angles_gpu: wp.array2d(dtype=wp.float32)):
    """FlyGym's (flygym_demo/benchmark/time_gpu_simulation.py)."""
    world_id, actuator_id = wp.tid()
    step = step_counter_gpu[0]
    curr_target_angles_gpu[world_id, actuator_id] = dof_angles_all_worlds_gpu[world_id, step, actuator_id]


def make_flygym_step(setup, buffer):
    """FlyGym's tutorial step without the physics: targets from ``buffer`` [W, n, D] at the
    device counter, ``set_actuator_inputs``, counter + 1 (wrapping at n)."""
    try:
        from flygym.compose import ActuatorType
        position = ActuatorType.POSITION
    except ImportError:  # a frozen NeuroMechFly (flycuda.flygym.frozen): its GPUSimulation transcribed
        position = "position"
    device = setup.sim.wp_device
    counter = wp.zeros(1, dtype=wp.int32, device=device)
    W, n, D = buffer.shape
    targets = wp.zeros((W, D), dtype=wp.float32, device=device)

    def step():
        wp.launch(update_target_angles_kernel, dim=(W, D), inputs=[buffer, counter], outputs=[targets],
                  device=device)
        setup.gpu_sim.set_actuator_inputs(setup.fly.name, position, targets)
        wp.launch(increment, dim=1, inputs=[counter, n], device=device)

    return step
