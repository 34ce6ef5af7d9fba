"""Hierarchical all-reduce written by hand on torch.distributed subgroups, with a byte count per link.

Ranks are numbered group by group (node by node, as torchrun numbers them): with g ranks per
group and m groups, rank r sits in group r // g at local index r % g. Three phases:

1. reduce-scatter inside each group (ring over the g ranks): local rank i ends up owning chunk
   (i+1) % g of the buffer, summed over its group;
2. all-reduce across groups (ring over the m ranks that share a local index): each owned chunk
   is summed over every group — the only phase whose sends cross the slow link;
3. all-gather inside each group: every rank gets every chunk.

A flat ring (`ring_all_reduce` over all N ranks) is the baseline. Every send goes through a
`Link`, which counts the bytes sent inside a group and across groups, and — when given a
`SharedUplink` — holds each cross-group send until an emulated uplink of the chosen rate has
carried it (a token bucket shared by all ranks of the group; labelled "emulated" everywhere).
That hook is why the ring's loop is written again here rather than taken from labkit.allreduce.ring
(notebook 5's ring, which counts bytes per rank but cannot tell a fast link from a slow one); the
schedule — which chunk each rank sends and receives at each step, and how a buffer is cut into chunks
— is the one every ring in labkit uses (labkit.collectives.ring_chunks, chunk_bounds).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import struct
import time
from pathlib import Path

from ..collectives import AG, RS, chunk_bounds, ring_chunks


@dataclasses.dataclass(frozen=True)
class Layout:
    """m groups of g consecutive ranks."""

    world_size: int
    group_size: int

    def __post_init__(self):
        if self.group_size < 1 or self.world_size < 1 or self.world_size % self.group_size:
            raise ValueError(f"world size {self.world_size} is not a multiple of the group size {self.group_size}")

    @property
    def groups(self) -> int:
        return self.world_size // self.group_size

    def group_of(self, rank: int) -> int:
        return rank // self.group_size

    def local_of(self, rank: int) -> int:
        return rank % self.group_size

    def intra_ranks(self, group: int) -> list[int]:
        return [group * self.group_size + j for j in range(self.group_size)]

    def inter_ranks(self, local: int) -> list[int]:
        return [i * self.group_size + local for i in range(self.groups)]

    def crosses(self, src: int, dst: int) -> bool:
        return self.group_of(src) != self.group_of(dst)


class SharedUplink:
    """An emulated uplink of `rate_Bps` bytes/s per direction, shared by the processes of one group.

    A token bucket in its virtual-time form (GCRA): the file holds the time at which the link
    will have carried everything queued so far; a send of n bytes books n / rate seconds after
    that (or after now, less the burst allowance) and sleeps until its last byte has left.
    The file is locked with flock, so every process of the group queues on the same link.
    """

    #: Burst allowance: 64 KiB may go at once, as a NIC's queue would take them.
    BURST_BYTES = 64 * 1024

    def __init__(self, path: str | os.PathLike, rate_Bps: float):
        if rate_Bps <= 0:
            raise ValueError(f"uplink rate must be positive, got {rate_Bps} B/s")
        self.path, self.rate = Path(path), float(rate_Bps)
        self.waited_s = 0.0

    @staticmethod
    def create(path: str | os.PathLike) -> None:
        Path(path).write_bytes(struct.pack("d", 0.0))

    def send(self, nbytes: int) -> None:
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                (free_at,) = struct.unpack("d", f.read(8))
                now = time.monotonic()  # system-wide clock: the same in every process
                start = max(free_at, now - self.BURST_BYTES / self.rate)
                done = start + nbytes / self.rate
                f.seek(0)
                f.write(struct.pack("d", done))
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
        delay = done - time.monotonic()
        if delay > 0:
            self.waited_s += delay
            time.sleep(delay)


class Link:
    """Point-to-point exchanges between ranks, counting bytes sent inside and across groups."""

    def __init__(self, layout: Layout, rank: int, uplink: SharedUplink | None = None):
        self.layout, self.rank, self.uplink = layout, rank, uplink
        self.sent = {"intra": 0, "inter": 0}

    def reset(self) -> None:
        self.sent = {"intra": 0, "inter": 0}

    def exchange(self, send_buf, dst: int, recv_buf, src: int, group=None) -> None:
        """Send send_buf to global rank dst while receiving recv_buf from global rank src."""
        import torch.distributed as dist

        rreq = dist.irecv(recv_buf, src=src, group=group) if recv_buf.numel() else None
        if send_buf.numel():
            nbytes = send_buf.numel() * send_buf.element_size()
            kind = "inter" if self.layout.crosses(self.rank, dst) else "intra"
            if kind == "inter" and self.uplink is not None:
                self.uplink.send(nbytes)
            dist.isend(send_buf, dst=dst, group=group).wait()
            self.sent[kind] += nbytes
        if rreq is not None:
            rreq.wait()


def _split(flat, n: int):
    """n contiguous views of `flat`, cut as every ring in labkit cuts a buffer (collectives.chunk_bounds)."""
    return [flat[a:b] for a, b in chunk_bounds(flat.numel(), n)]


def ring_reduce_scatter(chunks, ranks: list[int], me: int, link: Link, group=None) -> int:
    """Ring reduce-scatter over `ranks` (in ring order); returns the index of the chunk `me` now owns."""
    import torch

    n, i = len(ranks), ranks.index(me)
    nxt, prv = ranks[(i + 1) % n], ranks[(i - 1) % n]
    scratch = torch.empty(max(c.numel() for c in chunks), dtype=chunks[0].dtype)
    for step in range(n - 1):
        send_idx, recv_idx = ring_chunks(RS, step, i, n)
        incoming = scratch[: chunks[recv_idx].numel()]
        link.exchange(chunks[send_idx], nxt, incoming, prv, group)
        chunks[recv_idx].add_(incoming)
    return (i + 1) % n  # after N−1 steps, position i holds the complete sum of chunk (i+1) mod N


def ring_all_gather(chunks, ranks: list[int], me: int, link: Link, group=None) -> None:
    """Ring all-gather over `ranks`, where rank at position i owns chunk (i+1) % n."""
    n, i = len(ranks), ranks.index(me)
    nxt, prv = ranks[(i + 1) % n], ranks[(i - 1) % n]
    for step in range(n - 1):
        send_idx, recv_idx = ring_chunks(AG, step, i, n)
        link.exchange(chunks[send_idx], nxt, chunks[recv_idx], prv, group)


def ring_all_reduce(flat, ranks: list[int], me: int, link: Link, group=None) -> None:
    """In-place sum over `ranks`: reduce-scatter then all-gather, each rank sending 2(n−1)/n of the buffer."""
    if len(ranks) == 1:
        return
    chunks = _split(flat, len(ranks))
    ring_reduce_scatter(chunks, ranks, me, link, group)
    ring_all_gather(chunks, ranks, me, link, group)


@dataclasses.dataclass
class Groups:
    """This rank's subgroups: the ranks of its own group, and the ranks across groups at its local index."""

    layout: Layout
    rank: int
    intra: object  # torch.distributed ProcessGroup
    inter: object

    @property
    def intra_ranks(self) -> list[int]:
        return self.layout.intra_ranks(self.layout.group_of(self.rank))

    @property
    def inter_ranks(self) -> list[int]:
        return self.layout.inter_ranks(self.layout.local_of(self.rank))


def make_groups(layout: Layout) -> Groups:
    """Create every intra-group and inter-group subgroup (all ranks must call this, in the same order)."""
    import torch.distributed as dist

    rank = dist.get_rank()
    if dist.get_world_size() != layout.world_size:
        raise ValueError(f"layout is for {layout.world_size} ranks but the job has {dist.get_world_size()}")
    intra = inter = None
    for grp in range(layout.groups):
        pg = dist.new_group(layout.intra_ranks(grp))
        if layout.group_of(rank) == grp:
            intra = pg
    for local in range(layout.group_size):
        pg = dist.new_group(layout.inter_ranks(local))
        if layout.local_of(rank) == local:
            inter = pg
    return Groups(layout, rank, intra, inter)


def hierarchical_all_reduce(tensor, groups: Groups, link: Link) -> None:
    """In-place sum of `tensor` over all ranks: intra reduce-scatter → inter all-reduce → intra all-gather."""
    if not tensor.is_contiguous():
        raise ValueError("hierarchical_all_reduce needs a contiguous tensor (call .contiguous() first)")
    flat = tensor.view(-1)
    chunks = _split(flat, groups.layout.group_size)
    me = groups.rank
    if len(groups.intra_ranks) > 1:
        own = ring_reduce_scatter(chunks, groups.intra_ranks, me, link, groups.intra)
    else:
        own = 0
    ring_all_reduce(chunks[own], groups.inter_ranks, me, link, groups.inter)
    if len(groups.intra_ranks) > 1:
        ring_all_gather(chunks, groups.intra_ranks, me, link, groups.intra)


def flat_all_reduce(tensor, groups: Groups, link: Link) -> None:
    """In-place sum over all ranks with one flat ring in rank order (the baseline)."""
    ring_all_reduce(tensor.view(-1), list(range(groups.layout.world_size)), groups.rank, link, None)
