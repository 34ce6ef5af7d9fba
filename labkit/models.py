"""Models: the α-β link law and collective cost models (the published figures they are compared with: labkit.specs).

Everything here is a *model*: figures that draw it must label it so.
Symbols: α = per-message latency (s), β = per-direction bandwidth (B/s), S = bytes, N = ranks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from .collectives import bus_factor
from .units import GB

# --------------------------------------------------------------------------- the α-β law
#: A sweep needs at least this many sizes for an α-β fit worth reporting; fewer are shown as points only
#: (two parameters from two or three points leave the residuals no room to say whether the law holds).
MIN_POINTS_FOR_FIT = 5


@dataclasses.dataclass(frozen=True)
class AlphaBetaFit:
    """t(n) = α + n/β fitted to a measured sweep.

    The fit minimises *relative* error (each point weighted by 1/t), because times span six
    orders of magnitude: an unweighted fit would ignore every small size and leave α to noise.
    """

    latency_s: float  # α
    bandwidth_GBps: float  # β, in GB/s (1e9 B/s)
    nbytes: tuple[int, ...]
    seconds: tuple[float, ...]

    @property
    def n_half_bytes(self) -> float:
        """Message size at which half the asymptotic bandwidth is reached: n½ = α·β."""
        return self.latency_s * self.bandwidth_GBps * GB

    def predict(self, nbytes) -> np.ndarray | float:
        """Predicted seconds for nbytes (scalar or array)."""
        t = self.latency_s + np.asarray(nbytes, dtype=float) / (self.bandwidth_GBps * GB)
        return float(t) if np.ndim(t) == 0 else t

    def predict_bandwidth_GBps(self, nbytes) -> np.ndarray | float:
        n = np.asarray(nbytes, dtype=float)
        bw = n / self.predict(n) / GB
        return float(bw) if np.ndim(bw) == 0 else bw

    @property
    def residuals(self) -> np.ndarray:
        """Relative residuals (measured − model) / measured, one per point."""
        t = np.asarray(self.seconds)
        return (t - self.predict(np.asarray(self.nbytes))) / t

    def bound(self, nbytes: float) -> str:
        """'latency-bound' below n½, 'bandwidth-bound' above."""
        return "latency-bound" if nbytes < self.n_half_bytes else "bandwidth-bound"

    def to_dict(self) -> dict:
        return {
            "latency_s": self.latency_s,
            "bandwidth_GBps": self.bandwidth_GBps,
            "n_half_bytes": self.n_half_bytes,
            "max_abs_relative_residual": float(np.max(np.abs(self.residuals))),
        }


def fit_alpha_beta(nbytes: Sequence[float], seconds: Sequence[float]) -> AlphaBetaFit:
    """Fit t = α + n/β to (bytes, seconds) pairs; α ≥ 0 and β > 0 are enforced."""
    from scipy.optimize import nnls

    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape or n.ndim != 1:
        raise ValueError("nbytes and seconds must be 1-D sequences of the same length")
    if len(n) < 2 or len(np.unique(n)) < 2:
        raise ValueError("an α-β fit needs at least two distinct sizes")
    if np.any(~np.isfinite(t)) or np.any(t <= 0) or np.any(n <= 0):
        raise ValueError("sizes and times must be positive and finite")
    w = 1.0 / t
    A = np.column_stack([np.ones_like(n), n]) * w[:, None]
    (alpha, inv_beta), _ = nnls(A, t * w)
    if inv_beta <= 0:
        raise ValueError("the fit found no bandwidth term: the times do not grow with size")
    return AlphaBetaFit(float(alpha), float(1.0 / inv_beta / GB), tuple(int(x) for x in n), tuple(float(x) for x in t))


def fit_alpha_beta_from_bandwidth(nbytes: Sequence[float], bandwidth_GBps: Sequence[float]) -> AlphaBetaFit:
    """Same fit for sources that print bandwidth only (bandwidthTest): t = n / bw."""
    n = np.asarray(nbytes, dtype=float)
    bw = np.asarray(bandwidth_GBps, dtype=float)
    keep = bw > 0  # a printed 0.0 GB/s carries no time
    return fit_alpha_beta(n[keep], n[keep] / (bw[keep] * GB))


# --------------------------------------------------------------------------- collectives
ALGORITHMS = ("ring", "tree", "naive", "recursive_doubling", "hierarchical")


def allreduce_time(
    nbytes: float,
    world_size: int,
    bandwidth_GBps: float,
    latency_s: float = 0.0,
    algorithm: str = "ring",
    *,
    gpus_per_node: int | None = None,
    inter_bandwidth_GBps: float | None = None,
    inter_latency_s: float | None = None,
) -> float:
    """Modelled all-reduce time in seconds.

    bandwidth_GBps is per GPU, per direction (a ring sends and receives at once).
      ring:               2(N−1)·α + 2(N−1)/N · S/β
      naive:              2(N−1)·(α + S/β)             gather to one rank, then broadcast
      recursive_doubling: ⌊log2 N⌋·(α + S/β) for N a power of two, (⌊log2 N⌋ + 2)·(α + S/β) otherwise
                          (the N − p ranks beyond the largest power of two p hand their buffer in
                          first and get the result back last: labkit.allreduce.ring, MPICH)
      tree:               2·⌈log2 N⌉·α + 2·S/β          reduce then broadcast, pipelined (any N: NCCL's
                          double binary tree has depth ≤ ⌈log2 N⌉; its busiest ranks move 2·S)
      hierarchical:       g ranks per group, m = N/g groups (needs gpus_per_node,
                          inter_bandwidth_GBps; inter_latency_s defaults to latency_s):
                          intra reduce-scatter (g−1)·α + (g−1)/g · S/β
                          + inter ring all-reduce of S/g over m groups (α_inter, β_inter)
                          + intra all-gather, same cost as the reduce-scatter.
    """
    N = int(world_size)
    if N < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not math.isfinite(nbytes) or nbytes < 0:
        raise ValueError(f"nbytes must be a finite number >= 0, got {nbytes}")
    if not math.isfinite(bandwidth_GBps) or bandwidth_GBps <= 0:
        raise ValueError(f"bandwidth_GBps must be a finite number > 0, got {bandwidth_GBps}")
    if not math.isfinite(latency_s) or latency_s < 0:
        raise ValueError(f"latency_s must be a finite number >= 0, got {latency_s}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {ALGORITHMS}")
    if N == 1:
        return 0.0
    a, S, b = latency_s, float(nbytes), bandwidth_GBps * GB
    if algorithm == "ring":
        return 2 * (N - 1) * a + bus_factor("all_reduce", N) * S / b
    if algorithm == "naive":
        return 2 * (N - 1) * (a + S / b)
    if algorithm == "recursive_doubling":
        # log2 N rounds when N is a power of two; otherwise the N - p ranks beyond the largest power of two p
        # first hand their buffer to a partner and get the result back at the end: floor(log2 N) + 2 rounds
        # (labkit.allreduce.ring.recursive_doubling_allreduce_; MPICH allreduce_intra_recursive_doubling.c).
        p = 1 << (N.bit_length() - 1)
        rounds = p.bit_length() - 1 + (0 if p == N else 2)
        return rounds * (a + S / b)
    if algorithm == "tree":
        return 2 * math.ceil(math.log2(N)) * a + 2 * S / b
    # hierarchical
    if gpus_per_node is None or inter_bandwidth_GBps is None:
        raise ValueError("hierarchical needs gpus_per_node= and inter_bandwidth_GBps= (inter_latency_s= optional)")
    g = int(gpus_per_node)
    if g < 1 or N % g:
        raise ValueError(f"world_size {N} is not a multiple of gpus_per_node {g}")
    m = N // g
    a_inter = latency_s if inter_latency_s is None else inter_latency_s
    rs = (g - 1) * a + bus_factor("reduce_scatter", g) * S / b
    inter = allreduce_time(S / g, m, inter_bandwidth_GBps, a_inter, "ring")
    return rs + inter + rs


def allreduce_bytes_per_rank(nbytes: float, world_size: int) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce: 2(N−1)/N · S."""
    N = int(world_size)
    if N < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return bus_factor("all_reduce", N) * float(nbytes)
