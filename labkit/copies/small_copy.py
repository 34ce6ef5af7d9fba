"""Timing small host↔GPU copies the way the CUDA tools do, so the latency floor says what it measured.

labkit's sweep (`timing.time_cuda`) records a start event, enqueues `inner` copies from Python and
records an end event. The GPU starts the first copy as soon as it is enqueued, so when one copy takes
the GPU less time than the host needs to enqueue the next, the event pair measures the *host's issue
rate* (Python + torch dispatch + TensorIterator + `cudaMemcpyAsync` + the caching host allocator's
`record_event`), not the copy:  t_pipelined ≈ max(t_gpu, t_issue) per copy.

nvbandwidth (`memcpy.cpp`, `MemcpyOperation::doMemcpyCore`) first enqueues a spin kernel that holds
the stream until every copy and both events are enqueued: *"This ensures that the overhead of
enqueuing operations is excluded from the measurement of actual transfer over the interconnect"*
(nvbandwidth README, "Measurement Details", https://github.com/NVIDIA/nvbandwidth). Then

    t_gpu   = elapsed(start, end) / n             (stream blocked while enqueuing)
    t_issue = host time of the enqueue loop / n   (taken in the same run, while the GPU waits)

`time_small_copy` measures all three per size with `labkit.timing.time_blocked` (the stream is
injected, so the method is tested on a CPU by `timing.FakeStream`, a discrete-event model of one CUDA
stream; on a GPU `timing.CudaEventStream` blocks the stream with `torch.cuda._sleep`). Because the
spin lasts a fixed number of cycles, every sample checks that it outlasted the enqueue (`start.query()`
still False); `time_blocked`'s docstring states the retry rule. `time_small_copy_graph` times n
copies captured in one CUDA graph (one host call for n copies).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable

from labkit import reference, timing
from labkit.runtime import Found

#: Sizes the live small-copy experiment times (4 B .. 1 MiB; quick: three of them).
SIZES = (4, 4096, 65536, 1 << 20)
QUICK_SIZES = (4, 65536, 1 << 20)

#: Recorded dataset whose pipelined (no-blocker) small-copy floor notebook 01 reads.
RECORDED_SWEEP = "h100_vm_labkit_gpu_copy_sweep"


@dataclasses.dataclass(frozen=True)
class SmallCopyTiming:
    """Per-copy times of one size, three ways (seconds, one value per sample)."""

    nbytes: int
    n: int  # copies per sample
    gpu_s: tuple[float, ...]  # device time per copy, stream blocked while enqueuing (nvbandwidth's method)
    issue_s: tuple[float, ...]  # host enqueue time per call, taken while the stream is blocked
    pipelined_s: tuple[float, ...]  # per copy without a blocker (labkit's sweep, bandwidthTest's loop)
    retries: int  # samples redone because the blocker ended before the enqueue did
    # samples kept although the blocker still ended early: upper bounds (timing.time_blocked's retry rule)
    released_early: int = 0

    @property
    def gpu_median_s(self) -> float:
        return float(statistics.median(self.gpu_s))

    @property
    def issue_median_s(self) -> float:
        return float(statistics.median(self.issue_s))

    @property
    def pipelined_median_s(self) -> float:
        return float(statistics.median(self.pipelined_s))

    @property
    def warnings(self) -> list[str]:
        return timing.released_early_warnings(f"{self.nbytes} B", self.released_early, len(self.gpu_s))

    @property
    def host_bound(self) -> bool:
        """True when the unblocked loop measured the host (issue cost above the GPU's per-copy time)."""
        return self.issue_median_s > self.gpu_median_s


def time_small_copy(
    stream,
    copy: Callable[[], object],
    nbytes: int,
    *,
    n: int = 100,
    repeats: int = 10,
    blocker_s: float | None = None,
) -> SmallCopyTiming:
    """Time one copy size three ways on `stream` (a `timing.CudaEventStream` or a `timing.FakeStream`).

    `copy()` enqueues one copy on the stream (torch: `dst.copy_(src, non_blocking=True)`, pinned host
    side). `blocker_s` overrides the first spin's length (default: timing's rule, from the issue time).
    """
    r = timing.time_blocked(stream, copy, calls=n, repeats=repeats, spin_s=blocker_s, unblocked=True, nbytes=nbytes)
    return SmallCopyTiming(int(nbytes), n, r.gpu.samples_s, r.issue_s, r.pipelined_s, r.retries, r.released_early)


def time_small_copy_graph(stream, capture_and_replay, n: int = 100, repeats: int = 10) -> tuple[float, ...]:
    """Per-copy device time of n copies captured in one CUDA graph and replayed by one host call.

    `capture_and_replay()` returns a callable that enqueues one replay (torch: `g.replay`)."""
    return timing.time_graph(stream, capture_and_replay(), n, repeats)


def torch_graph_of_copies(dst, src, n: int):  # pragma: no cover - needs a GPU
    """Capture n `dst.copy_(src, non_blocking=True)` (host side pinned) into one CUDA graph; return its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the graph
        for _ in range(3):
            dst.copy_(src, non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            dst.copy_(src, non_blocking=True)
    return g.replay


def rows_of(direction: str, r: SmallCopyTiming, graph_s: tuple[float, ...] = ()) -> dict:
    """One table row (µs) of a timed size."""
    row = {
        "direction": direction,
        "bytes": r.nbytes,
        "gpu_us (stream blocked)": 1e6 * r.gpu_median_s,
        "issue_us (host, per call)": 1e6 * r.issue_median_s,
        "pipelined_us (no blocker)": 1e6 * r.pipelined_median_s,
        "host_bound": r.host_bound,
    }
    if graph_s:
        row["graph_us (per copy)"] = 1e6 * statistics.median(graph_s)
    return row


def measure_here(quick: bool, *, n: int = 100) -> Found | None:  # pragma: no cover - needs a GPU
    """H2D and D2H small copies on this machine's GPU, three ways plus a CUDA graph; None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    s = timing.CudaEventStream()
    rows, warnings = [], []
    for direction in ("h2d", "d2h"):
        for nbytes in QUICK_SIZES if quick else SIZES:
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
            dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            src, dst = (host, dev) if direction == "h2d" else (dev, host)
            r = time_small_copy(s, lambda: dst.copy_(src, non_blocking=True), nbytes, n=n, repeats=5 if quick else 10)
            g = time_small_copy_graph(s, lambda: torch_graph_of_copies(dst, src, n), n=n, repeats=5)
            rows.append(rows_of(direction, r, g))
            warnings += [f"{direction} {w}" for w in r.warnings]
    note = "\n".join(f"- warning: {w}" for w in warnings) or None
    return Found(rows, f"measured here: {torch.cuda.get_device_name(0)}, pinned, n={n} copies per sample", note=note)


def recorded_floor(dataset, max_bytes: int = 256 * 1024) -> Found | None:
    """The pipelined (no-blocker) per-copy times ≤ `max_bytes` of a recorded labkit sweep (a Dataset or its
    name), H2D beside D2H."""
    if isinstance(dataset, str):
        dataset = reference.load(dataset)
    f = dataset.frame
    f = f[(f.memory == "pinned") & f.direction.isin(["h2d", "d2h"]) & (f.nbytes <= max_bytes)]
    rows = []
    for nbytes, g in f.groupby("nbytes"):
        t = dict(zip(g.direction, g.time_s))
        rows.append(
            {"bytes": int(nbytes), "h2d_us (no blocker)": 1e6 * t["h2d"], "d2h_us (no blocker)": 1e6 * t["d2h"]}
        )
    # dataset.label already says "recorded: <title> — <source>"
    label = f"{dataset.label} — labkit sweep, Python loop of copy_(non_blocking=True), no blocker"
    return Found(rows, label, datasets=(dataset.name,))


def d2h_floor_spread(rows, max_bytes: int = 128 * 1024) -> float:
    """max/min of the unblocked D2H per-copy time up to `max_bytes` (≈ 1: flat, the host's issue rate); nan if none."""
    t = [
        r.get("d2h_us (no blocker)", r.get("pipelined_us (no blocker)"))
        for r in rows or []
        if r["bytes"] <= max_bytes and r.get("direction", "d2h") == "d2h"
    ]
    return max(t) / min(t) if t else float("nan")
