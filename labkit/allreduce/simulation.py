"""Ring all-reduce, simulated: N ranks in plain numpy, every step recorded (who sends what to whom).

    trace = simulate_ring_allreduce([np.arange(8.0) * (r + 1) for r in range(4)])
    trace.result            # every rank's buffer at the end (all equal to the elementwise sum)
    trace.bytes_sent        # bytes each rank sent: 2(N−1)/N·S when N divides the element count
    trace.to_frame()        # one row per transfer

The schedule (which chunk each rank sends at each step) comes from labkit.collectives, the same
one the real ring (labkit.allreduce.ring) uses, and the additions happen in the same order — so the
simulation predicts the real ring's floats bit for bit.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from ..collectives import RS, chunk_bounds, ring_bytes_sent, ring_chunks, ring_steps


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One message: `src` sends chunk `chunk` (elements [start, stop)) to `dst`."""

    phase: str
    step: int  # step within the phase, 0 … N−2
    src: int
    dst: int
    chunk: int
    elements: int
    nbytes: int


@dataclasses.dataclass(frozen=True)
class RingState:
    """Every rank's buffer and, per rank and chunk, which ranks' inputs its partial sum holds."""

    buffers: tuple[np.ndarray, ...]
    contributions: tuple[tuple[frozenset, ...], ...]  # [rank][chunk] -> ranks summed in


@dataclasses.dataclass(frozen=True)
class RingTrace:
    """A simulated ring all-reduce: the states before and after each step, and every transfer."""

    world_size: int
    count: int  # elements per rank
    itemsize: int  # bytes per element
    bounds: tuple[tuple[int, int], ...]  # chunk c = elements [start, stop)
    steps: tuple[tuple[str, int], ...]  # (phase, step within phase), 2(N−1) of them
    transfers: tuple[tuple[Transfer, ...], ...]  # per step, one transfer per rank (empty chunks included)
    states: tuple[RingState, ...]  # states[k] = after k steps; states[0] = the inputs

    @property
    def nbytes(self) -> int:
        """S: bytes of one rank's buffer (the nccl-tests "size")."""
        return self.count * self.itemsize

    @property
    def result(self) -> tuple[np.ndarray, ...]:
        return self.states[-1].buffers

    def _bytes_by(self, end: str) -> list[int]:
        """Bytes per rank over the whole all-reduce, each transfer counted at its `end` ("src" or "dst")."""
        out = [0] * self.world_size
        for step in self.transfers:
            for t in step:
                out[getattr(t, end)] += t.nbytes
        return out

    @property
    def bytes_sent(self) -> list[int]:
        """Bytes each rank sent over the whole all-reduce."""
        return self._bytes_by("src")

    @property
    def bytes_received(self) -> list[int]:
        return self._bytes_by("dst")

    def to_frame(self):
        """One row per transfer: step (1-based, overall), phase, phase_step, src, dst, chunk, elements, nbytes."""
        import pandas as pd

        rows = []
        for k, step in enumerate(self.transfers):
            for t in step:
                row = dataclasses.asdict(t)
                row["phase_step"] = row.pop("step")
                rows.append({"step": k + 1, **row})
        return pd.DataFrame(rows, columns=["step", "phase", "phase_step", "src", "dst", "chunk", "elements", "nbytes"])

    def describe_step(self, k: int) -> str:
        """Plain words for step k (1-based): the phase and every non-empty transfer."""
        if k == 0:
            return f"start: each of the {self.world_size} ranks holds only its own input"
        phase, s = self.steps[k - 1]
        moves = [f"rank {t.src}→{t.dst}: chunk {t.chunk} ({t.nbytes} B)" for t in self.transfers[k - 1] if t.nbytes]
        verb = "adds it into its own copy" if phase == RS else "overwrites its copy"
        return (
            f"step {k} of {len(self.steps)} — {phase} step {s + 1}: every rank sends one chunk to its right "
            f"neighbour, which {verb}. " + "; ".join(moves or ["(all chunks empty)"])
        )


def simulate_ring_allreduce(inputs: Sequence[np.ndarray]) -> RingTrace:
    """Simulate a ring all-reduce (sum) over len(inputs) ranks; inputs are 1-D arrays of one shape and dtype."""
    bufs = [np.array(x, copy=True).ravel() for x in inputs]
    n = len(bufs)
    if n < 1:
        raise ValueError("need at least one rank's input")
    if len({(b.shape, b.dtype) for b in bufs}) != 1:
        raise ValueError("every rank's input must have the same shape and dtype")
    count, itemsize = bufs[0].size, bufs[0].dtype.itemsize
    bounds = chunk_bounds(count, n)
    contrib = [[frozenset([r]) for _ in range(n)] for r in range(n)]
    states = [RingState(tuple(b.copy() for b in bufs), tuple(tuple(c) for c in contrib))]
    all_transfers = []
    for phase, s in ring_steps(n):
        # Every rank sends at the same time: read all outgoing chunks before anyone writes.
        outgoing = []
        for r in range(n):
            send_c, _ = ring_chunks(phase, s, r, n)
            a, b = bounds[send_c]
            outgoing.append((r, send_c, bufs[r][a:b].copy(), contrib[r][send_c]))
        transfers = []
        for src, c, data, who in outgoing:
            dst = (src + 1) % n
            _, recv_c = ring_chunks(phase, s, dst, n)
            assert recv_c == c, "schedule mismatch: the right neighbour expects another chunk"
            a, b = bounds[c]
            if phase == RS:
                bufs[dst][a:b] += data  # local += received, the order the real ring uses
                contrib[dst][c] = contrib[dst][c] | who
            else:
                bufs[dst][a:b] = data
                contrib[dst][c] = who
            transfers.append(Transfer(phase, s, src, dst, c, b - a, (b - a) * itemsize))
        all_transfers.append(tuple(transfers))
        states.append(RingState(tuple(b.copy() for b in bufs), tuple(tuple(c) for c in contrib)))
    return RingTrace(n, count, itemsize, tuple(bounds), tuple(ring_steps(n)), tuple(all_transfers), tuple(states))


# --------------------------------------------------------------------------- notebook 05's exhaustive check
@dataclasses.dataclass(frozen=True)
class SmallRingsCheck:
    """The simulated ring against numpy's sum and the byte schedule, for every N up to `max_ranks`."""

    max_ranks: int
    sums_exact: bool
    bytes_per_rank: bool

    def report(self) -> str:
        return (
            f"every rank holds the exact sum: {self.sums_exact};  total = 2(N-1)·S, "
            f"per rank = 2(N-1)/N·S when N | count: {self.bytes_per_rank}"
        )

    def checks(self) -> dict:
        return {
            f"simulation_sums_exact_N1_to_{self.max_ranks}": self.sums_exact,
            "simulation_bytes_per_rank": self.bytes_per_rank,
        }


def check_small_rings(max_ranks: int = 16) -> SmallRingsCheck:
    """Simulate N = 1..max_ranks ranks on element counts divisible by N, not divisible, and fewer than N.

    Every rank must end with numpy's sum exactly (integer-valued float32: no rounding), the ranks together
    must send 2(N−1)·S bytes as labkit.collectives.ring_bytes_sent schedules, each 2(N−1)/N·S when N | count.
    """
    sums_ok, bytes_ok = True, True
    for n in range(1, max_ranks + 1):
        for count in sorted({n, n + 1, 3 * n + 2, max(n - 1, 1)}):
            xs = [np.random.default_rng(r).integers(-1000, 1000, count).astype(np.float32) for r in range(n)]
            t = simulate_ring_allreduce(xs)
            S = 4 * count
            sums_ok &= all(np.array_equal(b, np.sum(xs, axis=0)) for b in t.result)
            bytes_ok &= sum(t.bytes_sent) == 2 * (n - 1) * S and t.bytes_sent == ring_bytes_sent(count, n, 4)
            bytes_ok &= bool(count % n) or all(b == 2 * (n - 1) * S // n for b in t.bytes_sent)
    return SmallRingsCheck(max_ranks, bool(sums_ok), bool(bytes_ok))
