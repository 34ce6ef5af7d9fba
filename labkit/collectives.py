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
