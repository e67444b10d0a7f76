"""flycuda.pool_ommatidia vs flycuda.reference, reference.grid_pool and FlyGym's retina
(flygym.vision.retina.Retina.fisheye_image_to_hex_pxls, in the FlyGym lane), and the
maps of flycuda.vision.retina (exact and fast)."""

import numpy as np
import pytest
import torch
from helpers.devices import cpu_and_cuda
from helpers.retinas import flygym_pool, smooth_image, synthetic_retina

import flycuda
from flycuda import reference
from flycuda.reference import grid_pool
from flycuda.vision import PoolingMap, RetinaMap, fisheye_lookup

# (H, W, O): odd sizes; the fisheye leaves some footprints partly out of bounds
RETINAS = [(37, 29, 23), (51, 45, 40)]


def _retina(H, W, O, seed=0) -> RetinaMap:
    id_map, pale = synthetic_retina(H, W, O, seed)
    return RetinaMap.from_arrays(id_map, pale)


def _maps(rm: RetinaMap) -> dict:
    ex = rm.exact()
    return {"exact": ex, "full": ex.full_image(), "fast2": rm.fast(2), "fast1": rm.fast(1)}


def _nan_readouts(S, E, O, device="cpu") -> torch.Tensor:
    return torch.full((S, E, O, 2), float("nan"), device=device)


def _run(pmap: PoolingMap, pixels: torch.Tensor, device) -> torch.Tensor:
    pm = pmap.to(device)
    out = _nan_readouts(*pixels.shape[:2], pm.num_ommatidia, device)
    flycuda.pool_ommatidia(pixels.to(device), *pm.args(), out)
    return out.cpu()


def _ref(pmap: PoolingMap, pixels: torch.Tensor) -> torch.Tensor:
    out = _nan_readouts(*pixels.shape[:2], pmap.num_ommatidia)
    reference.pool_ommatidia(pixels, *pmap.args(), out)
    return out


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("retina", RETINAS, ids=lambda r: "x".join(map(str, r)))
@pytest.mark.parametrize("kind", ["exact", "full", "fast2", "fast1"])
@pytest.mark.parametrize("SE", [(1, 1), (3, 2), (7, 2)])
def test_matches_reference(device, retina, kind, SE):
    pmap = _maps(_retina(*retina))[kind]
    pixels = torch.randint(0, 256, (*SE, pmap.rays, 3), dtype=torch.uint8)
    got = _run(pmap, pixels, device)
    assert not got.isnan().any()  # every readout written, both columns
    assert torch.equal(got, _ref(pmap, pixels))  # the same float64 operations in the same order: bit for bit
    if SE == (1, 1) and kind in ("exact", "fast1"):  # tiny: the grid emulator too, 32-thread blocks
        grid = _nan_readouts(*SE, pmap.num_ommatidia)
        grid_pool.pool_ommatidia(pixels, *pmap.args(), grid, threads=32)
        assert torch.equal(grid, got)


@pytest.mark.parametrize("retina", RETINAS, ids=lambda r: "x".join(map(str, r)))
def test_exact_map_is_flygyms_pooling(retina):
    """Without FlyGym: the exact map pools as FlyGym's loop (tests/helpers/retinas.py
    flygym_pool, a line-by-line port) over whole images and over the P-list."""
    H, W, O = retina
    id_map, pale = synthetic_retina(H, W, O)
    rm = RetinaMap.from_arrays(id_map, pale)
    images = torch.randint(0, 256, (2, 2, H, W, 3), dtype=torch.uint8)
    want = torch.tensor(np.stack([[flygym_pool(im.numpy(), id_map, pale, rm.lookup) for im in eyes]
                                  for eyes in images]), dtype=torch.float32)
    ex = rm.exact()
    assert torch.equal(_run(ex.full_image(), images.reshape(2, 2, H * W, 3), "cpu"), want)
    assert torch.equal(_run(ex, ex.gather(images), "cpu"), want)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_strided_readouts(device):
    """readouts any strides: only the view's elements change."""
    pmap = _retina(37, 29, 23).exact()
    pixels = torch.randint(0, 256, (3, 2, pmap.rays, 3), dtype=torch.uint8)
    parent = torch.full((2, 23 + 3, 2, 3), float("nan")).to(device)  # [E, O+3, 2, S] -> view [S, E, O, 2]
    view = parent[:, 1:24].permute(3, 0, 1, 2)
    flycuda.pool_ommatidia(pixels.to(device), *pmap.to(device).args(), view)
    assert torch.equal(view.cpu(), _ref(pmap, pixels))
    assert parent[:, 0].isnan().all() and parent[:, 24:].isnan().all()


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_empty(device):
    rm = _retina(37, 29, 23)
    pm = rm.exact().to(device)
    out = _nan_readouts(0, 2, 23, device)
    flycuda.pool_ommatidia(torch.zeros(0, 2, pm.rays, 3, dtype=torch.uint8, device=device), *pm.args(), out)
    z = torch.zeros(1, dtype=torch.int32, device=device)
    e = torch.zeros(0, dtype=torch.int32, device=device)
    out = _nan_readouts(2, 2, 0, device)  # no ommatidia
    flycuda.pool_ommatidia(torch.zeros(2, 2, 5, 3, dtype=torch.uint8, device=device), z, e, e, e, e, out)


def test_maps():
    rm = _retina(51, 45, 40)
    ex = rm.exact()
    raw = ex.raw_pixels.long()
    assert len(torch.unique(raw)) == len(raw) and raw.min() >= 0 and raw.max() < 51 * 45
    row, col = (raw // rm.width).tolist(), (raw % rm.width).tolist()  # Z-order: 2^b-aligned squares in one run
    for b in (1, 2, 3, 4):
        cells = [(r >> b, c >> b) for r, c in zip(row, col)]
        runs = sum(1 for i in range(len(cells)) if i == 0 or cells[i] != cells[i - 1])
        assert runs == len(set(cells)), b
    ptr = ex.omm_ptr.long()
    assert ptr[0] == 0 and ptr[-1] == ex.omm_pixels.shape[0] and (ptr[1:] >= ptr[:-1]).all()
    assert torch.equal(ex.omm_count.long(), torch.as_tensor(rm.footprint_sizes()))
    assert torch.equal(ex.omm_column.long(), torch.as_tensor(rm.pale).long())
    assert torch.equal(ex.omm_channel, ex.omm_column + 1)  # yellow reads green, pale blue
    assert (ptr[1:] - ptr[:-1] <= ex.omm_count.long()).all()  # out-of-bounds pixels count, read nothing
    for k in (1, 2, 4, 8):
        f = rm.fast(k)
        n = f.omm_ptr.long()[1:] - f.omm_ptr.long()[:-1]
        assert (n <= k).all() and f.rays <= ex.rays and f.k == k
        assert torch.equal(f.omm_count.long(), torch.clamp(ex.omm_count.long(), max=k))
    big = rm.fast(10 ** 6)  # every pixel of every footprint: the exact map
    for name in ("raw_pixels", "omm_ptr", "omm_pixels", "omm_channel", "omm_column", "omm_count"):
        assert torch.equal(getattr(big, name), getattr(ex, name)), name


def test_save_load(tmp_path):
    rm = _retina(37, 29, 23)
    rm.save(str(tmp_path / "r.npz"))
    back = RetinaMap.load(str(tmp_path / "r.npz"))
    for name in ("id_map", "pale", "lookup"):
        assert np.array_equal(getattr(back, name), getattr(rm, name))
    assert torch.equal(back.fast(3).omm_pixels, rm.fast(3).omm_pixels)


def test_bad_retina():
    id_map, pale = synthetic_retina(37, 29, 23)
    with pytest.raises(ValueError, match=r"id_map must hold every ommatidium id 1..24"):
        RetinaMap.from_arrays(id_map, np.zeros(24))
    with pytest.raises(ValueError, match=r"must be \[..., 37, 29, 3\]"):
        RetinaMap.from_arrays(id_map, pale).exact().gather(torch.zeros(1, 29, 37, 3, dtype=torch.uint8))


def _fast_errors(rm: RetinaMap, images: torch.Tensor, ks=(1, 2, 4, 8)) -> dict:
    """{k: (rays per eye, mean, rms, max of |fast - exact|)} over each ommatidium's own
    column (the other is 0 in both)."""
    ex = rm.exact()
    col = ex.omm_column.long().view(1, 1, -1, 1).expand(*images.shape[:2], -1, 1)
    want = _run(ex, ex.gather(images), "cpu").gather(3, col)
    errs = {}
    for k in ks:
        f = rm.fast(k)
        d = (_run(f, f.gather(images), "cpu").gather(3, col) - want).abs()
        errs[k] = (f.rays, float(d.mean()), float(d.pow(2).mean().sqrt()), float(d.max()))
    return errs


def test_fast_mode_error_shrinks_with_k():
    """On smooth images the fast readouts approach the exact ones as k grows."""
    rm = _retina(51, 45, 40)
    images = torch.stack([smooth_image(51, 45, seed) for seed in range(4)]).reshape(2, 2, 51, 45, 3)
    errs = _fast_errors(rm, images)
    means = [errs[k][1] for k in sorted(errs)]
    assert means[-1] < means[0] and means[-1] < 0.01, errs


# --- FlyGym's own retina (the FlyGym lane) ----------------------------------------

@pytest.fixture(scope="module")
def flygym_retina():
    from flygym.vision.retina import Retina

    return Retina()


@pytest.mark.needs_flygym
def test_flygym_lookup_and_sizes(flygym_retina):
    r = flygym_retina
    assert np.array_equal(fisheye_lookup(r.nrows, r.ncols, r.zoom, r.distortion_coefficient), r._fisheye_lookup)
    rm = RetinaMap.from_flygym(r)
    assert (rm.height, rm.width, rm.num_ommatidia) == (512, 450, 721)
    assert np.array_equal(rm.footprint_sizes(), r.num_pixels_per_ommatidia)
    assert rm.exact().rays == 77040 and rm.exact().omm_pixels.shape[0] == 170285


def _flygym_images(S, E, r, seed):
    g = torch.Generator().manual_seed(seed)
    noise = torch.randint(0, 256, (S, E, r.nrows, r.ncols, 3), dtype=torch.uint8, generator=g)
    noise[0, 0] = smooth_image(r.nrows, r.ncols, seed)  # one smooth image too
    return noise


@pytest.mark.needs_flygym
@pytest.mark.parametrize("device", cpu_and_cuda())
def test_equals_flygym_bit_for_bit(flygym_retina, device):
    """THE test: for full eye images of FlyGym's size, pool_ommatidia over the whole
    image flattened (exact map) and over the exact P-list (gathered) both equal
    float32(Retina.fisheye_image_to_hex_pxls(image)) bit for bit, i.e. what
    get_ommatidia_readouts returns; the float64 readout is within float32 rounding."""
    r = flygym_retina
    rm = RetinaMap.from_flygym(r)
    ex = rm.exact()
    S, E = 3, 2
    images = _flygym_images(S, E, r, 1)
    f64 = np.stack([[r.fisheye_image_to_hex_pxls(images[s, e].numpy()) for e in range(E)] for s in range(S)])
    want = torch.from_numpy(f64.astype(np.float32))
    full = _run(ex.full_image(), images.reshape(S, E, -1, 3), device)
    assert torch.equal(full, want)
    listed = _run(ex, ex.gather(images), device)
    assert torch.equal(listed, want)
    assert np.all(np.abs(listed.numpy().astype(np.float64) - f64) <= np.spacing(np.float32(f64)) / 2 + 1e-300)
    # and the long way round: FlyGym's unfused correct_fisheye + raw_image_to_hex_pxls
    slow = r.raw_image_to_hex_pxls(r.correct_fisheye(images[0, 0].numpy()))
    assert torch.equal(full[0, 0], torch.from_numpy(slow.astype(np.float32)))


@pytest.mark.needs_flygym
def test_flygym_fast_mode_errors(flygym_retina, capsys):
    """Fast mode on FlyGym's retina, smooth images: the error table (rays per eye,
    mean and max |fast - exact|), printed for the notes."""
    r = flygym_retina
    rm = RetinaMap.from_flygym(r)
    images = torch.stack([smooth_image(r.nrows, r.ncols, seed) for seed in range(4)]).reshape(2, 2, r.nrows, r.ncols, 3)
    errs = _fast_errors(rm, images)
    with capsys.disabled():
        print(f"\nfast mode vs exact (exact: {rm.exact().rays} rays per eye), smooth images, readouts in [0, 1]:")
        for k, (rays, mean, rms, mx) in errs.items():
            print(f"  k={k}: {rays} rays per eye, |fast - exact| mean {mean:.2e}, rms {rms:.2e}, max {mx:.2e}")
    assert errs[8][1] < errs[1][1] and errs[8][3] < 0.02, errs


# --- bad input ----------------------------------------------------------------------

def _good(device):
    pm = _retina(37, 29, 23).exact().to(device)
    return dict(pixels=torch.randint(0, 256, (2, 2, pm.rays, 3), dtype=torch.uint8).to(device),
                omm_ptr=pm.omm_ptr.clone(), omm_pixels=pm.omm_pixels.clone(), omm_channel=pm.omm_channel.clone(),
                omm_column=pm.omm_column.clone(), omm_count=pm.omm_count.clone(),
                readouts=_nan_readouts(2, 2, 23, device))


def _set(name, i, v):
    def f(a):
        t = a[name].clone()
        t[i] = v if v is not None else t[i + 1] + 1  # None: one more than the next (not monotone)
        return t
    return f


BAD = [
    ("readouts float64", "readouts", lambda a: a["readouts"].double(), r"'readouts' must have dtype Float, got Double"),
    ("readouts 3 columns", "readouts", lambda a: torch.zeros(2, 2, 23, 3, device=a["readouts"].device),
     r"'readouts' must be a 4-D tensor \[S, E, O, 2\], got shape \[2, 2, 23, 3\]"),
    ("readouts expanded", "readouts", lambda a: a["readouts"][:1].expand(2, 2, 23, 2), r"'readouts' must not have overlapping memory"),
    ("pixels float", "pixels", lambda a: a["pixels"].float(), r"'pixels' must have dtype Byte, got Float"),
    ("pixels RGBA", "pixels", lambda a: torch.zeros(2, 2, a["pixels"].shape[2], 4, dtype=torch.uint8, device=a["pixels"].device),
     r"'pixels' must be a 4-D tensor \[S, E, P, 3\] \(RGB\), got shape \[2, 2, \d+, 4\]"),
    ("pixels worlds", "pixels", lambda a: a["pixels"][:1], r"'pixels' must have shape \[S, E, P, 3\] with \[S, E\] = \[2, 2\] \(the readouts'\), got \[1, 2, \d+, 3\]"),
    ("pixels strided", "pixels", lambda a: a["pixels"].transpose(0, 1), r"'pixels' must be contiguous"),
    ("ptr int64", "omm_ptr", lambda a: a["omm_ptr"].long(), r"'omm_ptr' must have dtype Int, got Long"),
    ("ptr short", "omm_ptr", lambda a: a["omm_ptr"][:-1], r"'omm_ptr' must have shape \[24\] \(\[O \+ 1\]\), got \[23\]"),
    ("ptr 2-D", "omm_ptr", lambda a: a["omm_ptr"][None], r"'omm_ptr' must be a 1-D tensor \[O \+ 1\], got 2-D"),
    ("ptr not from 0", "omm_ptr", _set("omm_ptr", 0, 1), r"'omm_ptr' must start at 0, got omm_ptr\[0\] = 1"),
    ("ptr decreasing", "omm_ptr", _set("omm_ptr", 5, None), r"'omm_ptr' must be non-decreasing, got omm_ptr\[6\] = \d+ < omm_ptr\[5\] = \d+"),
    ("ptr end", "omm_ptr", _set("omm_ptr", -1, 0), r"'omm_ptr' must be non-decreasing|'omm_ptr' must end at"),
    ("pixels index", "omm_pixels", _set("omm_pixels", 3, 10 ** 6), r"'omm_pixels' must hold indices in \[0, \d+\) \(P = pixels.size\(2\) = \d+\), got omm_pixels\[3\] = 1000000"),
    ("pixels negative", "omm_pixels", _set("omm_pixels", 0, -1), r"'omm_pixels' must hold indices in \[0, \d+\)"),
    ("pixels strided map", "omm_pixels", lambda a: a["omm_pixels"].repeat_interleave(2)[::2], r"'omm_pixels' must be contiguous"),
    ("channel 3", "omm_channel", _set("omm_channel", 4, 3), r"'omm_channel' must hold indices in \[0, 3\) \(RGB channels = 3\), got omm_channel\[4\] = 3"),
    ("channel length", "omm_channel", lambda a: a["omm_channel"][:5], r"'omm_channel' must have shape \[23\] \(\[O\]\), got \[5\]"),
    ("column 2", "omm_column", _set("omm_column", 0, 2), r"'omm_column' must hold indices in \[0, 2\) \(readout columns = 2\), got omm_column\[0\] = 2"),
    ("count 0", "omm_count", _set("omm_count", 7, 0), r"'omm_count' must hold values >= 1, got omm_count\[7\] = 0"),
    ("count float", "omm_count", lambda a: a["omm_count"].float(), r"'omm_count' must have dtype Int, got Float"),
]


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("name,arg,change,msg", BAD, ids=[b[0] for b in BAD])
def test_bad_input(device, name, arg, change, msg):
    a = _good(device)
    a[arg] = change(a)
    out = a["readouts"]
    before = out.clone()
    with pytest.raises(RuntimeError, match=r"flycuda\.pool_ommatidia: argument (" + msg + ")"):
        flycuda.pool_ommatidia(**a)
    assert torch.equal(out.isnan(), before.isnan()) and torch.equal(out.nan_to_num(), before.nan_to_num())


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_readouts_must_not_alias_inputs(device):
    a = _good(device)
    buf = torch.zeros(2 * 2 * 23 * 2 + 23, device=device)
    a["readouts"] = buf[:2 * 2 * 23 * 2].view(2, 2, 23, 2)
    a["omm_count"] = buf[-24:-1].view(torch.int32)
    a["omm_count"].copy_(_good(device)["omm_count"])
    with pytest.raises(RuntimeError, match=r"argument 'readouts' must not share memory with argument 'omm_count'"):
        flycuda.pool_ommatidia(**a)
    a = _good(device)
    P = a["pixels"].shape[2]
    raw = torch.zeros(max(2 * 2 * P * 3, 2 * 2 * 23 * 2 * 4), dtype=torch.uint8, device=device)
    a["pixels"] = raw[:2 * 2 * P * 3].view(2, 2, P, 3)
    a["readouts"] = raw[:2 * 2 * 23 * 2 * 4].view(torch.float32).view(2, 2, 23, 2)
    with pytest.raises(RuntimeError, match=r"argument 'readouts' must not share memory with argument 'pixels'"):
        flycuda.pool_ommatidia(**a)


@pytest.mark.needs_cuda
def test_device_mismatch():
    a = _good("cuda")
    a["omm_count"] = a["omm_count"].cpu()
    with pytest.raises(RuntimeError, match=r"'omm_count' must be on cuda:0 \(the device of 'readouts'\), got cpu"):
        flycuda.pool_ommatidia(**a)


@pytest.mark.needs_cuda
def test_cuda_graph_replay():
    """Captured once (map checked before), replayed on new pixels: as eager."""
    a = _good("cuda")
    flycuda.pool_ommatidia(**a)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            flycuda.pool_ommatidia(**a)
    for _ in range(3):
        a["pixels"].copy_(torch.randint(0, 256, a["pixels"].shape, dtype=torch.uint8))
        g.replay()
        torch.cuda.synchronize()
        want = _nan_readouts(2, 2, 23)
        reference.pool_ommatidia(*(a[k].cpu() for k in list(a)[:-1]), want)
        assert torch.equal(a["readouts"].cpu(), want)


def test_opcheck():
    a = _good("cpu")
    torch.library.opcheck(torch.ops.flycuda.pool_ommatidia.default,
                          tuple(a[k] for k in ("pixels", "omm_ptr", "omm_pixels", "omm_channel", "omm_column",
                                               "omm_count", "readouts")))
