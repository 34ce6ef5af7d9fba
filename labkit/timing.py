"""Timing: a host timer and a CUDA-event timer with warm-up, repeats and honest statistics.

The method borrows from triton.testing.do_bench and nvbandwidth, without all of either: no L2 flush
between samples (do_bench has one) and no spin kernel holding the stream while copies are queued
(nvbandwidth's; labkit.copies.small_copy adds a blocker where the issue cost matters):

1. warm up (the first calls pay for lazy initialisation, page faults and clock ramp-up);
2. estimate one call's time and size the inner loop so that one sample lasts at least
   `MIN_SAMPLE_S` (a timer cannot resolve a 4-byte copy on its own);
3. take `repeats` samples, each the mean of `inner` back-to-back calls — on the GPU between one
   pair of CUDA events on one stream, synchronised once at the end of the sample;
4. keep every raw sample; the median and IQR are derived on demand, and the result warns about
   itself when the spread is too large to trust.

A `Measurement` keeps seconds *per call*, so bandwidth is always nbytes / seconds.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Sequence

import numpy as np

from .runtime import require_cuda

#: Warm-up calls before timing: enough to fault in pages and build CUDA contexts/graphs.
WARMUP_CALLS = 3
#: Default number of samples; 10 gives a usable IQR without long runs.
DEFAULT_REPEATS = 10
#: Each sample should last at least 1 ms so that timer resolution (µs on host, ~0.5 µs for CUDA
#: events) is below 0.1% of the sample.
MIN_SAMPLE_S = 1e-3
#: Never run more than this many calls inside one sample (bounds the run time of tiny ops).
MAX_INNER = 10_000
#: Warn when the IQR exceeds this fraction of the median (torch.utils.benchmark uses a similar rule).
IQR_WARN_FRACTION = 0.10


@dataclasses.dataclass(frozen=True)
class Measurement:
    """Raw per-call times of one timed operation, plus what was timed and how."""

    samples_s: tuple[float, ...]  # seconds per call, one entry per sample
    inner: int  # calls averaged inside each sample
    timer: str  # "cuda_event" or "host"
    label: str = ""
    nbytes: int | None = None  # bytes moved per call, when the op is a copy

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.samples_s))

    @property
    def iqr_s(self) -> float:
        q1, q3 = np.percentile(self.samples_s, [25, 75])
        return float(q3 - q1)

    @property
    def min_s(self) -> float:
        return float(min(self.samples_s))

    @property
    def bandwidth_GBps(self) -> float:
        """nbytes / median time, in GB/s (1e9 B/s)."""
        if self.nbytes is None:
            raise ValueError(f"measurement {self.label!r} has no byte count, so no bandwidth")
        return self.nbytes / self.median_s / 1e9

    @property
    def warnings(self) -> list[str]:
        out = []
        if len(self.samples_s) < 3:
            out.append(f"{self.label or 'measurement'}: only {len(self.samples_s)} samples; the spread is unknown")
        elif self.median_s > 0 and self.iqr_s / self.median_s > IQR_WARN_FRACTION:
            out.append(
                f"{self.label or 'measurement'}: IQR is {100 * self.iqr_s / self.median_s:.0f}% of the median "
                "— the machine was busy or the size is too small; rerun with more repeats"
            )
        return out

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["samples_s"] = list(self.samples_s)
        d.update(median_s=self.median_s, iqr_s=self.iqr_s)
        if self.nbytes is not None:
            d["bandwidth_GBps"] = self.bandwidth_GBps
        return d


def _inner_for(estimate_s: float, min_sample_s: float) -> int:
    if estimate_s <= 0:
        return MAX_INNER
    return int(min(MAX_INNER, max(1, np.ceil(min_sample_s / estimate_s - 1e-6))))


def time_host(
    fn: Callable[[], object],
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = WARMUP_CALLS,
    inner: int | None = None,
    min_sample_s: float = MIN_SAMPLE_S,
    label: str = "",
    nbytes: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time a host-side call (or a synchronous GPU call) with a wall clock.

    `clock` can be injected so tests can drive the timer deterministically.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    if inner is None:
        t0 = clock()
        fn()
        inner = _inner_for(clock() - t0, min_sample_s)
    samples = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(inner):
            fn()
        samples.append((clock() - t0) / inner)
    return Measurement(tuple(samples), inner, "host", label, nbytes)


def time_cuda(
    fn: Callable[[], object],
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = WARMUP_CALLS,
    inner: int | None = None,
    min_sample_s: float = MIN_SAMPLE_S,
    label: str = "",
    nbytes: int | None = None,
    stream=None,
) -> Measurement:
    """Time asynchronous GPU work with one pair of CUDA events per sample on one stream.

    `fn` must enqueue its work on the current stream (e.g. `dst.copy_(src, non_blocking=True)`
    with pinned host memory). Pageable copies are synchronous from the host's side: time those
    with `time_host` around a synchronised copy instead.
    """
    require_cuda("time_cuda")
    import torch

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    stream = stream or torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        if inner is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                fn()
            end.record()
            end.synchronize()
            inner = _inner_for(start.elapsed_time(end) / 1e3 / 5, min_sample_s)
        pairs = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
    samples = tuple(s.elapsed_time(e) / 1e3 / inner for s, e in pairs)
    return Measurement(samples, inner, "cuda_event", label, nbytes)


def summarize(measurements: Sequence[Measurement]) -> list[str]:
    """All self-warnings of a batch of measurements, one line each."""
    return [w for m in measurements for w in m.warnings]
