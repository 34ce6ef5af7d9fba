"""Streams with one interface: a CUDA stream, a host worker thread standing in for one, the calling thread; and the double-buffered loader.

`CudaStream` (a torch.cuda.Stream; spans timed by CUDA events), `HostStream` (a worker thread that runs
work in order — a CPU stand-in for a stream) and `InlineStream` (the calling thread) share labkit's one
stream interface (`labkit.timing`: `record()`, `query(event)`, `elapsed(a, b)`, `synchronize()`,
`clock()`; `CudaStream` *is* a `timing.CudaEventStream`), plus `run` and `wait(event)`; a `Tracer` turns
their time marks into a `Timeline`.
`double_buffered` copies batch i+1 while batch i is used, with the two rules that make it correct.
"""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import threading
import time
from typing import Callable, Iterable, Iterator

from ..runtime import require_cuda
from ..timing import CudaEventStream
from .timelines import Span, Timeline

#: How often a host stream blocked in `wait` checks whether it was closed (s).
_POLL_S = 0.05


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


class _HostClock:
    """What the host streams share: perf_counter time marks and `HostEvent`s."""

    kind = "host"

    def clock(self) -> float:
        return time.perf_counter()

    def query(self, event: HostEvent) -> bool:
        return event.query()

    def elapsed(self, a: HostEvent, b: HostEvent) -> float:
        """Seconds between two fired events (perf_counter)."""
        return b.time_s - a.time_s

    def mark(self) -> float:
        return time.perf_counter()


class InlineStream(_HostClock):
    """The calling thread seen as a stream: work runs at once; `wait` blocks the thread."""

    def __init__(self, name: str = "compute"):
        self.name = name

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


class HostStream(_HostClock):
    """A CPU stand-in for a CUDA stream: one worker thread runs submitted work in order.

    `run` returns a Future at once (like a kernel launch); `record()` returns an event that fires
    when the worker reaches it; `wait(event)` makes *later* work on this stream wait for the event
    (the calling thread does not block). Close it (or use `with`) to stop the worker.
    """

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


class CudaStream(CudaEventStream):
    """A torch.cuda.Stream behind the same interface; spans are timed by CUDA events on the GPU."""

    kind = "cuda"

    def __init__(self, name: str = "copy", stream=None, device: int = 0):
        require_cuda("CudaStream", hint=", or use HostStream")
        import torch

        self.name = name
        super().__init__(stream if stream is not None else torch.cuda.Stream(device=device))

    def _event(self):
        return self.record()

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
        # cudaEventElapsedTime needs *both* events completed, else cudaErrorNotReady (CUDA Runtime API, Event
        # Management); torch's Event.elapsed_time raises it (aten/src/ATen/cuda/CUDAEvent.h). The origin is on the
        # origin stream and a span's mark often on another (a copy stream): waiting for the mark alone does not
        # wait for the origin. elapsed_time is in milliseconds (torch.cuda.Event docs).
        self.origin.synchronize()
        mark.synchronize()
        return self.origin.elapsed_time(mark) / 1e3

    def timeline(self, scenario: str, source: str) -> Timeline:
        with self._lock:
            rows = list(self._rows)
        spans = tuple(Span(st, nm, self._seconds(a), self._seconds(b)) for st, nm, a, b in rows)
        return Timeline(scenario, tuple(sorted(spans, key=lambda s: (s.start_s, s.stream))), source)


def double_buffered(
    batches: Iterable,
    copy: Callable[[object, int], object],
    *,
    copy_stream,
    compute_stream,
    buffers: int = 2,
    tracer: Tracer | None = None,
) -> Iterator:
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
