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

`time_small_copy` measures all three per size; the stream is injected, so the method is tested on a
CPU by `FakeStream`, a discrete-event model of one CUDA stream. `TorchStream` blocks a real stream
with `torch.cuda._sleep(cycles)` (a private helper torch's own tests use); because it spins a fixed
number of cycles, every sample checks that the blocker outlasted the enqueue (`start.query()` still
False) and is redone with a blocker twice as long if not. `time_small_copy_graph` times n copies
captured in one CUDA graph (one host call for n copies).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable

from labkit import reference
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
    blocker_s: float = 2e-3,
    max_retries: int = 6,
) -> SmallCopyTiming:
    """Time one copy size three ways on `stream` (a `TorchStream` or a `FakeStream`).

    `copy()` enqueues one copy on the stream (torch: `dst.copy_(src, non_blocking=True)`, pinned host
    side). The blocker is doubled until it outlasts the enqueue loop; no invalid sample is kept.
    """
    gpu, issue, pipe = [], [], []
    retries = 0
    for _ in range(3):  # warm-up: lazy init, first touch, clocks
        copy()
    stream.synchronize()
    for _ in range(repeats):
        while True:
            stream.block(blocker_s)
            start = stream.record()
            t0 = stream.clock()
            for _ in range(n):
                copy()
            t1 = stream.clock()
            end = stream.record()
            released_too_early = stream.query(start)  # the GPU reached `start` before the enqueue ended
            stream.synchronize()
            if not released_too_early:
                break
            retries += 1
            if retries > max_retries * repeats:
                raise RuntimeError("the blocker never outlasted the enqueue loop: raise blocker_s or lower n")
            blocker_s *= 2
        gpu.append(stream.elapsed(start, end) / n)
        issue.append((t1 - t0) / n)
        start = stream.record()  # labkit's sweep: no blocker, the same n copies between one event pair
        for _ in range(n):
            copy()
        end = stream.record()
        stream.synchronize()
        pipe.append(stream.elapsed(start, end) / n)
    return SmallCopyTiming(int(nbytes), n, tuple(gpu), tuple(issue), tuple(pipe), retries)


def time_small_copy_graph(stream, capture_and_replay, n: int = 100, repeats: int = 10) -> tuple[float, ...]:
    """Per-copy device time of n copies captured in one CUDA graph and replayed by one host call.

    `capture_and_replay()` returns a callable that enqueues one replay (torch: `g.replay`)."""
    replay = capture_and_replay()
    replay()
    stream.synchronize()
    out = []
    for _ in range(repeats):
        start = stream.record()
        replay()
        end = stream.record()
        stream.synchronize()
        out.append(stream.elapsed(start, end) / n)
    return tuple(out)


class FakeStream:
    """A discrete-event model of one in-order CUDA stream, for tests without a GPU.

    Host calls advance a host clock by their issue cost; the device runs enqueued work in order, each
    item starting at max(enqueue time, end of the previous item); an event is the device time at which
    the stream reaches it. Nothing sleeps: time is simulated.
    """

    def __init__(
        self, *, issue_s: float, gpu_copy_s: float, event_issue_s: float = 0.5e-6, blocker_issue_s: float = 5e-6
    ):
        self.issue_s, self.gpu_copy_s = issue_s, gpu_copy_s
        self.event_issue_s, self.blocker_issue_s = event_issue_s, blocker_issue_s
        self.host_t = 0.0
        self.device_free_t = 0.0
        self.copies = 0

    def clock(self) -> float:
        return self.host_t

    def _enqueue(self, host_cost: float, device_cost: float) -> float:
        self.host_t += host_cost
        start = max(self.host_t, self.device_free_t)
        self.device_free_t = start + device_cost
        return start

    def block(self, seconds: float) -> None:
        self._enqueue(self.blocker_issue_s, seconds)

    def copy(self) -> None:
        self.copies += 1
        self._enqueue(self.issue_s, self.gpu_copy_s)

    def record(self) -> float:
        return self._enqueue(self.event_issue_s, 0.0)

    def query(self, event_t: float) -> bool:
        return event_t <= self.host_t

    def elapsed(self, a: float, b: float) -> float:
        return b - a

    def synchronize(self) -> None:
        self.host_t = max(self.host_t, self.device_free_t)

    def graph(self, n: int, launch_issue_s: float = 8e-6, per_node_s: float = 0.3e-6):
        """A captured graph of n copies: one host call, device work n·(copy + node overhead)."""
        return lambda: self._enqueue(launch_issue_s, n * (self.gpu_copy_s + per_node_s))


class TorchStream:  # pragma: no cover - needs a GPU
    """The `FakeStream` interface on the current CUDA stream; the blocker is `torch.cuda._sleep`."""

    def __init__(self, device: int = 0):
        import torch

        self.torch = torch
        self.stream = torch.cuda.current_stream(device)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 10_000_000
        a.record()
        torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        self.cycles_per_s = cycles / (a.elapsed_time(b) / 1e3)

    def clock(self) -> float:
        return time.perf_counter()

    def block(self, seconds: float) -> None:
        self.torch.cuda._sleep(int(seconds * self.cycles_per_s))

    def record(self):
        e = self.torch.cuda.Event(enable_timing=True)
        e.record(self.stream)
        return e

    def query(self, event) -> bool:
        return bool(event.query())

    def elapsed(self, a, b) -> float:
        return a.elapsed_time(b) / 1e3

    def synchronize(self) -> None:
        self.stream.synchronize()


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
    s = TorchStream()
    rows = []
    for direction in ("h2d", "d2h"):
        for nbytes in QUICK_SIZES if quick else SIZES:
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True).fill_(1)
            dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            src, dst = (host, dev) if direction == "h2d" else (dev, host)
            r = time_small_copy(s, lambda: dst.copy_(src, non_blocking=True), nbytes, n=n, repeats=5 if quick else 10)
            g = time_small_copy_graph(s, lambda: torch_graph_of_copies(dst, src, n), n=n, repeats=5)
            rows.append(rows_of(direction, r, g))
    return Found(rows, f"measured here: {torch.cuda.get_device_name(0)}, pinned, n={n} copies per sample")


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
