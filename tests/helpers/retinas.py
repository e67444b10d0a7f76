"""Retinas and images without FlyGym, and FlyGym's pooling line by line (the vision tests, the pool op's)."""

import torch


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
