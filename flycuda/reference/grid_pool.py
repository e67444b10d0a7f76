"""Grid-emulator reference of pool_ommatidia: csrc/kernels/pool_ommatidia.cuh line by
line in Python (one call per CUDA thread; tiny inputs only)."""

from __future__ import annotations

import struct

import torch

from ..ops import launch_plan
from .grid import launch

__all__ = ["pool_ommatidia"]


def _f32(x: float) -> float:
    """static_cast<float>(double): round to nearest float32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _pool_one(p: dict, pixels, ptr, pix, chan, col, count, out, image: int, o: int) -> None:
    """``kernels::pool_one``: ommatidium o of image ``image`` (= s * E + e)."""
    c = int(chan[o])
    nnz, P = p["nnz"], p["P"]
    b, e = int(ptr[o]), int(ptr[o + 1])
    b = 0 if b < 0 else (nnz if b > nnz else b)
    e = b if e < b else (nnz if e > nnz else e)
    if c < 0 or c > 2:
        e = b
    n = float(int(count[o]))
    acc = 0.0  # Python floats are float64: the kernel's arithmetic exactly
    for j in range(b, e):
        q = int(pix[j])
        if 0 <= q < P:
            acc += float(int(pixels[image * P * 3 + q * 3 + c])) / n
    k = int(col[o])
    if k != 0 and k != 1:
        return
    s = image // p["E"]
    dst = s * p["out_s0"] + (image - s * p["E"]) * p["out_s1"] + o * p["out_s2"]
    out[dst + k * p["out_s3"]] = _f32(acc / 255.0)
    out[dst + (1 - k) * p["out_s3"]] = 0.0


def _kernel(ctx, p, pixels, ptr, pix, chan, col, count, out):
    """``kernels::pool_ommatidia_kernel``."""
    idx = ctx.blockIdx.x * ctx.blockDim.x + ctx.threadIdx.x
    if idx >= p["S"] * p["E"] * p["O"]:
        return
    image = idx // p["O"]
    _pool_one(p, pixels, ptr, pix, chan, col, count, out, image, idx - image * p["O"])


def pool_ommatidia(pixels: torch.Tensor, omm_ptr: torch.Tensor, omm_pixels: torch.Tensor,
                   omm_channel: torch.Tensor, omm_column: torch.Tensor, omm_count: torch.Tensor,
                   readouts: torch.Tensor, *, threads: int = launch_plan.POOL_THREADS) -> None:
    """Grid emulation of ``pool_ommatidia_kernel`` (one thread per (image, ommatidium)),
    as csrc/cuda/pool_ommatidia.cu launches it; same contract as
    ``flycuda.pool_ommatidia``, CPU tensors, no argument checks. ``threads`` is the
    block size (the .cuh's by default; small values exercise many blocks)."""
    S, E, O, _ = readouts.shape
    p = dict(S=S, E=E, O=O, P=pixels.shape[2], nnz=omm_pixels.shape[0])
    p.update({f"out_s{i}": readouts.stride(i) for i in range(4)})
    if S * E * O == 0:
        return
    flat_out = torch.as_strided(readouts, (readouts.untyped_storage().nbytes() // 4 - readouts.storage_offset(),),
                                (1,), readouts.storage_offset())
    out = flat_out.tolist()
    launch(_kernel, launch_plan.cdiv(S * E * O, threads), threads, p, pixels.reshape(-1).tolist(),
           omm_ptr.tolist(), omm_pixels.tolist(), omm_channel.tolist(), omm_column.tolist(), omm_count.tolist(), out)
    flat_out.copy_(torch.tensor(out, dtype=torch.float32))
