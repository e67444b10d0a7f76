"""The odor references (flycuda.reference.odor, issue 41) against their anchors, before the op: the
batched torch reference equals FlyGym 1.x's get_olfaction (transcribed) world by world on random
sources, peaks, sensors and exponents, n > 1 and k > 1; the advection-diffusion field equals the
course's closed form and behaves as a plume in wind."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flycuda.reference.odor import FIELDS, SENSORS, flygym1_olfaction, odor_intensity


def _random(W, n, k, s, seed):
    g = torch.Generator().manual_seed(seed)
    sources = torch.rand(W, n, 3, generator=g, dtype=torch.float64) * 20 - 10
    peaks = torch.rand(n, k, generator=g, dtype=torch.float64) * 3
    sensors = torch.rand(W, s, 3, generator=g, dtype=torch.float64) * 20 - 10
    return sources, peaks, sensors


@pytest.mark.parametrize("W,n,k,s,exponent", [(5, 3, 2, 4, 2.0), (7, 1, 1, 4, 1.5), (3, 6, 3, 5, 0.7),
                                              (2, 2, 4, 1, 0.0)])
def test_power_field_is_flygym1s_get_olfaction_in_every_world(W, n, k, s, exponent):
    sources, peaks, sensors = _random(W, n, k, s, seed=W * 100 + n)
    out = torch.full((W, k, s), float("nan"), dtype=torch.float32)  # poisoned: every entry written
    got = odor_intensity(sources, peaks, sensors, out, field="power", exponent=exponent)
    assert got is out
    for w in range(W):
        want = flygym1_olfaction(sensors[w].numpy(), sources[w].numpy(), peaks.numpy(),
                                 diffuse=lambda d: d ** -exponent)
        assert want.shape == (k, s)
        torch.testing.assert_close(out[w], torch.from_numpy(want).float(), rtol=2.4e-7, atol=0.0)


def test_a_sensor_on_a_source_reads_inf_as_flygym1s():
    sources = torch.tensor([[[1.0, 2.0, 3.0]]], dtype=torch.float64)
    sensors = torch.tensor([[[1.0, 2.0, 3.0], [2.0, 2.0, 3.0]]], dtype=torch.float64)
    out = torch.empty(1, 1, 2)
    odor_intensity(sources, torch.ones(1, 1), sensors, out)
    assert out[0, 0, 0] == math.inf and out[0, 0, 1] == 1.0
    with np.errstate(divide="ignore"):
        assert flygym1_olfaction(sensors[0].numpy(), sources[0].numpy(), np.ones((1, 1)))[0, 0] == math.inf


def test_advection_diffusion_is_the_courses_closed_form():
    """C(r) = exp(r . u / 2D) K0(kappa |r|) / (2 pi D) per unit peak, in x and y only (z ignored),
    evaluated in log form; downwind reads more than upwind, still air is symmetric."""
    W, n, k, s = 4, 2, 2, 4
    sources, peaks, sensors = _random(W, n, k, s, seed=5)
    wind = torch.tensor([[0.0, 0.0], [300.0, 0.0], [-150.0, 80.0], [20.0, -400.0]], dtype=torch.float64)
    D, decay = 20000.0, 500.0
    out = torch.full((W, k, s), float("nan"))
    odor_intensity(sources, peaks, sensors, out, field="advection_diffusion", wind=wind, diffusivity=D, decay=decay)
    want = torch.zeros(W, k, s, dtype=torch.float64)
    for i in range(n):
        r = (sensors - sources[:, i:i + 1])[..., :2]
        kappa = torch.sqrt((wind * wind).sum(1, keepdim=True) / (4 * D * D) + decay / D)
        c = torch.exp((r * wind[:, None]).sum(2) / (2 * D)) * torch.special.modified_bessel_k0(
            kappa * r.norm(dim=2)) / (2 * math.pi * D)
        want += peaks[i].view(1, -1, 1) * c.unsqueeze(1)
    torch.testing.assert_close(out, want.float(), rtol=1e-6, atol=0.0)
    # z is ignored: moving the sensors up changes nothing
    up = sensors.clone()
    up[..., 2] += 5.0
    again = torch.empty_like(out)
    odor_intensity(sources, peaks, up, again, field="advection_diffusion", wind=wind, diffusivity=D, decay=decay)
    assert torch.equal(again, out)
    # one source at the origin, wind along +x: 3 units downwind reads more than 3 upwind; still air: equal
    src = torch.zeros(2, 1, 3, dtype=torch.float64)
    probe = torch.tensor([[3.0, 0, 0], [-3.0, 0, 0]], dtype=torch.float64).expand(2, 2, 3)
    c = torch.empty(2, 1, 2)
    odor_intensity(src, torch.ones(1, 1), probe, c, field="advection_diffusion",
                   wind=torch.tensor([[0.0, 0.0], [400.0, 0.0]]))
    assert c[0, 0, 0] == c[0, 0, 1] and c[1, 0, 0] > c[1, 0, 1] > 0


def test_the_fields_and_sensors_are_named_and_a_bad_field_refused():
    assert FIELDS == ("power", "advection_diffusion")
    assert SENSORS == ("l_maxillary_palp", "r_maxillary_palp", "l_antenna", "r_antenna")
    out = torch.zeros(1, 1, 1)
    with pytest.raises(ValueError, match=r"field must be one of power, advection_diffusion, got 'plume3d'"):
        odor_intensity(torch.zeros(1, 1, 3), torch.ones(1, 1), torch.ones(1, 1, 3), out, field="plume3d")
    assert out.eq(0).all()
