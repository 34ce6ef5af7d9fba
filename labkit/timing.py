"""Timing: every timing loop of labkit — host timer, CUDA events, behind a spin kernel, CUDA graph.

`time_host` and `time_cuda` borrow from triton.testing.do_bench and nvbandwidth, without all of either:
no L2 flush between samples (do_bench has one) and no spin kernel holding the stream while copies are
queued (nvbandwidth's: `time_blocked` adds it where the host's issue cost matters):

1. warm up (the first calls pay for lazy initialisation, page faults and clock ramp-up);
2. estimate one call's time and size the inner loop so that one sample lasts at least
   `MIN_SAMPLE_S` (a timer cannot resolve a 4-byte copy on its own);
3. take `repeats` samples, each the mean of `inner` back-to-back calls — on the GPU between one
   pair of CUDA events on one stream, synchronised once at the end of the sample;
4. keep every raw sample; the median and IQR are derived on demand, and the result warns about
   itself when the spread is too large to trust.

A `Measurement` keeps seconds *per call*, so bandwidth is always nbytes / seconds. `sampled` is that method
with the clock left open (`time_host` and `time_cuda` give it theirs); `inner_for` is its one calibration rule.
`time_collectives` is nccl-tests' loop for collectives on many ranks: one `time_host` sample per barrier.

`time_blocked` (p2pBandwidthLatencyTest's delay kernel, nvbandwidth's spin kernel) and `time_graph`
take a *stream*: the one stream interface of labkit (`FakeStream` here, a simulated CUDA stream for
tests; `CudaEventStream` on a GPU; `labkit.overlap.streams` adds host streams, `run` and `wait(event)`).
A stream has `record()` → event, `query(event)` (has the stream reached it?), `elapsed(a, b)` (seconds),
`synchronize()` and `clock()` (host seconds); `time_blocked` also needs `block(seconds)` (hold the stream
with a spin: CUDA and simulated streams; a host thread cannot be held that way).
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


def inner_for(estimate_s: float, min_sample_s: float = MIN_SAMPLE_S, max_inner: int = MAX_INNER) -> int:
    """The one calibration rule: calls per sample so that a sample of calls of `estimate_s` lasts ≥ `min_sample_s`
    (at least 1, at most `max_inner`)."""
    if estimate_s <= 0:
        return max_inner
    return int(min(max_inner, max(1, np.ceil(min_sample_s / estimate_s - 1e-6))))


def sampled(
    sample: Callable[[int], float],
    warm: Callable[[], object],
    timer: str,
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = WARMUP_CALLS,
    inner: int | None = None,
    min_sample_s: float = MIN_SAMPLE_S,
    label: str = "",
    nbytes: int | None = None,
    estimate_calls: int = 1,
) -> Measurement:
    """The method of every timer here, whatever the clock: `warmup` calls of `warm`; unless `inner` is given,
    one sample of `estimate_calls` calls sizes `inner` (`inner_for`); then `repeats` samples of `inner` calls.
    `sample(calls)` returns seconds per call of `calls` back-to-back calls; `timer` names its clock."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        warm()
    if inner is None:
        inner = inner_for(sample(estimate_calls), min_sample_s)
    return Measurement(tuple(sample(inner) for _ in range(repeats)), inner, timer, label, nbytes)


def time_host(
    fn: Callable[[], object],
    *,
    clock: Callable[[], float] = time.perf_counter,
    setup: Callable[[], object] | None = None,
    sync: Callable[[], object] | None = None,
    **plan,
) -> Measurement:
    """Time a host-side call (or a synchronous GPU call) with a wall clock; `plan` is `sampled`'s keywords
    (repeats, warmup, inner, min_sample_s, label, nbytes).

    `clock` can be injected so tests can drive the timer deterministically. `setup` (as in
    torch.utils.benchmark) runs untimed before every warm-up call and every sample — e.g. emptying a
    cache so each sample is cold; with it, pass `inner=1` so each sample is one cold call. `sync` runs
    once at the end of every sample, inside the timing (nccl-tests' one wait after `iters` calls): it
    drains work that `fn` only enqueued.
    """
    setup = setup or (lambda: None)
    sync = sync or (lambda: None)

    def warm():
        setup()
        fn()

    def sample(calls: int) -> float:
        setup()
        t0 = clock()
        for _ in range(calls):
            fn()
        sync()
        return (clock() - t0) / calls

    return sampled(sample, warm, "host", **plan)


def time_cuda(fn: Callable[[], object], *, stream=None, **plan) -> Measurement:
    """Time asynchronous GPU work with one pair of CUDA events per sample on one stream (`time_events`);
    `plan` is `sampled`'s keywords. One call's time is estimated from 5 calls.

    `fn` must enqueue its work on the current stream (e.g. `dst.copy_(src, non_blocking=True)`
    with pinned host memory). Pageable copies are synchronous from the host's side: time those
    with `time_host` around a synchronised copy instead.
    """
    require_cuda("time_cuda")
    import torch

    events = CudaEventStream(stream)
    with torch.cuda.stream(events.stream):
        return sampled(lambda calls: time_events(events, fn, calls), fn, "cuda_event", estimate_calls=5, **plan)


def time_collectives(
    calls: dict[str, Callable[[], object]],
    *,
    repeats: int,
    warmup: int,
    barrier: Callable[[], object],
    sync: Callable[[], object] = lambda: None,
    prepare: Callable[[str], object] = lambda name: None,
    before: Callable[[int, str], object] = lambda rep, name: None,
    inner: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """This rank's seconds per call of each collective in `calls` — the one timing loop behind every busbw labkit reports.

    nccl-tests' method (common.cu, BenchTime: a barrier, then `iters` back-to-back collectives, waited for
    once at the end), with one sample per barrier so the spread across samples is kept:

    1. warm up: `warmup` untimed calls of each (connections, page faults, allocator);
    2. per repetition, the collectives take turns (a busy moment of the machine hits them alike); each:
       `prepare(name)` restores its input (untimed), `sync()` drains the device, `barrier()` — every rank
       leaves it together, so no sample carries a peer's lateness from the sample before —, `before(rep,
       name)` (teaching hooks: a straggler's sleep, an injected failure), then `inner` calls back to back
       and one `sync()`; seconds per call = elapsed / inner (one `time_host` sample, with that set-up
       and that sync).

    Every rank must call this with the same arguments. Combine the ranks with `labkit.collectives.slowest_rank`.
    """
    if repeats < 1 or inner < 1:
        raise ValueError(f"repeats and inner must be >= 1, got {repeats} and {inner}")
    for name, fn in calls.items():
        for _ in range(warmup):
            prepare(name)
            fn()
    sync()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for rep in range(repeats):
        for name, fn in calls.items():

            def setup(name=name, rep=rep):
                prepare(name)
                sync()
                barrier()
                before(rep, name)

            m = time_host(fn, repeats=1, warmup=0, inner=inner, setup=setup, sync=sync, clock=clock)
            samples[name].append(m.samples_s[0])
    return samples


#: A spin lasts SPIN_MARGIN × the host's measured issue time of one batch, plus SPIN_FLOOR_S, so every
#: call is queued before the stream is released (p2pBandwidthLatencyTest sizes its delay kernel alike).
SPIN_MARGIN, SPIN_FLOOR_S = 2.0, 1e-3
#: A blocked sample whose spin ended too early is retried with the spin doubled, at most this often.
MAX_SPIN_RETRIES = 3
#: `torch.cuda._sleep` cycles timed once per device to convert seconds of spin into cycles.
CALIBRATION_CYCLES = 10_000_000


@dataclasses.dataclass(frozen=True)
class Blocked:
    """`time_blocked`'s result: per-call seconds of the GPU (stream held while queuing), of the host's issue,
    and (when asked) of the same calls without a spin; `retries` = samples redone with a longer spin,
    `released_early` = samples kept although the spin still ended before the queue was full."""

    gpu: Measurement
    issue_s: tuple[float, ...]
    pipelined_s: tuple[float, ...]
    retries: int
    released_early: int

    @property
    def warnings(self) -> list[str]:
        return released_early_warnings(self.gpu.label, self.released_early, len(self.gpu.samples_s))


def released_early_warnings(label: str, released_early: int, samples: int) -> list[str]:
    """The warning of a `time_blocked` run some of whose samples were kept although the spin ended early."""
    if not released_early:
        return []
    return [
        f"{label + ': ' if label else ''}{released_early} of {samples} samples: the host could not queue the copies "
        f"ahead of the GPU even with a spin {2**MAX_SPIN_RETRIES}× longer; this latency includes host time (an upper "
        "bound)"
    ]


def time_blocked(
    stream,
    fn: Callable[[], object],
    *,
    calls: int,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = WARMUP_CALLS,
    spin_s: float | None = None,
    unblocked: bool = False,
    label: str = "",
    nbytes: int | None = None,
) -> Blocked:
    """Per-call device time of `calls` back-to-back calls of fn queued behind a spin on `stream`.

    When one call takes the GPU less time than the host needs to issue the next, an event pair around
    a Python loop measures the host, not the GPU. nvbandwidth and p2pBandwidthLatencyTest hold the
    stream with a spin kernel until every call and both events are queued. Step by step:

    1. warm up; time the host issuing one batch of `calls` (untimed by events), synchronise;
    2. spin = `spin_s`, or SPIN_MARGIN × that issue time + SPIN_FLOOR_S;
    3. per sample: block(spin), record start, issue the calls (host-timed: the issue cost), record end;
       if the stream had already reached `start` when the host finished issuing, the spin ended early
       and the sample measures host time, not GPU time;
    4. (with `unblocked`) the same calls between one event pair without a spin: what a plain loop reports.

    The one retry rule: an early-released sample is redone with the spin doubled (the longer spin is
    kept for later samples), at most MAX_SPIN_RETRIES times; after that the last try is kept, counted
    in `released_early` and warned about, and the next sample starts from the spin this one started
    with (otherwise the spin would grow 2^MAX_SPIN_RETRIES-fold per such sample, without bound). Why not raise: a spin 8× the measured issue time plus 1 ms that
    still ends early means the host was descheduled mid-batch; more doubling only lengthens the run,
    raising would throw away the valid samples of the run, and the kept sample is still an upper bound
    of the GPU time (t ≈ max(t_gpu, t_issue)) — so it is kept, labelled, never silently.
    """
    if repeats < 1 or calls < 1:
        raise ValueError(f"repeats and calls must be >= 1, got {repeats} and {calls}")
    for _ in range(warmup):
        fn()
    stream.synchronize()
    t0 = stream.clock()
    for _ in range(calls):
        fn()
    batch_issue_s = stream.clock() - t0
    stream.synchronize()
    spin = SPIN_MARGIN * batch_issue_s + SPIN_FLOOR_S if spin_s is None else spin_s
    gpu, issue, pipe = [], [], []
    retries = early = 0
    for _ in range(repeats):
        spin_before = spin
        for attempt in range(MAX_SPIN_RETRIES + 1):
            stream.block(spin)
            start = stream.record()
            t0 = stream.clock()
            for _ in range(calls):
                fn()
            t1 = stream.clock()
            end = stream.record()
            too_early = stream.query(start)  # the stream reached `start` before the host finished issuing
            stream.synchronize()
            if not too_early:
                break
            if attempt < MAX_SPIN_RETRIES:
                retries += 1
                spin *= 2
        else:  # doubling did not help (the host, not the spin, was late): later samples start from the old spin
            early += 1
            spin = spin_before
        gpu.append(stream.elapsed(start, end) / calls)
        issue.append((t1 - t0) / calls)
        if unblocked:
            pipe.append(time_events(stream, fn, calls))
    m = Measurement(tuple(gpu), calls, "cuda_event", label, nbytes)
    return Blocked(m, tuple(issue), tuple(pipe), retries, early)


def time_events(stream, fn: Callable[[], object], calls: int) -> float:
    """One sample: seconds per call of `calls` calls of fn between one event pair on `stream`, synchronised."""
    start = stream.record()
    for _ in range(calls):
        fn()
    end = stream.record()
    stream.synchronize()
    return stream.elapsed(start, end) / calls


def time_graph(stream, replay: Callable[[], object], calls: int, repeats: int = DEFAULT_REPEATS) -> tuple[float, ...]:
    """Per-call device seconds of a CUDA graph of `calls` calls, replayed by one host call per sample
    (after one warm-up replay); `replay` enqueues one replay (torch: `CUDAGraph.replay`)."""
    replay()
    stream.synchronize()
    return tuple(time_events(stream, replay, 1) / calls for _ in range(repeats))


#: `torch.cuda._sleep` cycles per second, per device: the one calibration, measured once per process.
_SPIN_CYCLES_PER_S: dict[int, float] = {}


def spin_cycles_per_s(device: int) -> float:
    """How many `torch.cuda._sleep` cycles one second of spin takes on `device` (timed once, then cached).

    `_sleep` (aten/src/ATen/cuda/Sleep.cu) spins on `clock64()`, the SM's cycle counter, on the current stream;
    `a` and `b` are on that stream too, so `b.synchronize()` leaves both complete. elapsed_time is in ms."""
    import torch

    if device not in _SPIN_CYCLES_PER_S:
        with torch.cuda.device(device):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # One untimed spin first: the kernel's first launch loads it (lazy loading, the default on Linux since
            # CUDA 12.2 and set by torch) while the stream already stands past `a`, and an idle SM clock is still
            # ramping; timed, both would read as fewer cycles per second, so every spin would be too short.
            torch.cuda._sleep(CALIBRATION_CYCLES)
            a.record()
            torch.cuda._sleep(CALIBRATION_CYCLES)
            b.record()
            b.synchronize()
            _SPIN_CYCLES_PER_S[device] = CALIBRATION_CYCLES / (a.elapsed_time(b) / 1e3)
    return _SPIN_CYCLES_PER_S[device]


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


class CudaEventStream:  # pragma: no cover - needs a GPU
    """A torch.cuda.Stream behind the stream interface: CUDA timing events, a `torch.cuda._sleep` spin
    (a private helper torch's own tests use) calibrated by `spin_cycles_per_s`. Default: the current stream."""

    def __init__(self, stream=None, device: int | None = None):
        require_cuda("CudaEventStream")
        import torch

        self.torch = torch
        if stream is None:
            stream = torch.cuda.current_stream(device)
        self.stream = stream
        self.device = stream.device.index if stream.device.index is not None else torch.cuda.current_device()

    def clock(self) -> float:
        return time.perf_counter()

    def block(self, seconds: float) -> None:
        cycles = int(seconds * spin_cycles_per_s(self.device))
        with self.torch.cuda.device(self.device), self.torch.cuda.stream(self.stream):
            self.torch.cuda._sleep(cycles)

    def record(self):
        e = self.torch.cuda.Event(enable_timing=True)
        e.record(self.stream)
        return e

    def query(self, event) -> bool:
        return bool(event.query())

    def elapsed(self, a, b) -> float:
        return a.elapsed_time(b) / 1e3

    def wait(self, event) -> None:
        self.stream.wait_event(event)

    def synchronize(self) -> None:
        self.stream.synchronize()


def summarize(measurements: Sequence[Measurement]) -> list[str]:
    """All self-warnings of a batch of measurements, one line each."""
    return [w for m in measurements for w in m.warnings]
