"""The other collectives by hand on point-to-point messages — reduce-scatter, all-gather, all-to-all, broadcast — checked against the library.

Each works on a 1-D contiguous tensor in the default group and returns (result, bytes this rank sent):

  ring_reduce_scatter(x)       rank r gets the sum of chunk r     dist.reduce_scatter_tensor   bus factor (N−1)/N
  ring_all_gather(mine, count) every rank gets all chunks         dist.all_gather_into_tensor  bus factor (N−1)/N
  pairwise_all_to_all(x)       block j of rank r → rank j          dist.all_to_all_single       bus factor (N−1)/N
  binomial_broadcast(x, root)  in place, ⌈log2 N⌉ rounds           dist.broadcast               bus factor 1

S follows nccl-tests (doc/PERFORMANCE.md): reduce-scatter and all-gather, the full N-chunk buffer; all-to-all, one
rank's send buffer; broadcast, the buffer. Chunks follow labkit.collectives.chunk_bounds, so N need not divide
the buffer (gloo's own all_gather and reduce_scatter need equal chunks: `check_worker` compares with an
all-reduce-based reference too). Style of picotron's cp_communications.py and the PyTorch tutorial
"Writing Distributed Applications with PyTorch": every ring step posts its send and its receive together.
"""

from __future__ import annotations

from ..collectives import bus_factor, chunk_bounds
from ..timing import time_collectives
from .ring import _exchange

#: Where each collective appears in training, and the source that says so (notebook 05 prints it).
WHERE_USED = [
    ("all_reduce", "DDP gradients; tensor parallel (row-parallel output forward, column-parallel input grad backward)",
     "PyTorch torch/nn/parallel/distributed.py; Megatron-LM core/tensor_parallel/mappings.py"),
    ("reduce_scatter", "FSDP / ZeRO: gradients after backward; sequence parallelism (replaces TP's all-reduce with this + all-gather)",
     "PyTorch fully_shard docstring; ZeRO arXiv:1910.02054; Megatron _ReduceScatterToSequenceParallelRegion"),
    ("all_gather", "FSDP / ZeRO-3: the sharded parameters before forward and again before backward; sequence parallelism",
     "PyTorch fully_shard docstring; Megatron _GatherFromSequenceParallelRegion"),
    ("alltoall", "MoE expert parallel: token dispatch and combine",
     "Megatron mappings.py _AllToAll → torch.distributed.all_to_all_single"),
    ("broadcast", "DDP start-up (rank 0's weights to every replica) and buffers every step",
     "PyTorch distributed.py: 'Sync params and buffers' (_sync_module_states)"),
]  # fmt: skip


def where_used(world_size: int = 8):
    """Collective, bus factor at `world_size` (nccl-tests PERFORMANCE.md, labkit.collectives.bus_factor), where used."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"collective": op, f"bus factor (N = {world_size})": round(bus_factor(op, world_size), 4),
             "where it appears": where, "source": src}
            for op, where, src in WHERE_USED
        ]
    )  # fmt: skip


def ring_reduce_scatter(x):
    """Step s = 0..N−2: send my partial sum of chunk (r−s−1) mod N to r+1, receive chunk (r−s−2) mod N from r−1
    and add my contribution; after N−1 steps the chunk received last is chunk r, complete."""
    import torch
    import torch.distributed as dist

    r, n = dist.get_rank(), dist.get_world_size()
    b = chunk_bounds(x.numel(), n)
    if n == 1:
        return x.clone(), 0
    acc = x.clone()  # partial sums travel through this copy; x is left untouched
    scratch = torch.empty(max(e - s for s, e in b), dtype=x.dtype, device=x.device)
    sent = 0
    for s in range(n - 1):
        cs, cr = (r - s - 1) % n, (r - s - 2) % n
        out, into = acc[b[cs][0] : b[cs][1]], scratch[: b[cr][1] - b[cr][0]]
        _exchange(out, (r + 1) % n, into, (r - 1) % n)
        acc[b[cr][0] : b[cr][1]] += into
        sent += out.numel() * x.element_size()
    return acc[b[r][0] : b[r][1]].clone(), sent


def ring_all_gather(mine, count: int):
    """Step s = 0..N−2: send chunk (r−s) mod N to r+1, receive chunk (r−s−1) mod N from r−1 straight into place."""
    import torch
    import torch.distributed as dist

    r, n = dist.get_rank(), dist.get_world_size()
    b = chunk_bounds(count, n)
    out = torch.empty(count, dtype=mine.dtype, device=mine.device)
    out[b[r][0] : b[r][1]] = mine
    sent = 0
    for s in range(n - 1):
        cs, cr = (r - s) % n, (r - s - 1) % n
        send_t = out[b[cs][0] : b[cs][1]]
        _exchange(send_t, (r + 1) % n, out[b[cr][0] : b[cr][1]], (r - 1) % n)
        sent += send_t.numel() * mine.element_size()
    return out, sent


def pairwise_all_to_all(x):
    """Step k = 1..N−1: send block (r+k) mod N to rank r+k while receiving block r from rank r−k — a different
    partner every step. Block r stays (a local copy). Nothing can be added on the way: every byte has its own
    destination, so across nodes each GPU's share crosses the network whole, and with every NIC busy carrying
    its own GPU's share the bound is one NIC per GPU (nccl-tests#267). NCCL's PXN may hand a message to the GPU
    whose NIC is on the destination's rail, but that NIC carries its own GPU's share too: it keeps traffic on
    its rail, it adds no bandwidth. MoE systems cut the bytes instead (DeepEP: once per destination node)."""
    import torch
    import torch.distributed as dist

    r, n = dist.get_rank(), dist.get_world_size()
    if x.numel() % n:
        raise ValueError(f"all-to-all needs N equal blocks: {x.numel()} elements do not split into {n}")
    m = x.numel() // n
    out = torch.empty_like(x)
    out[r * m : (r + 1) * m] = x[r * m : (r + 1) * m]
    sent = 0
    for k in range(1, n):
        dst, src = (r + k) % n, (r - k) % n
        _exchange(x[dst * m : (dst + 1) * m], dst, out[src * m : (src + 1) * m], src)
        sent += m * x.element_size()
    return out, sent


def binomial_broadcast(x, root: int = 0):
    """In place: in the round with distance d, every rank holding the data sends it d ranks ahead (relative to
    the root): ⌈log2 N⌉ rounds, the root sends the whole buffer ⌈log2 N⌉ times. (NCCL pipelines a broadcast
    along a chain instead, approaching the bus-factor-1 bound S/β.)"""
    import torch.distributed as dist

    r, n = dist.get_rank(), dist.get_world_size()
    v, d, sent = (r - root) % n, 1, 0
    while d < n:
        d *= 2
    while d > 1:
        d //= 2
        if v % (2 * d) == 0 and v + d < n:
            dist.send(x, (root + v + d) % n)
            sent += x.numel() * x.element_size()
        elif v % (2 * d) == d:
            dist.recv(x, (root + v - d) % n)
    return x, sent


def _library(op: str, x, count: int):
    import torch
    import torch.distributed as dist

    n, r = dist.get_world_size(), dist.get_rank()
    if op == "reduce_scatter":
        out = torch.empty(count // n, dtype=x.dtype)
        getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)(out, x.clone())  # 2.13 renamed it
    elif op == "all_gather":
        out = torch.empty(count, dtype=x.dtype)
        getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(
            out, x[r * count // n : (r + 1) * count // n].clone()
        )
    elif op == "alltoall":
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
    else:
        out = x.clone()
        dist.broadcast(out, 0)
    return out


def _by_hand(op: str, x, count: int):
    import torch.distributed as dist

    b = chunk_bounds(count, dist.get_world_size())[dist.get_rank()]
    if op == "reduce_scatter":
        return ring_reduce_scatter(x)
    if op == "all_gather":
        return ring_all_gather(x[b[0] : b[1]].clone(), count)
    if op == "alltoall":
        return pairwise_all_to_all(x)
    return binomial_broadcast(x.clone(), 0)


def _reference(op: str, x, count: int):
    """What rank r must end with, from an all-reduce (exact on integer-valued inputs; works for any count)."""
    import torch
    import torch.distributed as dist

    n, r = dist.get_world_size(), dist.get_rank()
    b = chunk_bounds(count, n)
    if op == "reduce_scatter":
        full = x.clone()
        dist.all_reduce(full)
        return full[b[r][0] : b[r][1]]
    if op == "all_gather":
        full = torch.zeros_like(x)
        full[b[r][0] : b[r][1]] = x[b[r][0] : b[r][1]]
        dist.all_reduce(full)
        return full
    if op == "broadcast":
        full = x.clone() if r == 0 else torch.zeros_like(x)
        dist.all_reduce(full)
        return full
    return None  # all-to-all: compared with the library only


#: The collectives of labkit.collectives.OPS written by hand here (all_reduce is ring.py's; reduce and sendrecv are
#: not written by hand), in the order the notebook shows them; test_others checks they are a subset.
OPS = ("reduce_scatter", "all_gather", "alltoall", "broadcast")


def check_worker(rank: int, world_size: int, counts, timed_count: int = 0, repeats: int = 3) -> list[dict]:
    """Launch target: each op by hand vs its reference and the library on integer-valued float32 inputs (bit for
    bit), with the bytes this rank sent; then, if timed_count, both timed `repeats` times after a barrier.
    The library is compared only where gloo accepts the shape (N | count)."""
    import torch
    import torch.distributed as dist

    rows = []
    for count in counts:
        x = torch.randint(-1000, 1000, (count,), generator=torch.Generator().manual_seed(1000 * count + rank)).float()
        for op in OPS:
            if op == "alltoall" and count % world_size:
                continue
            got, sent = _by_hand(op, x, count)
            want = _reference(op, x, count)
            ok = want is None or torch.equal(got, want)
            if count % world_size == 0:
                ok = ok and torch.equal(got, _library(op, x, count))
            rows.append({"op": op, "count": count, "rank": rank, "matches": bool(ok), "bytes_sent": sent})
    if timed_count:
        x = torch.randint(-1000, 1000, (timed_count,)).float()
        for op in OPS:  # labkit's one timing loop for collectives: one warm-up, then a barrier before each call
            calls = {"by hand": lambda op=op: _by_hand(op, x, timed_count), "library": lambda op=op: _library(op, x, timed_count)}  # fmt: skip
            timed = time_collectives(calls, repeats=repeats, warmup=1, barrier=dist.barrier)
            rows += [{"op": op, "impl": impl, "count": timed_count, "rank": rank, "repeat": i, "seconds": s}
                     for impl, samples in timed.items() for i, s in enumerate(samples)]  # fmt: skip
    return rows


def expected_bytes(op: str, count: int, n: int, rank: int, itemsize: int = 4) -> int:
    """The bytes rank `rank` sends in the schedules above: every chunk but one (reduce-scatter: not chunk r;
    all-gather: not chunk r+1), (N−1) blocks (all-to-all), ⌈log2 N⌉-style tree sends (broadcast)."""
    sizes = [(e - s) * itemsize for s, e in chunk_bounds(count, n)]
    S = count * itemsize
    if op == "reduce_scatter":
        return S - sizes[rank]
    if op == "all_gather":
        return S - sizes[(rank + 1) % n]
    if op == "alltoall":
        return (n - 1) * S // n
    d = 1
    while d < n:
        d *= 2
    sends = 0
    while d > 1:  # the binomial broadcast from root 0: count the rounds in which this rank sends
        d //= 2
        sends += rank % (2 * d) == 0 and rank + d < n
    return sends * S


def summary(rows, world_size: int):
    """Per op: matches everywhere, total bytes / S (must be N−1 for all four), the bus factor; and, where timed,
    the median over repeats of the slowest rank's time, by hand vs library, with algbw and busbw."""
    import pandas as pd

    f = pd.DataFrame(rows)
    checks = f[f["matches"].notna()] if "matches" in f else f.iloc[0:0]
    timed = f[f["seconds"].notna()] if "seconds" in f else f.iloc[0:0]
    out = []
    for op, g in checks.groupby("op", sort=False):
        big = g[g["count"] == g["count"].max()]
        row = {"collective": op, "N": world_size, "all match": bool(g["matches"].all()),
               "bytes sent, all ranks ÷ S": big.bytes_sent.sum() / (4 * big["count"].iloc[0]),
               "bus factor": round(bus_factor(op, world_size), 4)}  # fmt: skip
        t = timed[timed.op == op]
        for impl, h in t.groupby("impl"):
            sec = h.groupby("repeat").seconds.max().median()  # a collective is as slow as its slowest rank
            S = 4 * h["count"].iloc[0]
            row[f"{impl}: busbw (GB/s)"] = S / sec / 1e9 * bus_factor(op, world_size)
        out.append(row)
    return pd.DataFrame(out)


class OthersRun:
    """Notebook 05's run of the four collectives by hand on gloo: the summary table, checked against the schedule."""

    experiment = "others"

    def __init__(self, rows, world_size: int, timed_count: int, source: str):
        self.rows, self.world_size, self.timed_count, self.source = rows, world_size, timed_count, source
        self.table = summary(rows, world_size)

    def report(self):
        return self.table.round(4)

    def checks(self) -> dict:
        n, rows = self.world_size, self.rows
        return {
            "others_by_hand_match_library": bool(self.table["all match"].all()),
            "others_bytes_sent_match_schedule": all(
                r["bytes_sent"] == expected_bytes(r["op"], r["count"], n, r["rank"]) for r in rows if "bytes_sent" in r
            ),
            "others_total_bytes_N_minus_1_times_S": bool((self.table["bytes sent, all ranks ÷ S"] == n - 1).all()),
        }

    def notes(self) -> dict:
        return {"ops": list(self.table.collective), "ranks": self.world_size, "timed_nbytes": 4 * self.timed_count}
