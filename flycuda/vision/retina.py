"""FlyGym's compound eye as maps for :func:`flycuda.pool_ommatidia` (numpy and torch only).

FlyGym (``flygym.vision.retina.Retina.fisheye_image_to_hex_pxls``) turns one raw eye
image (uint8 [H, W, 3], 512 x 450) into ommatidia readouts [O, 2] (O = 721): output
pixel i of the fisheye-corrected image reads raw pixel ``lookup[i]`` (-1: out of
bounds, black), and ommatidium ``o = id_map[i] - 1`` of type ``t = pale[o]`` (0
yellow, 1 pale) accumulates, over its pixels in raster order and in float64,
``raw[lookup[i], t + 1] / n_o`` (green for yellow, blue for pale; n_o its pixels in
the id map, out-of-bounds ones included) into ``vals[o, t]``; the readout is
``vals / 255``, the other column 0, and ``get_ommatidia_readouts`` rounds it to float32.

:class:`RetinaMap` holds that geometry (id map, pale mask, fisheye lookup) and makes
:class:`PoolingMap` s, the CSR form the op takes:
* :meth:`RetinaMap.exact`: every read, in FlyGym's order, over the P distinct raw
  pixels the retina reads (77,040 of 230,400 per eye for FlyGym's retina): a
  renderer traces only those, and the op reproduces FlyGym's readout bit for bit;
* :meth:`RetinaMap.fast`: k reads per ommatidium spread over its footprint (far
  fewer rays; an approximation whose error tests/ops/test_pool_ommatidia.py measures).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from .. import ops
from ..errors import VisionError

__all__ = ["RetinaMap", "PoolingMap", "fisheye_lookup"]


def fisheye_lookup(height: int, width: int, zoom: float, distortion: float) -> np.ndarray:
    """FlyGym's ``Retina._make_fisheye_lookup`` in numpy: for each fisheye-corrected
    pixel (raster order), the flat index ``row * width + col`` of the raw pixel it
    shows, or -1 when that falls outside the image. int64 [height * width]; the same
    float64 operations in the same order (tests hold it equal to FlyGym's)."""
    row = np.arange(height, dtype=np.float64)[:, None]
    col = np.arange(width, dtype=np.float64)[None, :]
    rn = ((2 * row - height) / height) / zoom
    cn = ((2 * col - width) / width) / zoom
    denom = 1 - (distortion * (cn * cn + rn * rn)) + 1e-6
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        src_row = np.trunc(((rn / denom + 1) * height) / 2)  # int(): toward zero
        src_col = np.trunc(((cn / denom + 1) * width) / 2)
        ok = (src_row >= 0) & (src_row < height) & (src_col >= 0) & (src_col < width)
    flat = np.where(ok, src_row * width + src_col, -1).astype(np.int64)
    return flat.reshape(-1)


def _i32(a) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a, dtype=np.int32))


@dataclass(frozen=True)
class PoolingMap:
    """One CSR pooling map: the arguments of :func:`flycuda.pool_ommatidia` but the
    pixels and readouts, for eye images of ``height`` x ``width``.

    ``raw_pixels`` int32 [P]: the distinct raw pixel indices (``row * width + col``)
    the map reads, i.e. the rays to trace per eye, in Z-order of (row, col)
    (:func:`z_order`: runs of consecutive entries are compact patches of the image,
    so each block of the renderer traces a narrow pyramid of rays and culls the
    rest of the scene); ``omm_pixels`` int32 [nnz] index into that list. ``k`` is
    None for the exact map, else the rays per ommatidium.
    """

    height: int
    width: int
    raw_pixels: torch.Tensor   # int32 [P]
    omm_ptr: torch.Tensor      # int32 [O + 1]
    omm_pixels: torch.Tensor   # int32 [nnz], into raw_pixels
    omm_channel: torch.Tensor  # int32 [O], the RGB channel read
    omm_column: torch.Tensor   # int32 [O], the readout column (0 yellow, 1 pale)
    omm_count: torch.Tensor    # int32 [O], the divisor
    k: int | None = None

    @property
    def rays(self) -> int:
        """P: the raw pixels (rays) one eye's readout reads."""
        return int(self.raw_pixels.shape[0])

    @property
    def num_ommatidia(self) -> int:
        """O, the ommatidia per eye."""
        return int(self.omm_channel.shape[0])

    def args(self) -> tuple[torch.Tensor, ...]:
        """(omm_ptr, omm_pixels, omm_channel, omm_column, omm_count), as the op takes them."""
        return self.omm_ptr, self.omm_pixels, self.omm_channel, self.omm_column, self.omm_count

    def to(self, device) -> "PoolingMap":
        """The same map with its tensors on ``device``."""
        return replace(self, **{f: getattr(self, f).to(device) for f in
                                ("raw_pixels", "omm_ptr", "omm_pixels", "omm_channel", "omm_column", "omm_count")})

    def full_image(self) -> "PoolingMap":
        """The same reads over whole images flattened: P = height * width and
        ``omm_pixels`` the raw pixel indices themselves."""
        n = self.height * self.width
        return replace(self, raw_pixels=torch.arange(n, dtype=torch.int32, device=self.raw_pixels.device),
                       omm_pixels=self.raw_pixels[self.omm_pixels.long()].to(torch.int32))

    def gather(self, images: torch.Tensor) -> torch.Tensor:
        """The map's pixels of eye images: uint8 [..., height, width, 3] -> [..., P, 3]
        (contiguous), the op's ``pixels``."""
        if tuple(images.shape[-3:]) != (self.height, self.width, 3):
            raise VisionError(f"gather: images must be [..., {self.height}, {self.width}, 3], "
                             f"got {tuple(images.shape)}")
        flat = images.reshape(*images.shape[:-3], self.height * self.width, 3)
        return flat[..., self.raw_pixels.to(images.device).long(), :].contiguous()

    def pool(self, pixels: torch.Tensor, readouts: torch.Tensor | None = None) -> torch.Tensor:
        """Readouts float32 [S, E, O, 2] of ``pixels`` uint8 [S, E, P, 3] (this map's
        pixels, e.g. from :meth:`gather`) by :func:`flycuda.pool_ommatidia`; into
        ``readouts`` when given. Needs the compiled extension."""
        if readouts is None:
            readouts = torch.empty(*pixels.shape[:2], self.num_ommatidia, 2, device=pixels.device)
        ops.pool_ommatidia(pixels, *self.args(), readouts)
        return readouts


class RetinaMap:
    """FlyGym's retina geometry for one eye camera: id map, pale mask, fisheye lookup.

    Args:
        id_map: int [H, W]; 0 outside the lattice, o + 1 in ommatidium o's footprint
            (every o in [0, O) present).
        pale: int/bool [O]; 1 pale (reads blue, column 1), 0 yellow (green, column 0).
        lookup: int [H * W]; the raw pixel each fisheye-corrected pixel shows, -1 none
            (:func:`fisheye_lookup`).
    """

    def __init__(self, id_map: np.ndarray, pale: np.ndarray, lookup: np.ndarray):
        self.id_map = np.ascontiguousarray(id_map, dtype=np.int16)
        self.pale = np.ascontiguousarray(pale, dtype=np.int8).reshape(-1)
        self.lookup = np.ascontiguousarray(lookup, dtype=np.int32).reshape(-1)
        self.height, self.width = self.id_map.shape
        O = self.pale.shape[0]
        ids = np.unique(self.id_map)
        if not np.array_equal(ids[ids > 0], np.arange(1, O + 1)):
            raise VisionError(f"RetinaMap: id_map must hold every ommatidium id 1..{O} (pale has {O} entries), "
                             f"got ids {ids[ids > 0].min(initial=0)}..{ids.max(initial=0)} ({(ids > 0).sum()} distinct)")
        if self.lookup.shape[0] != self.height * self.width:
            raise VisionError(f"RetinaMap: lookup must have {self.height * self.width} entries (H * W), "
                             f"got {self.lookup.shape[0]}")
        if ((self.lookup < -1) | (self.lookup >= self.height * self.width)).any():
            raise VisionError("RetinaMap: lookup entries must be -1 or raw pixel indices in [0, H * W)")
        if ((self.pale != 0) & (self.pale != 1)).any():
            raise VisionError("RetinaMap: pale must hold 0 (yellow) or 1 (pale) per ommatidium")

    @classmethod
    def from_flygym(cls, retina=None) -> "RetinaMap":
        """The map of a FlyGym ``Retina`` (default: ``Retina()``, FlyGym's eye), its own
        arrays (``ommatidia_id_map``, ``pale_type_mask``, ``_fisheye_lookup``)."""
        if retina is None:
            from flygym.vision.retina import Retina  # noqa: PLC0415  (lazy: FlyGym is optional (Python >= 3.12))

            retina = Retina()
        lookup = getattr(retina, "_fisheye_lookup", None)
        if lookup is None:
            lookup = fisheye_lookup(retina.nrows, retina.ncols, retina.zoom, retina.distortion_coefficient)
        return cls(retina.ommatidia_id_map, np.asarray(retina.pale_type_mask).astype(np.int8), lookup)

    @classmethod
    def from_arrays(cls, id_map: np.ndarray, pale: np.ndarray, zoom: float = 2.72,
                    distortion: float = 3.8) -> "RetinaMap":
        """A map without FlyGym: its id map and pale mask, the lookup computed by
        :func:`fisheye_lookup` (FlyGym's defaults: zoom 2.72, coefficient 3.8)."""
        H, W = np.shape(id_map)
        return cls(id_map, pale, fisheye_lookup(H, W, zoom, distortion))

    def save(self, path: str) -> None:
        """Writes the three arrays to a compressed .npz (about 100 kB for FlyGym's eye)."""
        np.savez_compressed(path, id_map=self.id_map, pale=self.pale, lookup=self.lookup)

    @classmethod
    def load(cls, path: str) -> "RetinaMap":
        """A map written by :meth:`save`."""
        with np.load(path) as d:
            return cls(d["id_map"], d["pale"], d["lookup"])

    @property
    def num_ommatidia(self) -> int:
        """O, the ommatidia per eye."""
        return int(self.pale.shape[0])

    def footprint_sizes(self) -> np.ndarray:
        """int64 [O]: each ommatidium's pixels in the id map (FlyGym's divisor)."""
        ids = self.id_map.reshape(-1).astype(np.int64)
        return np.bincount(ids[ids > 0] - 1, minlength=self.num_ommatidia)

    def hex_images(self, readouts) -> torch.Tensor:
        """FlyGym's human-readable hexagon images of readouts: float [..., O, 2] (the
        ``[S, 2, O, 2]`` of :class:`flycuda.vision.Vision`, or samples read from a
        recording) -> uint8 [..., H, W], each ommatidium's footprint filled with its
        readout times 255 (truncated), 0 outside the lattice: what FlyGym's
        ``Retina.hex_pxls_to_human_readable(readout.max(-1), color_8bit=True)`` draws
        (the readout's one non-zero column per ommatidium). Torch, on the readouts'
        device; numpy input gives a tensor too."""
        x = torch.as_tensor(readouts)
        if x.dim() < 2 or tuple(x.shape[-2:]) != (self.num_ommatidia, 2):
            raise VisionError(f"hex_images: readouts must be [..., {self.num_ommatidia}, 2], got {tuple(x.shape)}")
        val = (x.to(torch.float32).amax(-1) * 255).to(torch.uint8)  # float -> uint8 truncates, as numba's
        val = torch.cat([torch.zeros_like(val[..., :1]), val], -1)  # id 0: outside the lattice, black
        cache = self.__dict__.setdefault("_ids", {})  # the id map on each device, made once
        ids = cache.get(x.device)
        if ids is None:
            ids = cache[x.device] = torch.as_tensor(self.id_map.reshape(-1).astype(np.int64), device=x.device)
        return val[..., ids].reshape(*x.shape[:-2], self.height, self.width)

    def exact(self) -> PoolingMap:
        """FlyGym's own pooling: every in-bounds fisheye pixel of every ommatidium, in
        raster order (FlyGym's accumulation order, duplicates kept), over the Z-ordered
        distinct raw pixels they read; divisor the footprint's size."""
        ids = self.id_map.reshape(-1).astype(np.int64) - 1
        dst = np.flatnonzero((ids >= 0) & (self.lookup >= 0))
        return self._csr(ids[dst], dst, self.footprint_sizes(), None)

    def fast(self, k: int) -> PoolingMap:
        """k rays per ommatidium spread over its footprint (see :func:`spread_pixels`);
        each read counts 1/k (out-of-bounds picks read black, as in FlyGym), an
        ommatidium with at most k pixels pools them all, exactly as :meth:`exact`."""
        if k < 1:
            raise VisionError(f"RetinaMap.fast: k must be >= 1, got {k}")
        ids = self.id_map.reshape(-1).astype(np.int64) - 1
        order = np.argsort(ids, kind="stable")
        order = order[ids[order] >= 0]
        sizes = self.footprint_sizes()
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        picks = [spread_pixels(order[ptr[o]:ptr[o + 1]], self.width, k) for o in range(self.num_ommatidia)]
        dst = np.concatenate(picks)
        dst = dst[self.lookup[dst] >= 0]
        return self._csr(ids[dst], dst, np.minimum(sizes, k), k)

    def _csr(self, omm: np.ndarray, dst: np.ndarray, count: np.ndarray, k: int | None) -> PoolingMap:
        """The CSR map of reads (ommatidium omm[i] reads fisheye pixel dst[i]), each
        ommatidium's reads in raster order of dst."""
        order = np.lexsort((dst, omm))
        omm, raw = omm[order], self.lookup[dst[order]]
        O = self.num_ommatidia
        ptr = np.concatenate([[0], np.cumsum(np.bincount(omm, minlength=O))])
        raw_pixels, inverse = np.unique(raw, return_inverse=True)
        order = z_order(raw_pixels, self.width)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        raw_pixels, inverse = raw_pixels[order], rank[inverse.reshape(-1)]
        return PoolingMap(self.height, self.width, _i32(raw_pixels), _i32(ptr), _i32(inverse),
                          _i32(self.pale.astype(np.int32) + 1), _i32(self.pale), _i32(count), k)


def z_order(pixels: np.ndarray, width: int) -> np.ndarray:
    """The permutation that puts flat pixel indices (``row * width + col``) in
    Z-order (Morton order: the bits of row and col interleaved), stable."""
    pixels = np.asarray(pixels, dtype=np.int64)
    row, col = pixels // width, pixels % width
    key = np.zeros_like(pixels)
    bits = int(max(row.max(initial=0), col.max(initial=0))).bit_length()  # 2 * bits < 63 for any int32 id
    for bit in range(bits):
        key |= ((col >> bit) & 1) << (2 * bit) | ((row >> bit) & 1) << (2 * bit + 1)
    return np.argsort(key, kind="stable")


def spread_pixels(pixels: np.ndarray, width: int, k: int, iterations: int = 8) -> np.ndarray:
    """k of ``pixels`` (flat indices ``row * width + col``, one ommatidium's footprint)
    spread over it, deterministically: farthest-point sampling from the pixel nearest
    the centroid, then ``iterations`` rounds of Lloyd's k-means over the footprint,
    each center snapped to its nearest unused pixel. Sorted; all of them when
    ``len(pixels) <= k``."""
    pixels = np.sort(np.asarray(pixels, dtype=np.int64))
    if len(pixels) <= k:
        return pixels
    xy = np.stack([pixels // width, pixels % width], axis=1).astype(np.float64)
    chosen = [int(np.argmin(((xy - xy.mean(axis=0)) ** 2).sum(axis=1)))]
    dist = ((xy - xy[chosen[0]]) ** 2).sum(axis=1)
    while len(chosen) < k:
        chosen.append(int(np.argmax(dist)))
        dist = np.minimum(dist, ((xy - xy[chosen[-1]]) ** 2).sum(axis=1))
    centers = xy[chosen]
    for _ in range(iterations if k > 1 else 0):
        near = np.argmin(((xy[:, None, :] - centers[None]) ** 2).sum(axis=2), axis=1)
        centers = np.stack([xy[near == c].mean(axis=0) if (near == c).any() else centers[c] for c in range(k)])
    picked: list[int] = []
    for c in centers:
        d = ((xy - c) ** 2).sum(axis=1)
        d[picked] = np.inf
        picked.append(int(np.argmin(d)))
    return np.sort(pixels[picked])
