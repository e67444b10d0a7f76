"""flycuda.record_chunk vs flycuda.reference (vectorized) and reference.grid (emulated):
a ring of B chunks of C rows, any source columns, at the device step counter."""

import pytest
import torch
from helpers.devices import cpu_and_cuda, poison_like, strided_view

import flycuda
from flycuda import reference

# (W, N, D, B, C): odd sizes, one-row chunks, one chunk, more threads than a block
SHAPES = [(1, 1, 1, 1, 1), (3, 8, 7, 2, 5), (33, 49, 42, 2, 3), (1000, 73, 42, 2, 4), (5, 96, 16, 3, 1)]


def _chunks(B, W, C, D, device):
    return poison_like(torch.empty(B, W, C, D)).to(device)


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("step_value", [-1, 0, 1, 2, 3, 6, 8, 9, 31, 10 ** 9])
@pytest.mark.parametrize("cols_dtype", [torch.int32, torch.int64])
def test_matches_reference(device, shape, every, step_value, cols_dtype):
    W, N, D, B, C = shape
    source = torch.randn(W, N).to(device)
    columns = torch.randint(0, N, (D,)).to(device=device, dtype=cols_dtype)
    chunks = _chunks(B, W, C, D, device)
    expected = chunks.cpu().clone()
    reference.record_chunk(source.cpu(), columns.cpu(), expected, flycuda.new_step_counter("cpu", step_value),
                           every=every)
    flycuda.record_chunk(source, columns, chunks, flycuda.new_step_counter(device, step_value), every=every)
    assert torch.equal(chunks.cpu(), expected)  # a pure copy: bit for bit
    if step_value >= 0 and step_value % every == 0:  # the sample landed where the ring puts it
        k = step_value // every
        assert torch.equal(chunks.cpu()[(k // C) % B, :, k % C], source.cpu()[:, columns.long().cpu()])
    if W * D <= 64:  # tiny: the grid emulator too (a partial last block with 4-thread blocks)
        grid = _chunks(B, W, C, D, "cpu")
        want = grid.clone()
        reference.record_chunk(source.cpu(), columns.cpu(), want, flycuda.new_step_counter("cpu", step_value),
                               every=every)
        reference.grid.record_chunk(source.cpu(), columns.cpu(), grid,
                                    flycuda.new_step_counter("cpu", step_value), every=every, threads=4)
        assert torch.equal(grid, want)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_a_run_through_the_ring(device):
    """every=2 over 29 steps with B=2 chunks of 3 rows: after each step the ring holds
    exactly the samples of the last two chunks, and a chunk read out when it fills
    (as the recorder does) equals the source at its steps."""
    W, N, D, B, C, every = 4, 9, 6, 2, 3, 2
    cols = torch.tensor([8, 0, 3, 3, 1, 5]).to(device)
    chunks = _chunks(B, W, C, D, device)
    step = flycuda.new_step_counter(device, 0)
    seen, out = [], []
    for s in range(29):
        source = torch.randn(W, N).to(device)
        flycuda.record_chunk(source, cols, chunks, step, every=every)
        if s % every == 0:
            seen.append(source.cpu()[:, cols.cpu()])
            k = s // every
            if k % C == C - 1:  # chunk k // C is full: read it out
                out.append(chunks.cpu()[(k // C) % B].clone())
        flycuda.advance_step(step)
    got = torch.cat(out, dim=1)
    assert torch.equal(got, torch.stack(seen[:got.shape[1]], dim=1))
    assert got.shape[1] == 15  # samples 0..14 (steps 0, 2, .., 28): chunks 0..4 filled


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("kind", ["row_stride", "transposed"])
def test_strided_source_and_chunks(device, kind):
    W, N, D, B, C = 21, 30, 11, 2, 4
    source, _ = strided_view(W, N, kind, device)
    source.copy_(torch.randn(W, N))
    cols = torch.randint(0, N, (D,)).to(device)
    parent = poison_like(torch.empty(C, D, B, W + 3)).to(device)
    chunks = parent[..., 1:1 + W].permute(2, 3, 0, 1)  # [B, W, C, D], non-contiguous
    before = parent.cpu().clone()
    flycuda.record_chunk(source, cols, chunks, flycuda.new_step_counter(device, 6), every=1)  # k=6: slot 1, row 2
    expected = before.clone()
    reference.record_chunk(source.cpu(), cols.cpu(), expected[..., 1:1 + W].permute(2, 3, 0, 1),
                           flycuda.new_step_counter("cpu", 6))
    assert torch.equal(parent.cpu(), expected)
    assert not torch.equal(parent.cpu(), before)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_record_qpos_is_the_one_chunk_case(device):
    """record_qpos (history [W, R, D]) equals record_chunk into [1, W, R, D] while k < R,
    and writes nothing past R where record_chunk wraps."""
    W, N, D, R = 5, 12, 7, 4
    qpos, adrs = torch.randn(W, N).to(device), torch.randint(0, N, (D,)).to(device)
    for s in range(0, 7):
        hist = poison_like(torch.empty(W, R, D)).to(device)
        ring = hist.clone().unsqueeze(0)
        before = hist.clone()
        flycuda.record_qpos(qpos, adrs, hist, flycuda.new_step_counter(device, s))
        flycuda.record_chunk(qpos, adrs, ring, flycuda.new_step_counter(device, s))
        if s < R:
            assert torch.equal(hist, ring[0])
        else:
            assert torch.equal(hist, before) and not torch.equal(ring[0], before)


BAD = [
    ("chunks float64", {"chunks": lambda a: a["chunks"].double()}, {}, RuntimeError, r"'chunks' must have dtype Float, got Double"),
    ("chunks 3-D", {"chunks": lambda a: a["chunks"][0]}, {}, RuntimeError, r"'chunks' must be a 4-D tensor, got 3-D"),
    ("chunks no rows", {"chunks": lambda a: a["chunks"][:, :, :0]}, {}, RuntimeError, r"'chunks' must be \[B, W, C, D\] with B >= 1 chunks of C >= 1 rows, got shape \[2, 4, 0, 3\]"),
    ("chunks expanded", {"chunks": lambda a: a["chunks"][:1].expand(2, 4, 5, 3)}, {}, RuntimeError, r"'chunks' must not have overlapping memory"),
    ("source worlds", {"source": lambda a: a["source"][:3]}, {}, RuntimeError, r"'source' must have size 4 \(worlds\) in dim 0, got shape \[3, 8\]"),
    ("source int", {"source": lambda a: a["source"].int()}, {}, RuntimeError, r"'source' must have dtype Float, got Int"),
    ("source 3-D", {"source": lambda a: a["source"][None]}, {}, RuntimeError, r"'source' must be a 2-D tensor \[W, N\], got 3-D"),
    ("columns out of range", {"columns": lambda a: torch.tensor([7, 8, 1], device=a["chunks"].device)}, {}, RuntimeError, r"'columns' must hold indices in \[0, 8\) .*got columns\[1\] = 8"),
    ("columns negative", {"columns": lambda a: torch.tensor([7, -1, 1], device=a["chunks"].device)}, {}, RuntimeError, r"'columns' must hold indices in \[0, 8\)"),
    ("columns float", {"columns": lambda a: a["columns"].float()}, {}, RuntimeError, r"'columns' must have dtype Int or Long, got Float"),
    ("columns wrong length", {"columns": lambda a: a["columns"][:1]}, {}, RuntimeError, r"'columns' must have shape \[3\], got \[1\]"),
    ("step 0-D", {"step": lambda a: a["step"][0]}, {}, RuntimeError, r"'step' must be a contiguous int64 step counter of shape \[1\] or \[2\] .*, got Long of shape \[\]"),
    ("every 0", {}, {"every": 0}, ValueError, r"'every' must be >= 1, got 0"),
]


def _good(device):
    return dict(source=torch.randn(4, 8).to(device), columns=torch.tensor([7, 1, 1]).to(device),
                chunks=poison_like(torch.empty(2, 4, 5, 3)).to(device), step=flycuda.new_step_counter(device, 2))


@pytest.mark.parametrize("device", cpu_and_cuda())
@pytest.mark.parametrize("name,change,kw,exc,msg", BAD, ids=[c[0] for c in BAD])
def test_bad_input(device, name, change, kw, exc, msg):
    a = _good(device)
    for k, f in change.items():
        a[k] = f(a)
    before = a["chunks"].clone()
    with pytest.raises(exc, match=r"flycuda\.record_chunk: argument " + msg):
        flycuda.record_chunk(a["source"], a["columns"], a["chunks"], a["step"], **kw)
    assert torch.equal(a["chunks"], before)


@pytest.mark.parametrize("device", cpu_and_cuda())
def test_outputs_must_not_alias_inputs(device):
    buf = torch.randn(2, 4, 5, 3).to(device)
    cols, step = torch.tensor([0, 1, 2]).to(device), flycuda.new_step_counter(device, 0)
    before = buf.clone()
    with pytest.raises(RuntimeError, match=r"argument 'chunks' must not share memory with argument 'source'"):
        flycuda.record_chunk(buf[1, :, 0, :], cols, buf, step)
    assert torch.equal(buf, before)


@pytest.mark.needs_cuda
def test_device_mismatch():
    a = _good("cuda")
    with pytest.raises(RuntimeError, match=r"'source' must be on cuda:0 \(the device of 'chunks'\), got cpu"):
        flycuda.record_chunk(a["source"].cpu(), a["columns"], a["chunks"], a["step"])


@pytest.mark.needs_cuda
def test_cuda_graph_replays_the_ring():
    """Captured once, replayed with the counter advancing: the ring fills as in eager mode."""
    W, N, D, B, C = 7, 10, 5, 2, 3
    source = torch.randn(W, N, device="cuda")
    cols = torch.randint(0, N, (D,), device="cuda")
    chunks, eager = _chunks(B, W, C, D, "cuda"), None
    eager = chunks.clone()
    step, step_e = flycuda.new_step_counter("cuda"), flycuda.new_step_counter("cuda")
    s = torch.cuda.Stream()
    flycuda.record_chunk(source, cols, chunks, step)  # checks cached before capture
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            flycuda.record_chunk(source, cols, chunks, step)
            flycuda.advance_step(step)
    for _ in range(9):
        g.replay()
        flycuda.record_chunk(source, cols, eager, step_e)
        flycuda.advance_step(step_e)
    torch.cuda.synchronize()
    assert torch.equal(chunks, eager)


def test_opcheck():
    args = (torch.randn(5, 9), torch.tensor([1, 4, 4, 0]), torch.randn(2, 5, 3, 4),
            flycuda.new_step_counter("cpu", 2), 1)
    torch.library.opcheck(torch.ops.flycuda.record_chunk.default, args)
