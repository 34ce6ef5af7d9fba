"""Copies staged through host memory ("P2P off"): chunked, double-buffered through pinned buffers.

`staged_copy` is written against injected copy functions so the CPU tests can drive it; `CudaStaging`
supplies them on GPUs (a D2H stream on the source, an H2D stream on the destination, per-slot events).
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..units import MiB, format_bytes

#: Chunk for host staging. Pinned H2D/D2H copies reach their plateau by a few MiB, and more chunks
#: cost more host-side issue time per staged copy; 8 MiB balances the two.
STAGING_CHUNK_BYTES = 8 * MiB


#: Staging buffers per direction: two, so chunk k+1 leaves the source while chunk k lands.
STAGING_SLOTS = 2


def chunks(nbytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """[(start, stop), ...] covering nbytes in chunk_bytes pieces (the last may be shorter)."""
    if nbytes < 1 or chunk_bytes < 1:
        raise ValueError(f"need nbytes ≥ 1 and chunk_bytes ≥ 1, got {nbytes}, {chunk_bytes}")
    return [(lo, min(lo + chunk_bytes, nbytes)) for lo in range(0, nbytes, chunk_bytes)]


def staged_copy(dst, src, buffers: Sequence, *, d2h: Callable, h2d: Callable, chunk_bytes: int | None = None) -> int:
    """Copy `src` (on one GPU) into `dst` (on another) through host staging buffers; returns the chunk count.

    Chunk k goes source → buffers[k % len(buffers)] (`d2h(buffer_view, src_view, slot)`), then
    buffer → destination (`h2d(dst_view, buffer_view, slot)`). The injected functions own the
    ordering: on a GPU, d2h waits until the slot's previous h2d has drained it and h2d waits for the
    d2h that filled it (CUDA events, `CudaStaging`), so chunk k+1 leaves the source while chunk k
    lands; on the CPU tests, plain copies in order. Tensors are flat byte (uint8) tensors.
    """
    n = int(src.numel() * src.element_size())
    if int(dst.numel() * dst.element_size()) != n:
        raise ValueError(f"source has {n} bytes but destination {dst.numel() * dst.element_size()}")
    if not buffers:
        raise ValueError("staging needs at least one host buffer")
    cap = min(int(b.numel()) for b in buffers)
    chunk = cap if chunk_bytes is None else int(chunk_bytes)
    if chunk > cap:
        raise ValueError(f"chunk of {format_bytes(chunk)} does not fit the {format_bytes(cap)} staging buffers")
    pieces = chunks(n, chunk)
    s, d = src.view(-1), dst.view(-1)
    for k, (lo, hi) in enumerate(pieces):
        slot = k % len(buffers)
        buf = buffers[slot][: hi - lo]
        d2h(buf, s[lo:hi], slot)
        h2d(d[lo:hi], buf, slot)
    return len(pieces)


class CudaStaging:
    """Host staging between two CUDA devices: pinned buffers, a D2H stream on the source, an H2D stream
    on the destination, and per-slot events so the two pipelines overlap without overwriting a slot
    that is still being read."""

    def __init__(
        self, src_device: int, dst_device: int, chunk_bytes: int = STAGING_CHUNK_BYTES, slots: int = STAGING_SLOTS
    ):
        import torch

        self.src_device, self.dst_device = src_device, dst_device
        self.chunk_bytes = chunk_bytes
        self.buffers = [torch.empty(chunk_bytes, dtype=torch.uint8, pin_memory=True) for _ in range(slots)]
        self.d2h_stream = torch.cuda.Stream(device=src_device)
        self.h2d_stream = torch.cuda.Stream(device=dst_device)
        self.filled = [torch.cuda.Event() for _ in range(slots)]  # recorded on d2h_stream
        self.drained = [torch.cuda.Event() for _ in range(slots)]  # recorded on h2d_stream
        self._drained_once = [False] * slots

    def d2h(self, buf, src_view, slot: int) -> None:
        import torch

        with torch.cuda.stream(self.d2h_stream):
            if self._drained_once[slot]:
                self.d2h_stream.wait_event(self.drained[slot])
            buf.copy_(src_view, non_blocking=True)
            self.filled[slot].record(self.d2h_stream)

    def h2d(self, dst_view, buf, slot: int) -> None:
        import torch

        with torch.cuda.stream(self.h2d_stream):
            self.h2d_stream.wait_event(self.filled[slot])
            dst_view.copy_(buf, non_blocking=True)
            self.drained[slot].record(self.h2d_stream)
            self._drained_once[slot] = True

    def copy(self, dst, src) -> int:
        return staged_copy(dst, src, self.buffers, d2h=self.d2h, h2d=self.h2d, chunk_bytes=self.chunk_bytes)

    @property
    def first_stream(self):
        return self.d2h_stream

    @property
    def last_stream(self):
        return self.h2d_stream
