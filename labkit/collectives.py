"""Collectives: nccl-tests bandwidth definitions (algbw, busbw), the ring schedule, and how a collective is checked (timed by labkit.timing.time_collectives).

algbw = S / t, with S the nccl-tests "size" (bytes of the full buffer) and t the time of one
collective. busbw = algbw × a factor that makes the number comparable with the hardware's
per-rank link bandwidth, whatever the rank count (nccl-tests PERFORMANCE.md):
  all_reduce 2(n−1)/n; all_gather, reduce_scatter, alltoall (n−1)/n; broadcast, reduce, sendrecv 1.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

#: The bus factor of each collective labkit times or models, as nccl-tests writes it and as a function of the rank
#: count n: the one definition (nccl-tests src/*.cu `<Op>GetBw`, doc/PERFORMANCE.md). The names are
#: labkit.logs.nccl_tests.OPS's.
_BUS_FACTORS: dict[str, tuple[str, Callable[[int], float]]] = {
    "all_reduce": ("2(n−1)/n", lambda n: 2 * (n - 1) / n),
    "all_gather": ("(n−1)/n", lambda n: (n - 1) / n),
    "reduce_scatter": ("(n−1)/n", lambda n: (n - 1) / n),
    "alltoall": ("(n−1)/n", lambda n: (n - 1) / n),
    "broadcast": ("1", lambda n: 1.0),
    "reduce": ("1", lambda n: 1.0),
    "sendrecv": ("1", lambda n: 1.0),
}
BUS_FACTORS: dict[str, Callable[[int], float]] = {op: at for op, (_, at) in _BUS_FACTORS.items()}
#: The same factors in words, for messages ("busbw = algbw × 2(n−1)/n").
BUS_FACTOR_WORDS: dict[str, str] = {op: words for op, (words, _) in _BUS_FACTORS.items()}
#: The collectives labkit has a bus factor for: a subset of the nccl-tests binaries' (labkit.logs.nccl_tests.OPS).
OPS = tuple(BUS_FACTORS)


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 B/s): bytes of the buffer / time of one collective."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
    return nbytes / seconds / 1e9


def bus_factor(op: str, world_size: int) -> float:
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if op not in BUS_FACTORS:
        raise ValueError(f"unknown op {op!r}; choose one of {OPS}")
    return BUS_FACTORS[op](n)


def busbw(op: str, nbytes: float, seconds: float, world_size: int) -> float:
    """Bus bandwidth in GB/s with nccl-tests semantics (see module docstring)."""
    return algbw(nbytes, seconds) * bus_factor(op, world_size)


# --------------------------------------------------------------------------- the ring schedule
# Shared by every ring — the simulation (labkit.allreduce.simulation), the real ring (labkit.allreduce.ring) and
# the hierarchical all-reduce's rings (labkit.hierarchy.hierarchical) — so they cannot
# drift: the simulation predicts the real ring's result bit for bit, summation order included.
RS, AG = "reduce-scatter", "all-gather"


def chunk_bounds(count: int, world_size: int) -> list[tuple[int, int]]:
    """Split `count` elements into `world_size` contiguous chunks, as [start, stop) pairs.

    The first `count % world_size` chunks get one element more (numpy.array_split's rule), so
    sizes differ by at most one element; with fewer elements than ranks the last chunks are empty.
    """
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    base, extra = divmod(int(count), n)
    bounds, start = [], 0
    for i in range(n):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def ring_steps(world_size: int) -> list[tuple[str, int]]:
    """The 2(N−1) steps of a ring all-reduce: (phase, step within the phase)."""
    n = int(world_size)
    return [(RS, s) for s in range(n - 1)] + [(AG, s) for s in range(n - 1)]


def ring_chunks(phase: str, step: int, rank: int, world_size: int) -> tuple[int, int]:
    """(chunk this rank sends to rank+1, chunk it receives from rank−1) at one step.

    reduce-scatter step s: send chunk (r−s) mod N, receive chunk (r−s−1) mod N and add it in;
    after N−1 steps rank r holds the complete sum of chunk (r+1) mod N.
    all-gather step s: send chunk (r+1−s) mod N (complete), receive chunk (r−s) mod N and keep it.
    """
    n = int(world_size)
    if phase == RS:
        return (rank - step) % n, (rank - step - 1) % n
    if phase == AG:
        return (rank + 1 - step) % n, (rank - step) % n
    raise ValueError(f"phase must be {RS!r} or {AG!r}, got {phase!r}")


def ring_bytes_sent(count: int, world_size: int, itemsize: int) -> list[int]:
    """Exact bytes each rank sends in a ring all-reduce of `count` elements of `itemsize` bytes.

    Rank r sends every chunk but ((r+1) mod N) in reduce-scatter and every chunk but ((r+2) mod N)
    in all-gather: 2S − |chunk r+1| − |chunk r+2| bytes. Summed over ranks that is 2(N−1)·S
    exactly (each step moves every chunk once); per rank it is 2(N−1)/N·S exactly when N divides
    the element count, and otherwise within two elements of it (the mean over ranks is exact).
    """
    n = int(world_size)
    sizes = [(b - a) * itemsize for a, b in chunk_bounds(count, n)]
    if n == 1:
        return [0]
    S = count * itemsize
    return [2 * S - sizes[(r + 1) % n] - sizes[(r + 2) % n] for r in range(n)]


# --------------------------------------------------------------------------- checking a result
#: Unit roundoff (half an ulp of 1.0) per floating dtype, for the summation-order tolerance.
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}


def summation_tolerance(abs_sum, world_size: int, dtype: str = "float32"):
    """Largest difference two correct all-reduce results may show, elementwise.

    Floating-point addition is not associative, so a ring (which adds chunk c in the order
    c+1, c+2, …) and the library (its own order) round differently. Adding N numbers in any order
    errs by at most (N−1)·u·Σ|x| (u = unit roundoff; Higham, *Accuracy and Stability of Numerical
    Algorithms*, §4.2), so two orders differ by at most twice that: 2(N−1)·u·Σ|x|, where Σ|x| is
    the elementwise sum of the absolute inputs. Integer-valued inputs small enough to be exact
    have no rounding at all: there the results must be bit-identical.
    """
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"no unit roundoff for dtype {dtype!r}; known: {sorted(UNIT_ROUNDOFF)}")
    return 2 * (int(world_size) - 1) * UNIT_ROUNDOFF[dtype] * abs_sum


def within_summation_tolerance(
    result, expected, abs_sum, world_size: int, dtype: str = "float32"
) -> tuple[bool, float]:
    """(every element within `summation_tolerance`, the largest difference) of two all-reduce results.

    The one correctness criterion for every all-reduce labkit times against the library (the hand-written
    ones of notebook 05, the hierarchical and flat rings of notebook 06): a result is correct when it
    differs from `expected` by no more than two summation orders can. `abs_sum` is the elementwise sum
    over ranks of |input|. Torch tensors or numpy arrays; compared in float64.
    """

    def as64(x):
        return x.double() if hasattr(x, "double") else np.asarray(x, dtype=np.float64)

    diff = abs(as64(result) - as64(expected))
    size = diff.numel() if hasattr(diff, "numel") else diff.size
    if size == 0:
        return True, 0.0
    return bool((diff <= summation_tolerance(as64(abs_sum), world_size, dtype)).all()), float(diff.max())


def slowest_rank(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """Per repetition, the slowest rank's seconds: a collective is done when its last rank is.

    (nccl-tests averages the ranks by default, `-a 1`; the slowest rank, `-a 3`, is the conservative choice
    and the one a training step feels.)
    """
    return [max(samples) for samples in zip(*per_rank)]
