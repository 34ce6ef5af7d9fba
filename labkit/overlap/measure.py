"""Overlap measured: copies and compute at once on host threads (any CPU) and on CUDA streams (a GPU).

For each compute/copy time ratio, each repeat runs copy alone, compute alone and both at once
(interleaved, so slow drift hits all three alike); then a serial and a double-buffered loader timeline.
Both return an `overlap_run` frame (labkit.overlap.timelines) with the extra columns compute_to_copy,
repeat, nbytes, memory, units.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Sequence

import numpy as np

from .. import timing
from ..runtime import Found, require_cuda
from ..system import cpu_model
from ..units import MiB, check_pinned_request
from .streams import CudaStream, HostStream, InlineStream, Tracer, double_buffered
from .timelines import (
    COMPUTE_ALONE,
    COPY_ALONE,
    D2H_ALONE,
    DUPLEX,
    EFFICIENCY_SCENARIOS,
    H2D_ALONE,
    LOADER_DOUBLE,
    LOADER_SERIAL,
    Timeline,
)

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
        t_copy = timing.time_host(lambda: self.copy(0, 0), repeats=repeats, inner=1).median_s
        t_unit = timing.time_host(lambda: self.compute(1), repeats=repeats).median_s
        return t_copy, t_unit


def _host_source(threads_note: str = "") -> str:
    return f"measured here: host threads ({cpu_model()}){threads_note}"


def measure_host_overlap(
    nbytes: int = HOST_BATCH_BYTES,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    *,
    repeats: int = DEFAULT_REPEATS,
    loader_batches: int = LOADER_BATCHES,
):
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
                    frames.append(
                        tracer.timeline(scenario, source).to_frame(
                            compute_to_copy=float(ratio), repeat=rep, nbytes=nbytes, memory="host", units=units
                        )
                    )
        units = max(1, round(t_copy / t_unit))
        for tl in host_loader_timelines(w, cs, main, units, loader_batches, source):
            frames.append(tl.to_frame(compute_to_copy=1.0, repeat=0, nbytes=nbytes, memory="host", units=units))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["source"] = source
    return out


def host_loader_timelines(
    w: HostWorkload, copy_stream, main, units: int, n_batches: int, source: str
) -> list[Timeline]:
    """Serial (copy then compute on the main thread) and double-buffered loader timelines."""
    tracer = Tracer(main)
    for i in range(n_batches):
        main.run(lambda i=i: w.copy(i, 0), name=f"copy {i}", tracer=tracer)
        main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tracer)
    serial = tracer.timeline(LOADER_SERIAL, source)
    # The serial loop ran both on the main thread; draw its copies on the copy row for comparison.
    serial = dataclasses.replace(
        serial,
        spans=tuple(dataclasses.replace(s, stream="copy") if s.name.startswith("copy") else s for s in serial.spans),
    )
    tracer = Tracer(main)
    for i, _buf in enumerate(
        double_buffered(range(n_batches), w.copy, copy_stream=copy_stream, compute_stream=main, tracer=tracer)
    ):
        main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tracer)
    return [serial, tracer.timeline(LOADER_DOUBLE, source)]


class GpuWorkload:
    """Two pinned (and pageable) host batches, two device buffers, a matmul 'model', and the three CUDA streams.

    compute = `units` GPU_MATRIX² float32 matmuls on the current stream; copies run on the H2D and D2H streams.
    """

    def __init__(self, nbytes: int, device: int, pageable: bool):
        import torch

        dev = torch.device("cuda", device)
        torch.cuda.set_device(dev)
        self.source = f"measured here: {torch.cuda.get_device_name(dev)}, CUDA events"
        pinned = [torch.full((nbytes,), i + 1, dtype=torch.uint8).pin_memory() for i in range(2)]
        self.host = {"pinned": pinned}
        if pageable:
            self.host["pageable"] = [torch.full((nbytes,), i + 1, dtype=torch.uint8) for i in range(2)]
        self.dst = [torch.empty(nbytes, dtype=torch.uint8, device=dev) for _ in range(2)]
        self.back = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
        self.a = torch.randn(GPU_MATRIX, GPU_MATRIX, device=dev)
        self.out = torch.empty_like(self.a)
        self.main = CudaStream("compute", torch.cuda.current_stream(dev))
        self.h2d = CudaStream("copy (H2D)", device=device)
        self.d2h = CudaStream("copy (D2H)", device=device)

    def compute(self, units: int) -> None:
        import torch

        for _ in range(units):
            torch.mm(self.a, self.a, out=self.out)

    def timed(self, fn, n: int = 5) -> float:
        """Median seconds of fn on the compute stream after one warm-up call: n samples of one call each, between
        one pair of CUDA events (labkit.timing.time_events)."""
        import torch

        fn()
        torch.cuda.synchronize()
        return float(np.median([timing.time_events(self.main, lambda: self.main.run(fn), 1) for _ in range(n)]))

    def calibrate(self) -> tuple[float, float]:
        """(seconds per pinned H2D copy, seconds per compute unit)."""
        t_copy = self.timed(lambda: self.dst[0].copy_(self.host["pinned"][0], non_blocking=True))
        return t_copy, self.timed(lambda: self.compute(1))


def _gpu_efficiency(w: GpuWorkload, ratios, repeats: int, t_copy: float, t_unit: float, nbytes: int) -> list:
    """Per memory, ratio and repeat: copy alone, compute alone, both at once (interleaved)."""
    import torch

    frames = []
    for memory, bufs in w.host.items():
        for ratio in ratios:
            units = max(1, round(ratio * t_copy / t_unit))
            for rep in range(repeats):
                for scenario in EFFICIENCY_SCENARIOS:
                    torch.cuda.synchronize()
                    tr = Tracer(w.main)
                    if scenario != COMPUTE_ALONE:
                        w.h2d.run(
                            lambda r=rep: w.dst[r % 2].copy_(bufs[r % 2], non_blocking=True), name="copy", tracer=tr
                        )
                    if scenario != COPY_ALONE:
                        w.main.run(lambda u=units: w.compute(u), name="compute", tracer=tr)
                    torch.cuda.synchronize()
                    frames.append(
                        tr.timeline(scenario, w.source).to_frame(
                            compute_to_copy=float(ratio), repeat=rep, nbytes=nbytes, memory=memory, units=units
                        )
                    )
    return frames


def _gpu_duplex(w: GpuWorkload, repeats: int, nbytes: int) -> list:
    """Per repeat: H2D alone, D2H alone, both at once on two streams."""
    import torch

    frames = []
    for rep in range(repeats):
        for scenario in (H2D_ALONE, D2H_ALONE, DUPLEX):
            torch.cuda.synchronize()
            tr = Tracer(w.main)
            if scenario != D2H_ALONE:
                w.h2d.run(lambda: w.dst[0].copy_(w.host["pinned"][0], non_blocking=True), name="H2D", tracer=tr)
            if scenario != H2D_ALONE:
                w.d2h.run(lambda: w.back.copy_(w.dst[1], non_blocking=True), name="D2H", tracer=tr)
            torch.cuda.synchronize()
            frames.append(
                tr.timeline(scenario, w.source).to_frame(
                    compute_to_copy=float("nan"), repeat=rep, nbytes=nbytes, memory="pinned", units=0
                )
            )
    return frames


def gpu_loader_timelines(w: GpuWorkload, units: int, n_batches: int) -> list[Timeline]:
    """Serial (copy then compute on the compute stream) and double-buffered loader timelines."""
    import torch

    batches = [w.host["pinned"][i % 2] for i in range(n_batches)]
    torch.cuda.synchronize()
    tr = Tracer(w.main)
    for i, b in enumerate(batches):
        w.main.run(lambda b=b: w.dst[0].copy_(b, non_blocking=True), name=f"copy {i}", tracer=tr)
        w.main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tr)
    torch.cuda.synchronize()
    serial = tr.timeline(LOADER_SERIAL, w.source)
    serial = dataclasses.replace(
        serial,
        spans=tuple(
            dataclasses.replace(s, stream="copy (H2D)") if s.name.startswith("copy") else s for s in serial.spans
        ),
    )
    tr = Tracer(w.main)
    loader = double_buffered(
        batches, lambda b, s: w.dst[s].copy_(b, non_blocking=True), copy_stream=w.h2d, compute_stream=w.main, tracer=tr
    )
    for i, _buf in enumerate(loader):
        w.main.run(lambda: w.compute(units), name=f"compute {i}", tracer=tr)
    torch.cuda.synchronize()
    return [serial, tr.timeline(LOADER_DOUBLE, w.source)]


def measure_gpu_overlap(
    nbytes: int = GPU_BATCH_BYTES,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    *,
    repeats: int = DEFAULT_REPEATS,
    device: int = 0,
    pageable: bool = True,
    duplex: bool = True,
    loader_batches: int = LOADER_BATCHES,
):
    """Copy/compute overlap on a GPU, every span timed by CUDA events.

    Efficiency sweep: H2D copy of `nbytes` from pinned memory on a side stream while matmuls run
    on the current stream (and, if `pageable`, the same from pageable memory: the host blocks
    in the copy, so the compute is launched only after it). Full duplex: an H2D and a D2H copy
    on two streams at once. Loader: serial vs `double_buffered` at compute/copy = 1.
    """
    import pandas as pd

    require_cuda("measure_gpu_overlap", hint=", or `labkit bench overlap --backend host`")
    check_pinned_request(2 * nbytes)  # two pinned source buffers
    w = GpuWorkload(nbytes, device, pageable)
    t_copy, t_unit = w.calibrate()
    frames = _gpu_efficiency(w, ratios, repeats, t_copy, t_unit, nbytes)
    if duplex:
        frames += _gpu_duplex(w, repeats, nbytes)
    units = max(1, round(t_copy / t_unit))
    for tl in gpu_loader_timelines(w, units, loader_batches):
        frames.append(tl.to_frame(compute_to_copy=1.0, repeat=0, nbytes=nbytes, memory="pinned", units=units))
    out = pd.concat(frames, ignore_index=True)
    out.attrs["source"] = w.source
    return out


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
        for buf in double_buffered(
            range(n_batches), copy, copy_stream=cs, compute_stream=InlineStream(), buffers=buffers
        ):
            tag = int(buf[0])
            intact &= bool((buf == tag).all())
            time.sleep(consume_s)
            intact &= bool((buf == tag).all())
            seen.append(tag)
    return {"seen": seen, "in_order_once": seen == list(range(n_batches)), "intact": intact}


# --------------------------------------------------------------------------- what notebook 03 shows
def sweep(quick: bool) -> dict:
    """The ratios, repeats and loader batches of a full or a quick run (keyword arguments of the measure_ functions)."""
    return {
        "ratios": QUICK_RATIOS if quick else DEFAULT_RATIOS,
        "repeats": QUICK_REPEATS if quick else DEFAULT_REPEATS,
        "loader_batches": QUICK_LOADER_BATCHES if quick else LOADER_BATCHES,
    }


def host_run_here(quick: bool):
    """The host-thread overlap run of notebook 03 (an `overlap_run` frame; its source in `.attrs["source"]`)."""
    return measure_host_overlap(HOST_QUICK_BATCH_BYTES if quick else HOST_BATCH_BYTES, **sweep(quick))


def gpu_run_here(quick: bool) -> Found:
    """The CUDA-stream overlap run of notebook 03 on this machine's GPU."""
    frame = measure_gpu_overlap(GPU_QUICK_BATCH_BYTES if quick else GPU_BATCH_BYTES, **sweep(quick))
    return Found(frame, frame.attrs["source"])
