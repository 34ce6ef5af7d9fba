"""Collectives: nccl-tests bandwidth definitions (algbw, busbw).

algbw = S / t, with S the nccl-tests "size" (bytes of the full buffer) and t the time of one
collective. busbw = algbw × a factor that makes the number comparable with the hardware's
per-rank link bandwidth, whatever the rank count (nccl-tests PERFORMANCE.md):
  all_reduce 2(n−1)/n; all_gather, reduce_scatter, alltoall (n−1)/n; broadcast, reduce, sendrecv 1.
"""

from __future__ import annotations

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")


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
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"unknown op {op!r}; choose one of {OPS}")


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
