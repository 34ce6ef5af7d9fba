"""The message schedules of the all-reduce algorithms, round by round: costed with the α-β model and counted in bytes.

Each builder returns a list of rounds; a round is a list of messages (src, dst, nbytes) that run at the same
time. In every round a rank sends at most one message and receives at most one (full-duplex, single port), so
under the α-β model a round costs α + (largest message in it)/β and a schedule the sum of its rounds — the cost
model `labkit.models.allreduce_time` states, checked against it for every N, powers of two or not
(tests/test_schedules.py). The builders mirror the code they model:

  ring_rounds                      labkit.allreduce.ring.ring_allreduce_simple_ (chunks: collectives.chunk_bounds)
  naive_rounds                     ring.naive_allreduce_ (the root receives, then sends, one message at a time)
  binomial_tree_rounds             ring.tree_allreduce_
  recursive_doubling_rounds        ring.recursive_doubling_allreduce_ (ranks >= p pair with rank − p)
  mpich_recursive_doubling_rounds  MPICH allreduce_intra_recursive_doubling.c (even ranks < 2·rem fold into rank+1)

`double_binary_tree_bytes` ports NCCL's double binary tree (src/graph/trees.cc, ncclGetBtree/ncclGetDtree, NCCL
v2.30.7) to count what each rank sends: NCCL pipelines it, so only bytes are counted, not rounds.
"""

from __future__ import annotations

import math

from ..collectives import chunk_bounds


def ring_rounds(nbytes: int, n: int) -> list[list[tuple]]:
    """Reduce-scatter (rank r sends chunk (r − s) mod N at step s), then all-gather (chunk (r + 1 − s) mod N)."""
    if n == 1:
        return []
    c = [b - a for a, b in chunk_bounds(nbytes, n)]
    rs = [[(r, (r + 1) % n, c[(r - s) % n]) for r in range(n)] for s in range(n - 1)]
    ag = [[(r, (r + 1) % n, c[(r + 1 - s) % n]) for r in range(n)] for s in range(n - 1)]
    return rs + ag


def naive_rounds(nbytes: int, n: int, root: int = 0) -> list[list[tuple]]:
    others = [r for r in range(n) if r != root]
    return [[(r, root, nbytes)] for r in others] + [[(root, r, nbytes)] for r in others]


def binomial_tree_rounds(nbytes: int, n: int) -> list[list[tuple]]:
    """Reduce with distance d = 1, 2, 4, ... to rank 0, then broadcast replaying the rounds backwards."""
    rounds, d = [], 1
    while d < n:
        rounds.append([(r, r - d, nbytes) for r in range(n) if r % (2 * d) == d])
        d *= 2
    while d > 1:
        d //= 2
        rounds.append([(r, r + d, nbytes) for r in range(n) if r % (2 * d) == 0 and r + d < n])
    return [rnd for rnd in rounds if rnd]


def recursive_doubling_rounds(nbytes: int, n: int) -> list[list[tuple]]:
    """p = largest power of two ≤ N; ranks ≥ p hand their buffer to rank − p first and get the result back
    last; the p others swap whole buffers with rank XOR d, d = 1, 2, ..., p/2: ⌊log2 N⌋ (+ 2 if N ≠ p) rounds."""
    if n == 1:
        return []
    p = 1 << (n.bit_length() - 1)
    rounds = [[(r, r - p, nbytes) for r in range(p, n)]] if n > p else []
    d = 1
    while d < p:
        rounds.append([(r, r ^ d, nbytes) for r in range(p)])
        d *= 2
    if n > p:
        rounds.append([(r - p, r, nbytes) for r in range(p, n)])
    return rounds


def mpich_recursive_doubling_rounds(nbytes: int, n: int) -> list[list[tuple]]:
    """MPICH's pairing: rem = N − p; even ranks < 2·rem send to rank+1 and sit out until the end."""
    if n == 1:
        return []
    p = 1 << (n.bit_length() - 1)
    rem = n - p
    real = lambda nr: nr * 2 + 1 if nr < rem else nr + rem  # MPICH: newdst*2+1 or newdst+rem
    rounds = [[(r, r + 1, nbytes) for r in range(0, 2 * rem, 2)]] if rem else []
    mask = 1
    while mask < p:
        rounds.append([(real(nr), real(nr ^ mask), nbytes) for nr in range(p)])
        mask <<= 1
    if rem:
        rounds.append([(r, r - 1, nbytes) for r in range(1, 2 * rem, 2)])
    return rounds


def single_port(rounds) -> bool:
    """Every round: each rank sends at most once and receives at most once, never to itself."""
    for rnd in rounds:
        srcs, dsts = [m[0] for m in rnd], [m[1] for m in rnd]
        if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or any(a == b for a, b, _ in rnd):
            return False
    return True


def schedule_time(rounds, latency_s: float, bandwidth_Bps: float) -> float:
    """α-β cost of a round-synchronous schedule: the sum over rounds of α + largest message / β."""
    return sum(latency_s + max(m[2] for m in rnd) / bandwidth_Bps for rnd in rounds if rnd)


def bytes_sent(rounds, n: int) -> list[int]:
    out = [0] * n
    for rnd in rounds:
        for src, _, nbytes in rnd:
            out[src] += nbytes
    return out


def all_reduces(builder, n: int) -> bool:
    """Run a whole-buffer schedule (naive, tree, recursive doubling) on symbolic inputs — each rank's partial
    sum is the multiset of contributions it holds — and say whether every rank ends with each rank's exactly
    once. A receive adds when the two partial sums are disjoint, replaces when the incoming one covers the
    receiver's (a broadcast), and fails otherwise (a contribution would be counted twice)."""
    state = [{r: 1} for r in range(n)]
    for rnd in builder(1, n):
        snap = [dict(s) for s in state]
        for src, dst, _ in rnd:
            incoming, held = snap[src], snap[dst]
            if set(incoming) & set(held):
                if not set(held) <= set(incoming):
                    return False
                state[dst] = dict(incoming)
            else:
                for k, v in incoming.items():
                    state[dst][k] = state[dst].get(k, 0) + v
    return all(s == {r: 1 for r in range(n)} for s in state)


# ------------------------------------------------------------------------- NCCL's double binary tree
def nccl_btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """ncclGetBtree (NCCL src/graph/trees.cc): (parent, child0, child1), −1 for none; any nranks."""
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1 if nranks > 1 else -1)
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, down0, down1


def nccl_dtree(nranks: int, rank: int) -> tuple[tuple, tuple]:
    """ncclGetDtree: the btree, and a second tree mirrored (even nranks) or shifted by one rank (odd)."""
    t0 = nccl_btree(nranks, rank)
    if nranks % 2:
        u, d0, d1 = nccl_btree(nranks, (rank - 1 + nranks) % nranks)
        t1 = tuple(-1 if x == -1 else (x + 1) % nranks for x in (u, d0, d1))
    else:
        u, d0, d1 = nccl_btree(nranks, nranks - 1 - rank)
        t1 = tuple(-1 if x == -1 else nranks - 1 - x for x in (u, d0, d1))
    return t0, t1


def double_binary_tree_bytes(n: int, nbytes: float = 1.0) -> tuple[list[float], list[int]]:
    """Bytes each rank sends in a double-binary-tree all-reduce of S bytes (S/2 per tree: every non-root sends
    S/2 up in the reduce, every parent S/2 to each child in the broadcast), and each tree's depth."""
    sent, depths = [0.0] * n, []
    for t in range(2):
        parent = {r: nccl_dtree(n, r)[t][0] for r in range(n)}
        for r, p in parent.items():
            if p != -1:
                sent[r] += nbytes / 2
                sent[p] += nbytes / 2
        depth = 0
        for r in range(n):
            h, x = 0, r
            while parent[x] != -1:
                x, h = parent[x], h + 1
            depth = max(depth, h)
        depths.append(depth)
    return sent, depths


def tree_ring_crossover_bytes(n: int, latency_s: float, bandwidth_Bps: float) -> float:
    """S* at which ring 2(N−1)α + 2(N−1)/N·S/β equals pipelined tree 2⌈log2 N⌉α + 2S/β:
    S* = N(N − 1 − ⌈log2 N⌉)·α·β. Below it the tree is faster (fewer latencies), above it the ring (fewer bytes).
    This is the textbook tree over N ranks (one per node). NCCL's tree is a chain inside each node and a double
    binary tree between nodes only, and on exactly two nodes NCCL picks it for large sizes too (nccl#946)."""
    return n * (n - 1 - math.ceil(math.log2(n))) * latency_s * bandwidth_Bps
