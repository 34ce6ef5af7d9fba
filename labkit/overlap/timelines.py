"""Overlap: copy and compute on separate streams — timelines, overlap efficiency, a double-buffered loader.

The pieces, each usable without a GPU:

- `Span` / `Timeline`: what ran on which stream and when (the data behind a Gantt chart), stored
  as the `overlap_run` dataset kind (scenario, event, stream, start_s, end_s).
- `overlap_efficiency(t_copy, t_compute, t_both)`: (T_copy + T_compute − T_both) / min(T_copy,
  T_compute) — 1 when the shorter job hides completely under the longer, 0 when they serialise.
- Streams with one interface: `CudaStream` (a torch.cuda.Stream; spans timed by CUDA events),
  `HostStream` (a worker thread that runs work in order — a CPU stand-in for a stream) and
  `InlineStream` (the calling thread). Events: `record()`, `wait(event)`, `synchronize()`.
- `double_buffered(...)`: a loader that copies batch i+1 while batch i is being used, with the
  two rules that make it correct: the consumer waits on *that batch's* copy event, and a buffer
  is not refilled until the event recorded after its last use has fired.
- `pipeline_timeline(...)`: the same schedule as a model from α-β copy times (labelled "model").
- Experiments: `measure_host_overlap` (real overlap between host threads: numpy copies release
  the GIL, torch matmuls too) and `measure_gpu_overlap` (CUDA streams and events).
- `labkit bench overlap` and the `overlap` recorder of `labkit record`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import math
import queue
import threading
import time
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from .runtime import require_cuda
from .units import MiB, check_pinned_request, format_bytes, format_time

#: Scenarios of one efficiency measurement: each job alone, then both at once.
COPY_ALONE, COMPUTE_ALONE, BOTH = "copy_alone", "compute_alone", "both"
EFFICIENCY_SCENARIOS = (COPY_ALONE, COMPUTE_ALONE, BOTH)
#: Full-duplex scenarios (GPU only): each direction alone, then both directions at once.
H2D_ALONE, D2H_ALONE, DUPLEX = "h2d_alone", "d2h_alone", "h2d+d2h"
#: Loader scenarios: copy-then-compute on one stream vs the double-buffered loader.
LOADER_SERIAL, LOADER_DOUBLE = "loader_serial", "loader_double_buffered"

#: Compute/copy time ratios swept by default: from copy-bound (0.25) to compute-bound (4).
DEFAULT_RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)
QUICK_RATIOS = (0.25, 1.0, 4.0)
#: Host experiment: 64 MiB per batch (source + destination = 128 MiB, far above a typical 32 MiB L3,
#: so the copy runs at DRAM speed and lasts a few ms — long against the ~50 µs thread hand-off);
#: quick mode uses 32 MiB.
HOST_BATCH_BYTES, HOST_QUICK_BATCH_BYTES = 64 * MiB, 32 * MiB
#: Repeats per (ratio, scenario); scenarios are interleaved so slow drift hits all three alike.
DEFAULT_REPEATS, QUICK_REPEATS = 7, 3
#: Side of the square float32 matrix of one compute unit on the host (~20-100 µs single-threaded:
#: long against Python's ~µs per call, short enough to set the compute time to within a few %).
HOST_MATRIX = 128
#: GPU experiment: 64 MiB per batch (≈1-5 ms over PCIe Gen3-Gen5: far above the ~10 µs launch
#: and event overheads); compute unit = one 2048² float32 matmul.
GPU_BATCH_BYTES, GPU_QUICK_BATCH_BYTES, GPU_MATRIX = 64 * MiB, 16 * MiB, 2048
#: Batches in a loader timeline (enough to see the steady state after the first copy).
LOADER_BATCHES, QUICK_LOADER_BATCHES = 8, 6
#: How often a host stream blocked in `wait` checks whether it was closed (s).
_POLL_S = 0.05


# --------------------------------------------------------------------------- spans and timelines
@dataclasses.dataclass(frozen=True)
class Span:
    """One piece of work on one stream: [start_s, end_s) in seconds from the timeline's origin."""

    stream: str  # e.g. "copy (H2D)", "compute"
    name: str  # e.g. "copy 3", "compute 3"
    start_s: float
    end_s: float

    def __post_init__(self):
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise ValueError(f"span {self.name!r}: start and end must be finite numbers of seconds")
        if self.end_s < self.start_s:
            raise ValueError(f"span {self.name!r} on {self.stream!r} ends ({self.end_s:g} s) before it "
                             f"starts ({self.start_s:g} s)")

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of intervals (overlaps counted once)."""
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The spans of one scenario, and where their times came from (shown on every chart)."""

    scenario: str
    spans: tuple[Span, ...]
    source: str  # "measured here: …", "recorded: …" or "model: …"

    def __post_init__(self):
        if not self.spans:
            raise ValueError(f"timeline {self.scenario!r} has no spans")

    @property
    def start_s(self) -> float:
        return min(s.start_s for s in self.spans)

    @property
    def end_s(self) -> float:
        return max(s.end_s for s in self.spans)

    @property
    def makespan_s(self) -> float:
        """From the first start to the last end: the wall time of the scenario."""
        return self.end_s - self.start_s

    @property
    def streams(self) -> list[str]:
        """Stream names in order of first appearance (the Gantt chart's rows, top to bottom)."""
        return list(dict.fromkeys(s.stream for s in self.spans))

    def on(self, stream: str) -> list[Span]:
        return sorted((s for s in self.spans if s.stream == stream), key=lambda s: s.start_s)

    def busy_s(self, stream: str) -> float:
        """Time during which `stream` had work running (overlapping spans counted once)."""
        return _union_s((s.start_s, s.end_s) for s in self.spans if s.stream == stream)

    @property
    def concurrent_s(self) -> float:
        """Time during which two or more streams were busy at once: the overlap the chart shows."""
        per_stream = sum(self.busy_s(st) for st in self.streams)
        return per_stream - _union_s((s.start_s, s.end_s) for s in self.spans)

    def step_s(self, stream: str = "compute") -> float:
        """Steady-state time per batch: median gap between consecutive starts on `stream`."""
        starts = [s.start_s for s in self.on(stream)]
        if len(starts) < 2:
            raise ValueError(f"timeline {self.scenario!r} has fewer than two spans on {stream!r}: no step time")
        return float(np.median(np.diff(starts)))

    def shifted(self) -> "Timeline":
        """The same timeline with its first start at 0 s."""
        t0 = self.start_s
        return dataclasses.replace(self, spans=tuple(dataclasses.replace(s, start_s=s.start_s - t0, end_s=s.end_s - t0)
                                                     for s in self.spans))

    def to_frame(self, **columns):
        """Rows in the `overlap_run` schema (scenario, event, stream, start_s, end_s), plus `columns`."""
        import pandas as pd

        return pd.DataFrame([{"scenario": self.scenario, "event": s.name, "stream": s.stream,
                              "start_s": s.start_s, "end_s": s.end_s, **columns} for s in self.spans])

    @classmethod
    def from_frame(cls, frame, source: str, scenario: str | None = None) -> "Timeline":
        """Rebuild a timeline from `overlap_run` rows (all rows, or those of one scenario)."""
        rows = frame if scenario is None else frame[frame["scenario"] == scenario]
        if len(rows) == 0:
            raise ValueError(f"no rows for scenario {scenario!r}")
        names = sorted(set(rows["scenario"]))
        spans = tuple(Span(str(r.stream), str(r.event), float(r.start_s), float(r.end_s)) for r in rows.itertuples())
        return cls(scenario or " + ".join(names), spans, source)


# --------------------------------------------------------------------------- the arithmetic
def overlap_efficiency(t_copy_s: float, t_compute_s: float, t_both_s: float) -> float:
    """(T_copy + T_compute − T_both) / min(T_copy, T_compute).

    1.0: the shorter job hid completely under the longer (T_both = max); 0.0: no overlap at all
    (T_both = T_copy + T_compute). Measured values can fall slightly outside [0, 1] through noise;
    well below 0 means running both at once slowed each down (they compete for something — a
    core, memory bandwidth, the GIL, a copy engine).
    """
    for name, v in (("T_copy", t_copy_s), ("T_compute", t_compute_s), ("T_both", t_both_s)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
    return (t_copy_s + t_compute_s - t_both_s) / min(t_copy_s, t_compute_s)


def step_time_s(copy_s: float, compute_s: float, overlapped: bool, d2h_s: float = 0.0) -> float:
    """Steady-state time per batch of a copy → compute (→ copy back) pipeline.

    Serial: the stages add up. Overlapped (each stage on its own engine, ≥ 2 buffers): the slowest
    stage sets the pace — the others hide under it.
    """
    stages = [copy_s, compute_s] + ([d2h_s] if d2h_s else [])
    if any(s < 0 for s in stages):
        raise ValueError("stage times must be >= 0 s")
    return max(stages) if overlapped else sum(stages)


def pipeline_timeline(n_batches: int, copy_s: float, compute_s: float, *, overlapped: bool = True,
                      buffers: int = 2, d2h_s: float = 0.0, scenario: str | None = None,
                      source: str = "model: ideal streams") -> Timeline:
    """Model schedule of `n_batches` through copy (H2D) → compute (→ copy back, D2H).

    Serial: everything on one stream, one stage after the other. Overlapped: the copy stream
    fills `buffers` device buffers ahead; copy i may start once copy i−1 is done (one copy
    engine per direction) *and* compute i−buffers has released its buffer; compute i starts once
    compute i−1 is done and copy i has landed; D2H i (on its own engine: full duplex) follows
    compute i.
    """
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    if buffers < 1:
        raise ValueError(f"buffers must be >= 1, got {buffers}")
    if min(copy_s, compute_s, d2h_s) < 0:
        raise ValueError("stage times must be >= 0 s")
    scenario = scenario or (LOADER_DOUBLE if overlapped else LOADER_SERIAL)
    spans: list[Span] = []
    if not overlapped:
        t = 0.0
        for i in range(n_batches):
            for stream, dur in (("copy (H2D)", copy_s), ("compute", compute_s), ("copy (D2H)", d2h_s)):
                if dur or stream != "copy (D2H)":
                    spans.append(Span(stream, f"{stream.split()[0]} {i}", t, t + dur))
                    t += dur
        return Timeline(scenario, tuple(spans), source)
    copy_end, comp_end, d2h_end = [], [], []
    for i in range(n_batches):
        start = max(copy_end[i - 1] if i else 0.0, comp_end[i - buffers] if i >= buffers else 0.0)
        copy_end.append(start + copy_s)
        spans.append(Span("copy (H2D)", f"copy {i}", start, copy_end[i]))
        c0 = max(comp_end[i - 1] if i else 0.0, copy_end[i])
        comp_end.append(c0 + compute_s)
        spans.append(Span("compute", f"compute {i}", c0, comp_end[i]))
        if d2h_s:
            d0 = max(d2h_end[i - 1] if i else 0.0, comp_end[i])
            d2h_end.append(d0 + d2h_s)
            spans.append(Span("copy (D2H)", f"copy back {i}", d0, d2h_end[i]))
    return Timeline(scenario, tuple(spans), source)


def efficiency_table(frame):
    """Overlap efficiency per (memory, compute_to_copy) from `overlap_run` rows.

    Needs the columns `compute_to_copy` and `repeat` beside the schema's; uses the scenarios
    copy_alone / compute_alone / both. Times are seconds from the scenario's origin — the moment
    its work was submitted (t = 0, as `Tracer` records them) — to its last end, so a hand-off
    delay (a thread waking up, a launch) counts in every scenario alike. Each repeat gives one
    efficiency (its three scenarios ran back to back, so slow drift cancels); the table reports
    their median and quartiles, and the median times.
    """
    import pandas as pd

    f = frame[frame["scenario"].isin(EFFICIENCY_SCENARIOS)].copy()
    if len(f) == 0:
        raise ValueError("no copy_alone / compute_alone / both rows: not an efficiency measurement")
    if "memory" not in f.columns:
        f["memory"] = "pinned"
    t = f.groupby(["memory", "compute_to_copy", "repeat", "scenario"])["end_s"].max().unstack("scenario")
    missing = [s for s in EFFICIENCY_SCENARIOS if s not in t.columns]
    if missing:
        raise ValueError(f"efficiency needs the scenarios {EFFICIENCY_SCENARIOS}; missing {missing}")
    t = t.dropna()
    t["eff"] = [overlap_efficiency(a, b, c) for a, b, c in zip(t[COPY_ALONE], t[COMPUTE_ALONE], t[BOTH])]
    rows = []
    for (memory, ratio), g in t.groupby(level=["memory", "compute_to_copy"]):
        tc, tk, tb = g[COPY_ALONE].median(), g[COMPUTE_ALONE].median(), g[BOTH].median()
        rows.append({"memory": memory, "compute_to_copy": ratio, "t_copy_s": tc, "t_compute_s": tk, "t_both_s": tb,
                     "measured_ratio": tk / tc, "efficiency": float(g["eff"].median()),
                     "efficiency_q1": float(g["eff"].quantile(0.25)), "efficiency_q3": float(g["eff"].quantile(0.75)),
                     "serial_s": tc + tk, "ideal_s": max(tc, tk), "repeats": len(g)})
    return pd.DataFrame(rows)


def duplex_table(frame):
    """Full duplex from `overlap_run` rows: each direction alone vs both at once (GPU runs only).

    Times as in `efficiency_table`: from the scenario's origin to its last end; medians over repeats.
    """
    import pandas as pd

    f = frame[frame["scenario"].isin((H2D_ALONE, D2H_ALONE, DUPLEX))]
    if len(f) == 0:
        return pd.DataFrame()
    g = f.groupby(["repeat", "scenario"]).agg(end=("end_s", "max"), nbytes=("nbytes", "first"))
    t = g["end"].unstack("scenario").median()
    n = float(g["nbytes"].iloc[0])
    return pd.DataFrame([{"nbytes": n, "t_h2d_s": t[H2D_ALONE], "t_d2h_s": t[D2H_ALONE], "t_both_s": t[DUPLEX],
                          "h2d_alone_GBps": n / t[H2D_ALONE] / 1e9, "d2h_alone_GBps": n / t[D2H_ALONE] / 1e9,
                          "bidirectional_GBps": 2 * n / t[DUPLEX] / 1e9,
                          "efficiency": overlap_efficiency(t[H2D_ALONE], t[D2H_ALONE], t[DUPLEX])}])


def recorded_duplex(datasets) -> "object":
    """Recorded full-duplex points: a direction alone vs the same direction while the other runs.

    Reads nvbandwidth `point` datasets that hold both `<dir>_memcpy_ce` (unidirectional) and
    `<dir>_bidirectional_memcpy_ce` (the named direction while the opposite one runs) for the same
    GPU. Returns one row per (dataset, direction, GPU) with `retained` = while-both / alone — 1.0
    would be a perfect full-duplex link. Nothing is derived beyond that ratio.
    """
    import re

    import pandas as pd

    rows = []
    for ds in datasets:
        f = ds.frame
        if ds.kind != "point" or "quantity" not in f.columns:
            continue
        for direction, key in (("h2d", "host_to_device"), ("d2h", "device_to_host")):
            uni = f[f["quantity"].str.contains(f"{key}_memcpy_ce", regex=False)]
            bi = f[f["quantity"].str.contains(f"{key}_bidirectional_memcpy_ce", regex=False)]
            gpu_of = lambda q: (re.search(r"GPU (\d+)", q) or [None, "0"])[1]  # noqa: E731
            alone = {gpu_of(q): v for q, v in zip(uni["quantity"], uni["value"])}
            for q, v in zip(bi["quantity"], bi["value"]):
                g = gpu_of(q)
                if g in alone:
                    rows.append({"dataset": ds.name, "label": ds.label, "title": ds.meta["title"], "direction": direction,
                                 "gpu": int(g), "alone_GBps": float(alone[g]), "while_other_runs_GBps": float(v),
                                 "retained": float(v) / float(alone[g])})
    return pd.DataFrame(rows, columns=DUPLEX_COLUMNS)


DUPLEX_COLUMNS = ["dataset", "label", "title", "direction", "gpu", "alone_GBps", "while_other_runs_GBps", "retained"]


def recorded_duplex_for(reference):
    """(recorded_duplex rows, note) for a notebook's `reference=` (see reference.select): a reference
    whose own point data hold no full-duplex pair gives the shipped ones, and the note says so."""
    from . import reference as ref

    sets, note = ref.select(reference, "point", usable=lambda own: not recorded_duplex(own).empty,
                            needs="nvbandwidth's `*_bidirectional_memcpy_ce` beside `*_memcpy_ce`")
    return recorded_duplex(sets), note


# --------------------------------------------------------------------------- streams and events
class HostEvent:
    """A CPU event: set by the stream that records it, with the time it fired (perf_counter s)."""

    def __init__(self):
        self._flag = threading.Event()
        self.time_s: float | None = None

    def fire(self) -> None:
        self.time_s = time.perf_counter()
        self._flag.set()

    def query(self) -> bool:
        return self._flag.is_set()

    def synchronize(self, timeout: float | None = None) -> None:
        if not self._flag.wait(timeout):
            raise TimeoutError(f"host event not reached within {timeout} s")


class _Done:
    """The handle of work that ran (or was enqueued on a GPU) in the calling thread."""

    def __init__(self, value):
        self._value = value

    def result(self, timeout=None):
        return self._value

    def done(self) -> bool:
        return True


class InlineStream:
    """The calling thread seen as a stream: work runs at once; `wait` blocks the thread."""

    kind = "host"

    def __init__(self, name: str = "compute"):
        self.name = name

    def mark(self) -> float:
        return time.perf_counter()

    def run(self, fn: Callable[[], object], *, name: str | None = None, tracer: "Tracer | None" = None):
        t0 = time.perf_counter()
        value = fn()
        if tracer is not None:
            tracer.add(self.name, name or "work", t0, time.perf_counter())
        return _Done(value)

    def record(self) -> HostEvent:
        ev = HostEvent()
        ev.fire()
        return ev

    def wait(self, event) -> None:
        event.synchronize()

    def synchronize(self) -> None:
        pass

    def close(self) -> None:
        pass


class HostStream:
    """A CPU stand-in for a CUDA stream: one worker thread runs submitted work in order.

    `run` returns a Future at once (like a kernel launch); `record()` returns an event that fires
    when the worker reaches it; `wait(event)` makes *later* work on this stream wait for the event
    (the calling thread does not block). Close it (or use `with`) to stop the worker.
    """

    kind = "host"

    def __init__(self, name: str = "copy"):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"labkit-stream-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            task()

    def _put(self, task) -> None:
        if self._closed:
            raise RuntimeError(f"host stream {self.name!r} is closed")
        self._queue.put(task)

    def mark(self) -> float:
        return time.perf_counter()

    def run(self, fn: Callable[[], object], *, name: str | None = None, tracer: "Tracer | None" = None):
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def task():
            if not fut.set_running_or_notify_cancel():
                return
            t0 = time.perf_counter()
            try:
                value = fn()
            except BaseException as e:  # handed to whoever calls .result()
                fut.set_exception(e)
            else:
                fut.set_result(value)
            finally:
                if tracer is not None:
                    tracer.add(self.name, name or "work", t0, time.perf_counter())

        self._put(task)
        return fut

    def record(self) -> HostEvent:
        ev = HostEvent()
        self._put(ev.fire)
        return ev

    def wait(self, event: HostEvent) -> None:
        def task():
            while not event._flag.wait(_POLL_S):
                if self._closed:
                    return

        self._put(task)

    def synchronize(self) -> None:
        self.record().synchronize()

    def close(self, timeout: float = 5.0) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CudaStream:
    """A torch.cuda.Stream behind the same interface; spans are timed by CUDA events on the GPU."""

    kind = "cuda"

    def __init__(self, name: str = "copy", stream=None, device: int = 0):
        require_cuda("CudaStream", hint=", or use HostStream")
        import torch

        self.name = name
        self.stream = stream if stream is not None else torch.cuda.Stream(device=device)

    def _event(self):
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record(self.stream)
        return ev

    def mark(self):
        return self._event()

    def run(self, fn: Callable[[], object], *, name: str | None = None, tracer: "Tracer | None" = None):
        import torch

        with torch.cuda.stream(self.stream):
            start = self._event() if tracer is not None else None
            value = fn()
            if tracer is not None:
                tracer.add(self.name, name or "work", start, self._event())
        return _Done(value)

    def record(self):
        return self._event()

    def wait(self, event) -> None:
        self.stream.wait_event(event)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        self.synchronize()


class Tracer:
    """Collects spans from streams and turns their time marks into seconds from one origin.

    Host marks are perf_counter floats; CUDA marks are timing events, converted with
    `origin.elapsed_time(event)` after they have completed — GPU timestamps, not host guesses.
    """

    def __init__(self, origin_stream):
        self.origin = origin_stream.mark()
        self._rows: list[tuple[str, str, object, object]] = []
        self._lock = threading.Lock()

    def add(self, stream: str, name: str, start, end) -> None:
        with self._lock:
            self._rows.append((stream, name, start, end))

    def _seconds(self, mark) -> float:
        if isinstance(mark, float):
            return mark - self.origin
        mark.synchronize()
        return self.origin.elapsed_time(mark) / 1e3

    def timeline(self, scenario: str, source: str) -> Timeline:
        with self._lock:
            rows = list(self._rows)
        spans = tuple(Span(st, nm, self._seconds(a), self._seconds(b)) for st, nm, a, b in rows)
        return Timeline(scenario, tuple(sorted(spans, key=lambda s: (s.start_s, s.stream))), source)


# --------------------------------------------------------------------------- the double-buffered loader
def double_buffered(batches: Iterable, copy: Callable[[object, int], object], *, copy_stream, compute_stream,
                    buffers: int = 2, tracer: Tracer | None = None) -> Iterator:
    """Yield copy(batch, slot) for each batch, copying the next batches while the current one is used.

    `copy(batch, slot)` must enqueue (or do) the copy of `batch` into buffer `slot` (0 ≤ slot <
    buffers) on the current stream and return what the consumer should use (e.g. the device
    buffer). On a GPU: `lambda b, s: dst[s].copy_(b, non_blocking=True)` with pinned `b`.

    What makes it correct, not merely fast:
    1. the compute stream waits on the event recorded right after *this* batch's copy (not on the
       copy stream as a whole, and not on nothing);
    2. a buffer is refilled only after the compute stream has recorded an event behind all the
       work the consumer enqueued while holding it (the consumer holds a batch until it asks for
       the next one), and the copy stream waits on that event first. The event is recorded
       *before* the copy into that slot is enqueued, so the wait is never on an unrecorded event
       (on CUDA, waiting on an event that was never recorded waits on nothing).
    Each yielded buffer is valid until the next batch is requested.
    """
    if buffers < 2:
        raise ValueError(f"double buffering needs at least 2 buffers, got {buffers}")
    source = iter(enumerate(batches))
    free = collections.deque(range(buffers))
    released: list = [None] * buffers  # event after the last use of each slot
    inflight: collections.deque = collections.deque()  # (index, slot, ready event, handle)
    held: int | None = None
    exhausted = False
    try:
        while True:
            if held is not None:  # the consumer is done with the previous batch: release its buffer
                released[held] = compute_stream.record()
                free.append(held)
                held = None
            while free and not exhausted:  # fill every free buffer
                try:
                    i, batch = next(source)
                except StopIteration:
                    exhausted = True
                    break
                slot = free.popleft()
                if released[slot] is not None:
                    copy_stream.wait(released[slot])  # rule 2: no refill while the buffer is in use
                handle = copy_stream.run(lambda b=batch, s=slot: copy(b, s), name=f"copy {i}", tracer=tracer)
                inflight.append((i, slot, copy_stream.record(), handle))
            if not inflight:
                return
            i, slot, ready, handle = inflight.popleft()
            compute_stream.wait(ready)  # rule 1: wait on this batch's copy
            held = slot
            yield handle.result()
    finally:
        copy_stream.synchronize()  # never leave a copy writing into buffers the caller may free


# --------------------------------------------------------------------------- host experiment
@contextlib.contextmanager
def torch_threads(n: int):
    """Run with torch's intra-op thread count set to n, then restore it (matmul on one core)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


class HostWorkload:
    """Batches in host RAM (the 'dataset'), `buffers` destination buffers (the 'device'), a matmul 'model'.

    copy = numpy.copyto (releases the GIL for large arrays); compute = `units` float32 matmuls of
    HOST_MATRIX² in torch (releases the GIL inside each matmul). Sources are filled with a
    different byte per batch, so a test can tell which batch a buffer holds.
    """

    def __init__(self, nbytes: int, *, buffers: int = 2, sources: int = 4, matrix: int = HOST_MATRIX):
        import torch

        self.nbytes = int(nbytes)
        self.src = [np.full(self.nbytes, (i % 250) + 1, dtype=np.uint8) for i in range(sources)]  # faulted in now
        self.dst = [np.zeros(self.nbytes, dtype=np.uint8) for _ in range(buffers)]
        g = torch.Generator().manual_seed(0)
        self.a = torch.randn(matrix, matrix, generator=g)
        self.out = torch.empty(matrix, matrix)

    def copy(self, batch: int, slot: int):
        np.copyto(self.dst[slot], self.src[batch % len(self.src)])
        return self.dst[slot]

    def compute(self, units: int) -> None:
        import torch

        for _ in range(units):
            torch.mm(self.a, self.a, out=self.out)

    def calibrate(self, repeats: int = 5) -> tuple[float, float]:
        """(seconds per copy, seconds per compute unit), medians of `repeats` host-timed samples."""
        from . import timing

        t_copy = timing.time_host(lambda: self.copy(0, 0), repeats=repeats, inner=1).median_s
        t_unit = timing.time_host(lambda: self.compute(1), repeats=repeats).median_s
        return t_copy, t_unit


def _host_source(threads_note: str = "") -> str:
    from .system import cpu_model

    return f"measured here: host threads ({cpu_model()}){threads_note}"


def measure_host_overlap(nbytes: int = HOST_BATCH_BYTES, ratios: Sequence[float] = DEFAULT_RATIOS, *,
                         repeats: int = DEFAULT_REPEATS, loader_batches: int = LOADER_BATCHES):
    """Real overlap on this CPU: a copy on a worker thread while the main thread computes.

    For each compute/copy ratio r: compute = round(r·T_copy / T_unit) matmuls; each repeat runs
    copy alone, compute alone and both at once (interleaved). Then a loader timeline: serial
    (copy then compute, one thread) vs `double_buffered` (copies on the worker thread) at r = 1.
    Returns an `overlap_run` frame with extra columns compute_to_copy, repeat, nbytes, memory,
    units. Needs two free cores to show overlap; on one busy core the efficiency drops towards 0.
    """
    import pandas as pd

    if nbytes < 1:
        raise ValueError(f"nbytes must be >= 1, got {nbytes}")
    frames = []
    with torch_threads(1), HostStream("copy") as cs:
        main = InlineStream("compute")
        w = HostWorkload(nbytes)
        t_copy, t_unit = w.calibrate()
        source = _host_source()
        for ratio in ratios:
            units = max(1, round(ratio * t_copy / t_unit))
            for rep in range(repeats):
                for scenario in EFFICIENCY_SCENARIOS:
                    tracer = Tracer(main)
                    if scenario != COMPUTE_ALONE:
                        cs.run(lambda rep=rep: w.copy(rep, rep % 2), name="copy", tracer=tracer)
                    if scenario != COPY_ALONE:
                        main.run(lambda u=units: w.compute(u), name="compute", tracer=tracer)
                    cs.synchronize()
                    frames.append(tracer.timeline(scenario, source).to_frame(
                        compute_to_copy=float(ratio), repeat=rep, nbytes=nbytes, memory="host", units=units))
        units = max(1, round(t_copy / t_unit))
        for tl in host_loader_timelines(w, cs, main, units, loader_batches, source):
            frames.append(tl.to_frame(compute_to_copy=1.0, repeat=0, nbytes=nbytes, memory="host", units=units))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["source"] = source
    return out


def host_loader_timelines(w: HostWorkload, copy_stream, main, units: int, n_batches: int, source: str) -> list[Timeline]:
    """Serial (copy then compute on the main thread) and double-buffered loader timelines."""
    tracer = Tracer(main)
    for i in range(n_batches):
        main.run(lambda i=i: w.copy(i, 0), name=f"copy {i}", tracer=tracer)
        main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tracer)
    serial = tracer.timeline(LOADER_SERIAL, source)
    # The serial loop ran both on the main thread; draw its copies on the copy row for comparison.
    serial = dataclasses.replace(serial, spans=tuple(dataclasses.replace(s, stream="copy") if s.name.startswith("copy")
                                                     else s for s in serial.spans))
    tracer = Tracer(main)
    for i, _buf in enumerate(double_buffered(range(n_batches), w.copy, copy_stream=copy_stream,
                                             compute_stream=main, tracer=tracer)):
        main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tracer)
    return [serial, tracer.timeline(LOADER_DOUBLE, source)]


# --------------------------------------------------------------------------- GPU experiment
def measure_gpu_overlap(nbytes: int = GPU_BATCH_BYTES, ratios: Sequence[float] = DEFAULT_RATIOS, *,
                        repeats: int = DEFAULT_REPEATS, device: int = 0, pageable: bool = True,
                        duplex: bool = True, loader_batches: int = LOADER_BATCHES):
    """Copy/compute overlap on a GPU, every span timed by CUDA events.

    Efficiency sweep: H2D copy of `nbytes` from pinned memory on a side stream while matmuls run
    on the current stream (and, if `pageable`, the same from pageable memory: the host blocks
    in the copy, so the compute is launched only after it). Full duplex: an H2D and a D2H copy
    on two streams at once. Loader: serial vs `double_buffered` at compute/copy = 1.
    """
    import pandas as pd
    import torch

    require_cuda("measure_gpu_overlap", hint=", or `labkit bench overlap --backend host`")
    check_pinned_request(2 * nbytes)  # two pinned source buffers
    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    name = torch.cuda.get_device_name(dev)
    source = f"measured here: {name}, CUDA events"
    host = {"pinned": [torch.full((nbytes,), i + 1, dtype=torch.uint8).pin_memory() for i in range(2)]}
    if pageable:
        host["pageable"] = [torch.full((nbytes,), i + 1, dtype=torch.uint8) for i in range(2)]
    dst = [torch.empty(nbytes, dtype=torch.uint8, device=dev) for _ in range(2)]
    back = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    a = torch.randn(GPU_MATRIX, GPU_MATRIX, device=dev)
    out = torch.empty_like(a)

    def compute(units):
        for _ in range(units):
            torch.mm(a, a, out=out)

    main = CudaStream("compute", torch.cuda.current_stream(dev))
    cs = CudaStream("copy (H2D)", device=device)
    ds = CudaStream("copy (D2H)", device=device)

    def timed(fn, n=5):
        fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(n):
            tr = Tracer(main)
            main.run(fn, name="x", tracer=tr)
            samples.append(tr.timeline("calibrate", source).makespan_s)
        return float(np.median(samples))

    t_copy = timed(lambda: dst[0].copy_(host["pinned"][0], non_blocking=True))
    t_unit = timed(lambda: compute(1))
    frames = []
    for memory, bufs in host.items():
        for ratio in ratios:
            units = max(1, round(ratio * t_copy / t_unit))
            for rep in range(repeats):
                for scenario in EFFICIENCY_SCENARIOS:
                    torch.cuda.synchronize()
                    tr = Tracer(main)
                    if scenario != COMPUTE_ALONE:
                        cs.run(lambda r=rep: dst[r % 2].copy_(bufs[r % 2], non_blocking=True), name="copy", tracer=tr)
                    if scenario != COPY_ALONE:
                        main.run(lambda u=units: compute(u), name="compute", tracer=tr)
                    torch.cuda.synchronize()
                    frames.append(tr.timeline(scenario, source).to_frame(
                        compute_to_copy=float(ratio), repeat=rep, nbytes=nbytes, memory=memory, units=units))
    if duplex:
        for rep in range(repeats):
            for scenario in (H2D_ALONE, D2H_ALONE, DUPLEX):
                torch.cuda.synchronize()
                tr = Tracer(main)
                if scenario != D2H_ALONE:
                    cs.run(lambda: dst[0].copy_(host["pinned"][0], non_blocking=True), name="H2D", tracer=tr)
                if scenario != H2D_ALONE:
                    ds.run(lambda: back.copy_(dst[1], non_blocking=True), name="D2H", tracer=tr)
                torch.cuda.synchronize()
                frames.append(tr.timeline(scenario, source).to_frame(
                    compute_to_copy=float("nan"), repeat=rep, nbytes=nbytes, memory="pinned", units=0))
    units = max(1, round(t_copy / t_unit))
    batches = [host["pinned"][i % 2] for i in range(loader_batches)]
    torch.cuda.synchronize()
    tr = Tracer(main)
    for i, b in enumerate(batches):
        main.run(lambda b=b: dst[0].copy_(b, non_blocking=True), name=f"copy {i}", tracer=tr)
        main.run(lambda: compute(units), name=f"compute {i}", tracer=tr)
    torch.cuda.synchronize()
    serial = tr.timeline(LOADER_SERIAL, source)
    serial = dataclasses.replace(serial, spans=tuple(dataclasses.replace(s, stream="copy (H2D)")
                                                     if s.name.startswith("copy") else s for s in serial.spans))
    tr = Tracer(main)
    loader = double_buffered(batches, lambda b, s: dst[s].copy_(b, non_blocking=True),
                             copy_stream=cs, compute_stream=main, tracer=tr)
    for i, _buf in enumerate(loader):
        main.run(lambda: compute(units), name=f"compute {i}", tracer=tr)
    torch.cuda.synchronize()
    for tl in (serial, tr.timeline(LOADER_DOUBLE, source)):
        frames.append(tl.to_frame(compute_to_copy=1.0, repeat=0, nbytes=nbytes, memory="pinned", units=units))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["source"] = source
    return out


def loader_timelines(frame, source: str) -> dict[str, Timeline]:
    """The loader scenarios of an `overlap_run` frame, each shifted to start at 0 s."""
    out = {}
    for scenario in (LOADER_SERIAL, LOADER_DOUBLE):
        if (frame["scenario"] == scenario).any():
            out[scenario] = Timeline.from_frame(frame, source, scenario).shifted()
    return out


# --------------------------------------------------------------------------- recorded data
def reference_sets(reference, kind: str) -> list:
    """The datasets of `kind` a notebook's `reference=` selects (see `reference.resolve_reference`).

    A `reference` naming a dataset of another kind (say a copy sweep, for a notebook that also
    shows overlap runs) selects nothing of this kind, so the shipped datasets of `kind` are used.
    """
    from . import reference as ref

    return ref.select(reference, kind)[0]


def _on_a_gpu(ds) -> bool:
    return ds.meta.get("gpu", "none") != "none"


def recorded_gpu_run(reference):
    """(dataset, note) of the recorded GPU overlap run a notebook's `reference=` selects.

    Its own run comes first (a profile recorded on a GPU); a reference that holds none — a copy sweep,
    a host-only profile, an nvbandwidth log — gives the shipped runs, and `note` says so (see
    reference.select). (None, None) when no GPU overlap run exists at all.
    """
    from . import reference as ref

    sets, note = ref.select(reference, "overlap_run", usable=lambda own: any(map(_on_a_gpu, own)),
                            needs="a run on a GPU")
    runs = [d for d in sets if _on_a_gpu(d)]
    return (runs[0], note) if runs else (None, None)


_QUALITY_RANK = {"A": 0, "B": 1, "C": 2}


def pick_link_sweep(datasets, batch_bytes: int, direction: str = "h2d"):
    """(dataset, α-β fit) of the pinned `direction` sweep best suited to model copies of `batch_bytes`.

    Preference: measured by labkit (a profile) over published; sweeps that reach `batch_bytes`
    (no extrapolation) over those that stop short; better quality grade; more sizes. Fits use
    `models.fit_alpha_beta_from_bandwidth` on rows printed with at least two significant digits.
    Returns (None, None) when no dataset has at least five sizes.
    """
    from .models import fit_alpha_beta_from_bandwidth
    from .reference import precise_rows

    best = None
    for ds in datasets:
        if ds.kind != "copy_sweep" or ds.meta.get("bandwidth_direction") != "unidirectional":
            continue
        f = precise_rows(ds)
        f = f[(f["direction"] == direction) & (f["memory"] == "pinned")]
        if "run" in f.columns and len(f):
            f = f[f["run"] == sorted(set(f["run"]))[0]]
        if f["nbytes"].nunique() < 5:
            continue
        key = (ds.meta.get("provenance") != "measured", f["nbytes"].max() < batch_bytes,
               _QUALITY_RANK.get(ds.meta.get("quality"), 3), -len(f))
        if best is None or key < best[0]:
            best = (key, ds, f)
    if best is None:
        return None, None
    _, ds, f = best
    return ds, fit_alpha_beta_from_bandwidth(f["nbytes"].to_numpy(), f["bandwidth_GBps"].to_numpy())


def loader_self_test(n_batches: int = 12, buffers: int = 2, *, copy_s: float = 0.002, consume_s: float = 0.003) -> dict:
    """Run `double_buffered` on host streams with tagged batches, slow copies and a slow consumer.

    Each copy writes its batch number into the first half of a buffer, sleeps, then the second
    half; the consumer checks the whole buffer on arrival and again after "computing". Returns
    the order seen and whether every buffer was complete and untouched while held.
    """
    bufs = [np.full(1 << 16, -1, dtype=np.int64) for _ in range(buffers)]

    def copy(batch, slot):
        half = len(bufs[slot]) // 2
        bufs[slot][:half] = batch
        time.sleep(copy_s)
        bufs[slot][half:] = batch
        return bufs[slot]

    seen, intact = [], True
    with HostStream("copy") as cs:
        for buf in double_buffered(range(n_batches), copy, copy_stream=cs, compute_stream=InlineStream(), buffers=buffers):
            tag = int(buf[0])
            intact &= bool((buf == tag).all())
            time.sleep(consume_s)
            intact &= bool((buf == tag).all())
            seen.append(tag)
    return {"seen": seen, "in_order_once": seen == list(range(n_batches)), "intact": intact}


# --------------------------------------------------------------------------- figures
_KINDS = (("copy back", "tab:green"), ("compute", "tab:orange"), ("H2D", "tab:blue"), ("D2H", "tab:green"),
          ("copy", "tab:blue"))


def _kind(span_name: str) -> str:
    """The legend entry of a span: the first word(s) of its name that we know a colour for."""
    for key, _ in _KINDS:
        if span_name.startswith(key):
            return key
    return "other"


def _color(span_name: str) -> str:
    return dict(_KINDS).get(_kind(span_name), "tab:gray")


def draw_gantt(ax, timeline: Timeline, *, title: str | None = None, unit: str = "ms", xmax_s: float | None = None):
    """One row per stream, one bar per span; x in ms from the first start. Title carries the source."""
    from matplotlib.patches import Patch

    from .plots import finish

    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    tl = timeline.shifted()
    rows = tl.streams
    for y, stream in enumerate(rows):
        spans = tl.on(stream)
        ax.broken_barh([(s.start_s * scale, max(s.duration_s * scale, 1e-9)) for s in spans], (y - 0.35, 0.7),
                       facecolors=[_color(s.name) for s in spans], edgecolor="black", linewidth=0.4)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first stream on top
    if xmax_s is not None:
        ax.set_xlim(0, xmax_s * scale)
    kinds = list(dict.fromkeys(_kind(s.name) for s in tl.spans))
    ax.legend(handles=[Patch(color=_color(k), label=k) for k in kinds], fontsize=7, loc="lower right")
    finish(ax, title or f"{tl.scenario}: {format_time(tl.makespan_s)} in all", f"time ({unit.replace('us', 'µs')})",
           "stream (row)", source=tl.source, legend=False)
    return ax


def draw_duplex(ax, table):
    """Recorded full duplex: each direction alone vs the same direction while the other runs."""
    from .plots import finish

    import re
    import textwrap

    from matplotlib.ticker import FuncFormatter, ScalarFormatter

    labels = ["\n".join(textwrap.wrap(re.split(r"[:,(]", t)[0].strip(), 9)) + f"\n{d.upper()}, GPU {g}"
              for t, d, g in zip(table["title"], table["direction"], table["gpu"])]
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["alone_GBps"], 0.4, label="alone (unidirectional)", color="tab:blue")
    ax.bar(x + 0.2, table["while_other_runs_GBps"], 0.4, color="tab:purple",
           label="same direction while the other runs (bidirectional test; % of alone on top)")
    for xi, r, v in zip(x, table["retained"], table["while_other_runs_GBps"]):
        ax.annotate(f"{100 * r:.0f}%", (xi + 0.2, v), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
    ax.set_xticks(x, labels, fontsize=6.5)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    finish(ax, "Full duplex: does one direction keep its bandwidth while the other runs?", "GPU and direction (label)",
           "bandwidth of that direction (GB/s)", source="recorded: nvbandwidth copy-engine tests — sources in the text")


def draw_efficiency(ax, table, label: str, how: str = "measured", **kw):
    """Efficiency vs measured compute/copy ratio, with the per-repeat IQR as error bars."""
    from .plots import line

    t = table.sort_values("measured_ratio")
    h = line(ax, t["measured_ratio"], t["efficiency"], label, how=how, **kw)
    # the spread of the per-repeat efficiencies (q1..q3); the point, from median times, may lie outside it
    ax.vlines(t["measured_ratio"], t["efficiency_q1"], t["efficiency_q3"], color=h.get_color(), alpha=0.5, lw=3)
    return h


# --------------------------------------------------------------------------- bench and record
def bench_arguments(p, name: str) -> None:
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "host"],
                   help="cuda: streams on a GPU; host: threads on this CPU; auto: cuda if a GPU is visible")
    p.add_argument("--size", help=f"bytes per batch (default {format_bytes(GPU_BATCH_BYTES)} on a GPU, "
                                  f"{format_bytes(HOST_BATCH_BYTES)} on the host)")
    p.add_argument("--ratios", help="compute/copy time ratios, e.g. 0.25,1,4")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--no-pageable", action="store_true", help="GPU: skip the pageable-memory runs")
    p.add_argument("--quick", action="store_true")


def _backend(choice: str) -> str:
    from .runtime import gpu_count

    if choice == "auto":
        return "cuda" if gpu_count() else "host"
    if choice == "cuda":
        require_cuda("labkit bench overlap --backend cuda", hint=", or `labkit bench overlap --backend host`")
    return choice


def bench(args, name: str):
    """One record per (memory, ratio) with the efficiency, one per loader scenario, one for duplex."""
    from .units import parse_size

    backend = _backend(args.backend)
    ratios = [float(r) for r in args.ratios.split(",")] if args.ratios else list(QUICK_RATIOS if args.quick else DEFAULT_RATIOS)
    if any(r <= 0 for r in ratios):
        raise ValueError("compute/copy ratios must be positive")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if backend == "cuda":
        size = parse_size(args.size) if args.size else (GPU_QUICK_BATCH_BYTES if args.quick else GPU_BATCH_BYTES)
        frame = measure_gpu_overlap(size, ratios, repeats=args.repeats, device=args.device, pageable=not args.no_pageable)
        import torch

        where = torch.cuda.get_device_name(args.device)
    else:
        size = parse_size(args.size) if args.size else (HOST_QUICK_BATCH_BYTES if args.quick else HOST_BATCH_BYTES)
        frame = measure_host_overlap(size, ratios, repeats=args.repeats)
        from .system import cpu_model

        where = f"host threads ({cpu_model()})"
    yield from summary_records(frame, backend, where)


def summary_records(frame, backend: str, where: str):
    """JSON-able records summarising an `overlap_run` frame (what `labkit bench overlap` prints)."""
    base = {"experiment": "overlap", "backend": backend, "device": where}
    for r in efficiency_table(frame).to_dict("records"):
        yield {**base, "test": "efficiency", "memory": r["memory"], "nbytes": int(frame["nbytes"].iloc[0]),
               "compute_to_copy": r["compute_to_copy"], "measured_ratio": r["measured_ratio"],
               "t_copy_s": r["t_copy_s"], "t_compute_s": r["t_compute_s"], "t_both_s": r["t_both_s"],
               "efficiency": r["efficiency"], "efficiency_q1": r["efficiency_q1"], "efficiency_q3": r["efficiency_q3"],
               "repeats": r["repeats"]}
    d = duplex_table(frame)
    for r in d.to_dict("records"):
        yield {**base, "test": "full_duplex", **r, "bandwidth_direction": "bidirectional"}
    for scenario, tl in loader_timelines(frame, where).items():
        yield {**base, "test": "loader", "scenario": scenario, "batches": len(tl.on("compute")),
               "step_s": tl.step_s("compute"), "makespan_s": tl.makespan_s}


def record(folder, quick: bool, env: dict) -> list[str]:
    """Write `host_overlap_run` (always) and `gpu_overlap_run` (when a GPU is visible)."""
    from .provenance import measured_meta
    from .reference import write_dataset

    names = []
    frame = measure_host_overlap(HOST_QUICK_BATCH_BYTES if quick else HOST_BATCH_BYTES,
                                 QUICK_RATIOS if quick else DEFAULT_RATIOS,
                                 repeats=QUICK_REPEATS if quick else DEFAULT_REPEATS,
                                 loader_batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES)
    meta = measured_meta(env, kind="overlap_run", title="copy/compute overlap between host threads",
                         bandwidth_direction="none",
                         method=("labkit.overlap.measure_host_overlap: numpy.copyto on a worker thread (HostStream) while "
                                 "torch matmuls (1 intra-op thread) run on the main thread; copy alone, compute alone, "
                                 "both, interleaved per repeat; perf_counter timestamps; plus serial vs double-buffered "
                                 "loader timelines"),
                         caveats="host threads, not a GPU: shows overlap on this CPU's cores, limited by cores, "
                                 "memory bandwidth and the GIL; other load on the machine lowers the efficiency")
    meta["gpu"], meta["gpu_count"] = "none", 0  # the host experiment uses no GPU even on a GPU machine
    write_dataset(folder, "host_overlap_run", frame, meta)
    names.append("host_overlap_run")
    if env.get("cuda_available"):
        frame = measure_gpu_overlap(GPU_QUICK_BATCH_BYTES if quick else GPU_BATCH_BYTES,
                                    QUICK_RATIOS if quick else DEFAULT_RATIOS,
                                    repeats=QUICK_REPEATS if quick else DEFAULT_REPEATS,
                                    loader_batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES)
        write_dataset(folder, "gpu_overlap_run", frame, measured_meta(
            env, kind="overlap_run", title="copy/compute overlap and full duplex on CUDA streams",
            bandwidth_direction="none",
            method=("labkit.overlap.measure_gpu_overlap: H2D copy_(non_blocking=True) on a side stream, "
                    f"{GPU_MATRIX}x{GPU_MATRIX} float32 matmuls on the current stream; pinned and pageable sources; "
                    "H2D + D2H on two streams (full duplex); serial vs double-buffered loader; CUDA event timestamps"),
            caveats="times are CUDA event timestamps relative to an origin event on the compute stream"))
        names.append("gpu_overlap_run")
    return names
