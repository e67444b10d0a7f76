"""The compound-eye op: eye images pooled into FlyGym's ommatidia readouts
(:func:`pool_ommatidia`; the maps: :mod:`flycuda.vision.retina`)."""

from __future__ import annotations

import torch

from ._values import check_index, check_min, check_offsets
from .checks import check_same_device

__all__ = ["pool_ommatidia"]


def pool_ommatidia(pixels: torch.Tensor, omm_ptr: torch.Tensor, omm_pixels: torch.Tensor,
                   omm_channel: torch.Tensor, omm_column: torch.Tensor, omm_count: torch.Tensor,
                   readouts: torch.Tensor) -> None:
    """Pools eye images into FlyGym's ommatidia readouts, in place.

    FlyGym's ``Retina.fisheye_image_to_hex_pxls`` for every image (s, e), through a
    CSR map (:class:`flycuda.vision.retina.PoolingMap` builds it from FlyGym's Retina)::
        acc = 0.0  (float64); for j in omm_ptr[o]..omm_ptr[o+1]-1, in order:
            acc += float64(pixels[s, e, omm_pixels[j], omm_channel[o]]) / omm_count[o]
        readouts[s, e, o, omm_column[o]] = float32(acc / 255);  readouts[s, e, o, 1 - omm_column[o]] = 0

    FlyGym's float64 operations in FlyGym's order, so with an exact map the result
    equals ``np.float32(retina.fisheye_image_to_hex_pxls(image))`` (what
    ``get_ommatidia_readouts`` returns) bit for bit.

    Args:
        pixels: uint8 [S, E, P, 3], contiguous: the RGB colors of the P raw pixels the
            map lists for each of S worlds' E eyes (P = H * W: whole images flattened).
        omm_ptr: int32 [O + 1], CSR offsets: 0, non-decreasing, ending at nnz.
        omm_pixels: int32 [nnz], each in [0, P): the entries of each ommatidium.
        omm_channel: int32 [O], each in [0, 3): the RGB channel ommatidium o reads.
        omm_column: int32 [O], each in [0, 2): where its value goes (FlyGym: 0 yellow, 1 pale).
        omm_count: int32 [O], each >= 1: its divisor (FlyGym: the pixels of its footprint).
        readouts: float32 [S, E, O, 2], written in place; any strides, no overlapping
            memory, not sharing memory with the inputs.

    The map's values are checked once per tensor (and again after an in-place change),
    on CUDA with small host copies, never while a CUDA graph is being captured; values
    that escape the check are clamped or skipped by the kernel, never read or written
    out of bounds.

    Raises:
        RuntimeError: wrong dtype, rank, shape, device, contiguity, aliasing or map
            values (naming the argument, what was expected and what was got);
            ``readouts`` is left untouched.
    """
    if _map_shapes_fit(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, readouts):
        check_offsets("pool_ommatidia", "omm_ptr", omm_ptr, omm_pixels.shape[0], "nnz = omm_pixels.size(0)", ref=readouts)
        check_index("pool_ommatidia", "omm_pixels", omm_pixels, pixels.shape[2], "P = pixels.size(2)", ref=readouts)
        check_index("pool_ommatidia", "omm_channel", omm_channel, 3, "RGB channels", ref=readouts)
        check_index("pool_ommatidia", "omm_column", omm_column, 2, "readout columns", ref=readouts)
        check_min("pool_ommatidia", "omm_count", omm_count, 1, ref=readouts)
    torch.ops.flycuda.pool_ommatidia.default(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count,
                                             readouts)


def _map_shapes_fit(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, readouts) -> bool:
    """Do the map's shapes fit the images and the readouts? Only then are its values
    checked here; otherwise the op's own shape check speaks first (as it does on the CPU)."""
    if pixels.dim() != 4 or readouts.dim() != 4 or omm_pixels.dim() != 1:
        return False
    S, E, O, columns = readouts.shape
    if columns != 2 or pixels.shape[:2] != (S, E) or pixels.shape[3] != 3 or pixels.dtype != torch.uint8:
        return False
    maps = (omm_ptr, omm_pixels, omm_channel, omm_column, omm_count)
    return (all(t.dtype == torch.int32 for t in maps) and omm_ptr.shape == (O + 1,)
            and all(t.shape == (O,) for t in maps[2:]))


@torch.library.register_fake("flycuda::pool_ommatidia")
def _pool_ommatidia_fake(pixels, omm_ptr, omm_pixels, omm_channel, omm_column, omm_count, readouts):
    op = "flycuda.pool_ommatidia"
    torch._check(readouts.dim() == 4 and readouts.shape[3] == 2 and readouts.dtype == torch.float32,
                 lambda: f"{op}: argument 'readouts' must be float32 [S, E, O, 2], got {readouts.dtype} {tuple(readouts.shape)}")
    torch._check(pixels.dim() == 4 and pixels.dtype == torch.uint8 and pixels.shape[3] == 3
                 and tuple(pixels.shape[:2]) == tuple(readouts.shape[:2]),
                 lambda: f"{op}: argument 'pixels' must be uint8 [S, E, P, 3] with [S, E] = {list(readouts.shape[:2])}, got {pixels.dtype} {tuple(pixels.shape)}")
    O = readouts.shape[2]
    for name, t, n in (("omm_ptr", omm_ptr, O + 1), ("omm_pixels", omm_pixels, None), ("omm_channel", omm_channel, O),
                       ("omm_column", omm_column, O), ("omm_count", omm_count, O)):
        torch._check(t.dtype == torch.int32 and t.dim() == 1 and (n is None or t.shape[0] == n),
                     lambda: f"{op}: argument '{name}' must be int32 [{n if n is not None else 'nnz'}], got {t.dtype} {tuple(t.shape)}")
    check_same_device("pool_ommatidia", "readouts", readouts, pixels=pixels, omm_ptr=omm_ptr, omm_pixels=omm_pixels,
                       omm_channel=omm_channel, omm_column=omm_column, omm_count=omm_count)
    return None
