"""All-reduce by hand on torch.distributed point-to-point: ring, naive, binomial tree, recursive doubling.

Each function sums a 1-D contiguous tensor across the ranks of `group` *in place* (like
`dist.all_reduce`) and returns the bytes this rank sent, so the traffic can be checked against
the cost models. They run inside a process group — start them with labkit.launch.launch (gloo
on CPU, NCCL on GPUs).

Two rings: `ring_allreduce_simple_`, the textbook one (read it first), and `ring_allreduce_`, the
same schedule with every receive posted up front and segments forwarded as they arrive. Both are
written for speed as well as clarity: chunks are views into the caller's tensor (no copies),
scratch space is allocated once and reused by every call (`workspace`), and received data is
added in place.
"""

from __future__ import annotations

from ..collectives import RS, chunk_bounds, ring_chunks, ring_steps

#: Scratch buffers kept between calls, one per (device, dtype), grown on demand: allocating tens of
#: MiB on every call would add page faults (and zeroing by the kernel) to every timed all-reduce.
_WORKSPACE: dict = {}


def workspace(numel: int, like, slot: int = 0):
    """A scratch tensor of `numel` elements with `like`'s dtype and device, reused across calls.

    `slot` picks independent buffers (the pipelined ring uses two). Not thread-safe; one per rank.
    """
    import torch

    key = (str(like.device), like.dtype, slot)
    buf = _WORKSPACE.get(key)
    if buf is None or buf.numel() < numel:
        buf = torch.empty(max(numel, 1), dtype=like.dtype, device=like.device)
        _WORKSPACE[key] = buf
    return buf[:numel]


class InjectedFailure(RuntimeError):
    """Raised on purpose by `fail_after_step` (teaching and tests: a rank dies mid-collective)."""


def _group_info(group):
    import torch.distributed as dist

    rank, n = dist.get_rank(group), dist.get_world_size(group)
    if group is None:
        return rank, n, (lambda r: r)
    return rank, n, (lambda r: dist.get_global_rank(group, r))


def _exchange(send_t, dst: int, recv_t, src: int, group=None) -> None:
    """Send `send_t` to dst while receiving `recv_t` from src; return when both are done.

    gloo runs a posted isend and irecv concurrently. NCCL runs point-to-point calls one after another
    on a stream, so a ring of ranks that each "send, then receive" would wait for each other
    forever: there the pair is posted as one batch (dist.batch_isend_irecv), which NCCL starts
    together. (On gloo the batch only adds overhead, ~0.15 ms per call here.) Empty tensors — fewer
    elements than ranks — are skipped by both ends.
    """
    import torch.distributed as dist

    ops = []
    if send_t.numel():
        ops.append((dist.isend, send_t, dst))
    if recv_t.numel():
        ops.append((dist.irecv, recv_t, src))
    if _is_nccl(group):
        reqs = dist.batch_isend_irecv([dist.P2POp(op, t, peer, group) for op, t, peer in ops]) if ops else []
    else:
        reqs = [op(t, peer, group=group) for op, t, peer in ops]
    for req in reqs:
        req.wait()


def _is_nccl(group) -> bool:
    import torch.distributed as dist

    return dist.get_backend(group) == "nccl"


def _check_tensor(x):
    if x.dim() != 1 or not x.is_contiguous():
        raise ValueError(
            f"hand-written all-reduce needs a 1-D contiguous tensor, got shape {tuple(x.shape)} "
            f"(contiguous={x.is_contiguous()}); pass x.view(-1)"
        )


def ring_allreduce_simple_(x, group=None, *, fail_after_step: int | None = None) -> int:
    """Ring all-reduce (sum) of x in place: N−1 reduce-scatter steps, then N−1 all-gather steps.

    At every step each rank sends one chunk (1/N of x) to its right neighbour and receives one from
    its left: 2(N−1)/N·S bytes per rank in all. This is the textbook version: each step moves a
    whole chunk and only then adds it, so the network waits while the CPU adds and vice versa
    (`ring_allreduce_` pipelines the two). `fail_after_step=k` raises InjectedFailure after k steps
    (to show what a rank dying mid-collective does to the others).
    """
    _check_tensor(x)
    rank, n, glob = _group_info(group)
    if n == 1:
        return 0
    right, left = glob((rank + 1) % n), glob((rank - 1) % n)
    chunks = [x[a:b] for a, b in chunk_bounds(x.numel(), n)]  # views: no copies
    scratch = workspace(max(c.numel() for c in chunks), x)  # preallocated, reused by every step and call
    sent = 0
    for k, (phase, s) in enumerate(ring_steps(n)):
        if fail_after_step is not None and k == fail_after_step:
            raise InjectedFailure(f"injected failure after {k} of {2 * (n - 1)} ring steps ({phase})")
        send_c, recv_c = ring_chunks(phase, s, rank, n)
        out = chunks[send_c]
        # reduce-scatter receives into scratch and adds; all-gather receives straight into place.
        into = scratch[: chunks[recv_c].numel()] if phase == RS else chunks[recv_c]
        _exchange(out, right, into, left, group)  # send to the right while receiving from the left
        if phase == RS and into.numel():
            chunks[recv_c].add_(into)
        sent += out.numel() * x.element_size()
    return sent


#: Largest message the pipelined ring sends. Each message costs ~0.15 ms of CPU on gloo from
#: Python (measured here: CPU time per all-reduce grows by that much per extra segment), so
#: segments stay large; gloo's C++ ring affords 1 MiB (gloo/allreduce.h, kMaxSegmentSize).
SEGMENT_BYTES = 4 << 20


def ring_allreduce_(x, group=None, *, segment_bytes: int = SEGMENT_BYTES, fail_after_step: int | None = None) -> int:
    """Pipelined ring all-reduce (sum) of x in place: the same steps, bytes and additions as
    `ring_allreduce_simple_` (hence the same bits), with two changes that keep the links busy:

    1. **Every receive is posted up front**, before the first send. A message then lands straight
       in its place (reduce-scatter: its own slot of a preallocated scratch buffer; all-gather:
       its final place in x) instead of waiting for the receiver to get round to asking for it.
    2. **Segments are forwarded as soon as they are ready.** Chunks travel as segments of at most
       `segment_bytes`; the chunk a rank sends at step k+1 is always the one it received at step
       k, so each arriving segment is added (reduce-scatter) and sent on at once, while later
       segments are still on the wire.

    Posting an all-gather receive into chunk c while this rank still has to send chunk c during
    reduce-scatter is safe: the complete chunk that will land there is built from what we send,
    so it cannot arrive before our send has left.

    On NCCL this runs the simple ring: NCCL serialises separate point-to-point calls on a stream
    (so pre-posted receives would block the sends behind them) and pipelines inside every transfer.
    """
    import torch.distributed as dist

    _check_tensor(x)
    rank, n, glob = _group_info(group)
    if n == 1:
        return 0
    if _is_nccl(group):
        return ring_allreduce_simple_(x, group, fail_after_step=fail_after_step)
    if segment_bytes < x.element_size():
        raise ValueError(f"segment_bytes must hold at least one element ({x.element_size()} B), got {segment_bytes}")
    right, left = glob((rank + 1) % n), glob((rank - 1) % n)
    chunks = [x[a:b] for a, b in chunk_bounds(x.numel(), n)]  # views: no copies
    longest = chunks[0].numel()
    seg = max(1, min(segment_bytes // x.element_size(), longest))  # elements per segment
    steps = ring_steps(n)
    scratch = workspace((n - 1) * longest, x)  # one region per reduce-scatter step, allocated once

    def segments(c):  # (index, start, stop) of each segment of chunk c
        return [(j, a, min(a + seg, chunks[c].numel())) for j, a in enumerate(range(0, chunks[c].numel(), seg))]

    def tag(k, j):  # one tag per message: matching never depends on arrival order
        return k * (-(-longest // seg)) + j + 1

    def landing(k, a, b):  # where segment [a, b) of step k's chunk is received
        phase, s = steps[k]
        c = ring_chunks(phase, s, rank, n)[1]
        return scratch[k * longest + a : k * longest + b] if phase == RS else chunks[c][a:b]

    arrivals = []
    for k, (phase, s) in enumerate(steps):  # 1. every receive, posted now
        c = ring_chunks(phase, s, rank, n)[1]
        for j, a, b in segments(c):
            arrivals.append((k, j, c, a, b, dist.irecv(landing(k, a, b), left, group=group, tag=tag(k, j))))
    first = ring_chunks(*steps[0], rank, n)[0]
    sends = [dist.isend(chunks[first][a:b], right, group=group, tag=tag(0, j)) for j, a, b in segments(first)]
    for k, j, c, a, b, req in arrivals:  # 2. add and forward each segment as it arrives
        if fail_after_step is not None and k >= fail_after_step:
            raise InjectedFailure(f"injected failure after {k} of {len(steps)} ring steps ({steps[k][0]})")
        req.wait()
        if steps[k][0] == RS:
            chunks[c][a:b].add_(landing(k, a, b))  # local += received, in place
        if k + 1 < len(steps):
            sends.append(dist.isend(chunks[c][a:b], right, group=group, tag=tag(k + 1, j)))
    for req in sends:
        req.wait()
    sent_elements = sum(b - a for _, a, b in segments(first)) + sum(
        b - a for k, _, _, a, b, _ in arrivals if k + 1 < len(steps)
    )
    return sent_elements * x.element_size()


def naive_allreduce_(x, group=None, root: int = 0) -> int:
    """Gather everything to `root`, which adds it up, then send the sum back to every rank.

    The root receives (N−1)·S and sends (N−1)·S, one message after another: 2(N−1)·S/β.
    """
    import torch.distributed as dist

    _check_tensor(x)
    rank, n, glob = _group_info(group)
    if n == 1:
        return 0
    nbytes = x.numel() * x.element_size()
    if rank != root:
        dist.send(x, glob(root), group=group)
        dist.recv(x, glob(root), group=group)
        return nbytes
    scratch = workspace(x.numel(), x)
    for r in range(n):  # ranks in order, so every run adds in the same order
        if r != root:
            dist.recv(scratch, glob(r), group=group)
            x.add_(scratch)
    for r in range(n):
        if r != root:
            dist.send(x, glob(r), group=group)
    return (n - 1) * nbytes


def tree_allreduce_(x, group=None) -> int:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast back: 2·⌈log2 N⌉ rounds of S each.

    Round d of the reduce: ranks with bit d set (and lower bits clear) send their partial sum to
    rank − 2^d, which adds it. The broadcast replays the rounds backwards. Latency grows as log N,
    but each round moves the whole buffer (S), unpipelined.
    """
    import torch.distributed as dist

    _check_tensor(x)
    rank, n, glob = _group_info(group)
    if n == 1:
        return 0
    nbytes, sent = x.numel() * x.element_size(), 0
    scratch = workspace(x.numel(), x)
    d = 1
    while d < n:  # reduce
        if rank % (2 * d) == d:
            dist.send(x, glob(rank - d), group=group)
            sent += nbytes
        elif rank % (2 * d) == 0 and rank + d < n:
            dist.recv(scratch, glob(rank + d), group=group)
            x.add_(scratch)
        d *= 2
    while d > 1:  # broadcast, rounds in reverse
        d //= 2
        if rank % (2 * d) == 0 and rank + d < n:
            dist.send(x, glob(rank + d), group=group)
            sent += nbytes
        elif rank % (2 * d) == d:
            dist.recv(x, glob(rank - d), group=group)
    return sent


def recursive_doubling_allreduce_(x, group=None) -> int:
    """Recursive doubling: in round d, swap the whole buffer with rank XOR 2^d and add: log2 N rounds for N = 2^k.

    For N not a power of two, the ranks beyond the largest power of two p first hand their data to
    rank − p and get the result back at the end: two extra rounds, ⌊log2 N⌋ + 2 in all (MPICH does the same).
    """
    import torch.distributed as dist

    _check_tensor(x)
    rank, n, glob = _group_info(group)
    if n == 1:
        return 0
    nbytes, sent = x.numel() * x.element_size(), 0
    p = 1 << (n.bit_length() - 1)  # largest power of two <= n
    scratch = workspace(x.numel(), x)
    if rank >= p:
        dist.send(x, glob(rank - p), group=group)
        dist.recv(x, glob(rank - p), group=group)
        return nbytes
    if rank + p < n:
        dist.recv(scratch, glob(rank + p), group=group)
        x.add_(scratch)
    d = 1
    while d < p:
        peer = glob(rank ^ d)
        _exchange(x, peer, scratch, peer, group)
        sent += nbytes
        x.add_(scratch)  # a + b == b + a exactly in IEEE arithmetic, so both partners stay bit-identical
        d *= 2
    if rank + p < n:
        dist.send(x, glob(rank + p), group=group)
        sent += nbytes
    return sent


def library_allreduce_(x, group=None) -> int:
    """torch.distributed.all_reduce (gloo: its own ring; NCCL: ring/tree/NVLS by its tuner).

    Returns the bytes a ring would send (the library does not report its traffic)."""
    import torch.distributed as dist

    dist.all_reduce(x, group=group)
    n = dist.get_world_size(group)
    return int(2 * (n - 1) * x.numel() * x.element_size() // n)


#: Implementation name (as `labkit bench allreduce --impl` takes it) → function.
IMPLEMENTATIONS = {
    "ring": ring_allreduce_,
    "ring_simple": ring_allreduce_simple_,
    "library": library_allreduce_,
    "naive": naive_allreduce_,
    "tree": tree_allreduce_,
    "recursive_doubling": recursive_doubling_allreduce_,
}
