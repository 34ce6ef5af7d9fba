"""P2P matrices measured on this machine's GPUs, the p2pBandwidthLatencyTest way (CUDA events; tests inject a host backend).

Method (p2pBandwidthLatencyTest, nvbandwidth): warm up; time batches of back-to-back copies between
CUDA events (`labkit.timing.time_cuda`); bidirectional = both directions forked from one timing stream
and joined back into it; latency = 16-byte copies queued behind a GPU spin so the host's Python
overhead stays out of the timed region; "P2P disabled" = copies staged explicitly through pinned host
buffers (labkit.p2p.staging). The diagonal is a copy inside one GPU, its bytes counted twice.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from typing import Sequence

from .. import timing
from ..runtime import Found, require_cuda
from ..system import environment
from ..units import MiB
from .matrices import KINDS, P2P_STATES, P2PRun, PairResult
from .staging import STAGING_CHUNK_BYTES, CudaStaging

#: Bytes per bandwidth copy: 256 MiB, well past the size where any GPU link saturates
#: (p2pBandwidthLatencyTest uses 40e6 ints = 160 MB, nvbandwidth 512 MiB).
BANDWIDTH_BYTES = 256 * MiB


#: Quick runs (CI, `--quick`): 32 MiB still takes ≥ 80 µs per copy at 400 GB/s, far above the
#: per-copy overhead, so the plateau is reached.
QUICK_BANDWIDTH_BYTES = 32 * MiB


#: One int4, as p2pBandwidthLatencyTest's latency matrix copies.
LATENCY_BYTES = 16


#: Copies queued per latency sample (p2pBandwidthLatencyTest queues 100; far more can block the
#: host on a full launch queue, which is why the tool keeps it low).
LATENCY_CALLS = 100


QUICK_REPEATS = 5


#: What to do without a GPU, added to `require_cuda`'s message.
NO_GPU_HINT = " (notebook 04 replays recorded systems; one GPU measures the copy inside it, GPU pairs need two or more)"


def peer_access_matrix(devices: Sequence[int] | None = None) -> list[list[bool]]:
    """torch.cuda.can_device_access_peer for every ordered pair (True on the diagonal)."""
    import torch

    devices = list(range(torch.cuda.device_count())) if devices is None else list(devices)
    return [[a == b or bool(torch.cuda.can_device_access_peer(a, b)) for b in devices] for a in devices]


class CudaBackend:
    """How measure() touches real GPUs: buffers, copy paths with their streams, and the timers."""

    def __init__(self, chunk_bytes: int = STAGING_CHUNK_BYTES):
        require_cuda("measuring GPU copies", hint=NO_GPU_HINT)
        import torch

        self.torch = torch
        self.chunk_bytes = chunk_bytes

    def device_names(self, devices):
        return [self.torch.cuda.get_device_name(d) for d in devices]

    def can_access(self, a: int, b: int) -> bool:
        return a == b or bool(self.torch.cuda.can_device_access_peer(a, b))

    def alloc(self, device: int, nbytes: int):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=f"cuda:{device}").fill_(1)

    def timing_stream(self, device: int):
        return self.torch.cuda.Stream(device=device)

    def path(self, src: int, dst: int, staged: bool, nbytes: int):
        chunk = max(1, min(self.chunk_bytes, nbytes))
        return _CudaStagedPath(CudaStaging(src, dst, chunk)) if staged else _CudaDirectPath(src, dst)

    def time(self, fn, *, nbytes, label, repeats, stream):
        return timing.time_cuda(fn, repeats=repeats, nbytes=nbytes, label=label, stream=stream), ()

    def time_latency(self, fn, *, nbytes, label, repeats, stream, calls=LATENCY_CALLS):
        return _time_queued(self.torch, fn, calls=calls, repeats=repeats, nbytes=nbytes, label=label, stream=stream)

    def synchronize(self, devices):
        for d in devices:
            self.torch.cuda.synchronize(d)


class _CudaDirectPath:
    """src → dst with `copy_` on a stream of the source GPU. torch fences a cross-device copy
    against the destination's current stream; a private idle stream there keeps that fence from
    serialising the two directions of a bidirectional run."""

    def __init__(self, src: int, dst: int):
        import torch

        self.src, self.dst = src, dst
        self.stream = torch.cuda.Stream(device=src)
        self.peer_stream = torch.cuda.Stream(device=dst) if dst != src else None

    @property
    def home_stream(self):
        return self.stream

    def enqueue(self, dst, src) -> None:
        import torch

        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.cuda.stream(self.stream))
            if self.peer_stream is not None:
                stack.enter_context(torch.cuda.stream(self.peer_stream))
            dst.copy_(src, non_blocking=True)

    def fork(self, timing_stream) -> None:
        if timing_stream is not self.stream:
            self.stream.wait_stream(timing_stream)

    def join(self, timing_stream) -> None:
        if timing_stream is not self.stream:
            timing_stream.wait_stream(self.stream)


class _CudaStagedPath:
    def __init__(self, staging: CudaStaging):
        self.staging = staging

    def enqueue(self, dst, src) -> None:
        self.staging.copy(dst, src)

    def fork(self, timing_stream) -> None:
        self.staging.first_stream.wait_stream(timing_stream)

    def join(self, timing_stream) -> None:
        timing_stream.wait_stream(self.staging.last_stream)


def _time_queued(torch, fn, *, calls, repeats, nbytes, label, stream):
    """Time `calls` back-to-back calls of fn per sample, queued behind a GPU spin (p2pBandwidthLatencyTest's
    delay kernel) so the GPU runs them back to back however slow the host is to issue them:
    `timing.time_blocked` on the timing stream (its docstring has the method and the retry rule).
    Returns (Measurement, notes)."""
    dev = stream.device.index if stream.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(dev), torch.cuda.stream(stream):
        r = timing.time_blocked(
            timing.CudaEventStream(stream), fn, calls=calls, repeats=repeats, label=label, nbytes=nbytes
        )
        for d in range(torch.cuda.device_count()):
            torch.cuda.synchronize(d)
    return r.gpu, tuple(r.warnings)


def _counted_bytes(kind: str, nbytes: int, local: bool) -> int:
    """Bytes a cell counts, as p2pBandwidthLatencyTest: both directions for bidirectional, and read +
    write for a copy inside one GPU (the diagonal)."""
    return nbytes * (2 if kind == "bandwidth_bi" else 1) * (2 if local else 1)


def _devices(devices: Sequence[int] | None, kinds: Sequence[str]) -> list[int]:
    """The device indices to measure (default: every visible GPU); refuses none and kinds it cannot measure."""
    if devices is None:
        import torch

        devices = list(range(torch.cuda.device_count()))
    devices = [int(d) for d in devices]
    if not devices:
        require_cuda("labkit.p2p.measure.measure", hint=NO_GPU_HINT)
        raise ValueError("no devices to measure: name at least one CUDA device index")
    bad = [k for k in kinds if k not in KINDS or k == "latency_cpu"]
    if bad:
        raise ValueError(f"cannot measure {bad}; choose from bandwidth_uni, bandwidth_bi, latency_gpu")
    return devices


def _mode(*, loop: bool, local: bool, staged: bool, peer: bool) -> str:
    """How a cell's copy travels: the mode column of the p2p_matrix schema."""
    if loop:
        return "host_staged_loopback"
    if local:
        return "local"
    if staged:
        return "host_staged"
    return "p2p" if peer else "driver"


class _Cells:
    """What one measure() call reuses from cell to cell: peer access, buffers, copy paths, timing streams."""

    def __init__(self, backend, devices: list[int], kinds, nbytes: int, latency_nbytes: int):
        self.backend, self.devices = backend, devices
        self.nbytes, self.latency_nbytes = nbytes, latency_nbytes
        self.access = [[backend.can_access(a, b) for b in devices] for a in devices]
        self.big = {d: [backend.alloc(d, nbytes) for _ in range(2)] for d in devices}  # [send, receive] per GPU
        self.big_back = (
            {d: [backend.alloc(d, nbytes) for _ in range(2)] for d in devices} if "bandwidth_bi" in kinds else {}
        )
        self.small = {d: [backend.alloc(d, latency_nbytes) for _ in range(2)] for d in devices}
        self.timers = {d: backend.timing_stream(d) for d in devices}
        self.paths: dict[tuple, object] = {}

    def path(self, a, b, staged, n, lane=0):
        key = (a, b, staged, n, lane)  # lane 1 = a second, independent path (the diagonal's other direction)
        if key not in self.paths:
            self.paths[key] = self.backend.path(a, b, staged, n)
        return self.paths[key]

    def measure(self, kind: str, state: str, a: int, b: int, loop: bool, repeats: int) -> PairResult:
        """Time one cell: GPU a → GPU b, P2P `state`, `loop` for the staged loopback inside one GPU."""
        local = a == b and not loop
        staged = (state == "disabled" and not local) or loop
        peer = self.access[self.devices.index(a)][self.devices.index(b)]
        mode = _mode(loop=loop, local=local, staged=staged, peer=peer)
        lat = kind.startswith("latency")
        n = self.latency_nbytes if lat else self.nbytes
        bufs = self.small if lat else self.big
        fwd = self.path(a, b, staged, n)
        pairs = [(fwd, bufs[b][1], bufs[a][0])]
        if kind == "bandwidth_bi":
            back = self.path(b, a, staged, n, lane=1 if local else 0)
            pairs.append((back, self.big_back[a][1], self.big_back[b][0]))
        # One direct path times on its own stream (no fork/join in the timed loop, as the tool does);
        # anything else forks from and joins into the source GPU's timing stream.
        home = getattr(fwd, "home_stream", None)
        t = home if len(pairs) == 1 and home is not None else self.timers[a]

        def fn(pairs=pairs, t=t):
            for p, _, _ in pairs:
                p.fork(t)
            for p, dst, src in pairs:
                p.enqueue(dst, src)
            for p, _, _ in pairs:
                p.join(t)

        label = f"{kind} {state} GPU{a}→GPU{b} ({mode})"
        time_fn = self.backend.time_latency if lat else self.backend.time
        m, notes = time_fn(fn, nbytes=_counted_bytes(kind, n, local), label=label, repeats=repeats, stream=t)
        return PairResult(kind, state, mode, a, b, m, bool(peer), tuple(notes))


def measure(
    devices: Sequence[int] | None = None,
    *,
    nbytes: int = BANDWIDTH_BYTES,
    latency_nbytes: int = LATENCY_BYTES,
    kinds: Sequence[str] = ("bandwidth_uni", "bandwidth_bi", "latency_gpu"),
    p2p: Sequence[str] = P2P_STATES,
    repeats: int = timing.DEFAULT_REPEATS,
    loopback: bool | None = None,
    backend=None,
    progress: bool = False,
    topology: str | None = None,
) -> P2PRun:
    """Measure the P2P matrices between `devices` (default: every visible GPU).

    'enabled' cells copy with `copy_` (torch turns peer access on where `can_device_access_peer`
    allows; elsewhere the driver stages the copy itself — mode 'driver'); 'disabled' cells stage
    explicitly through pinned host memory (`CudaStaging`). The diagonal is a copy inside one GPU
    in both. With one GPU (`loopback` defaults to True then) a staged copy GPU→host→same GPU is
    added as mode 'host_staged_loopback': what a pair without P2P would get at best on this host.
    `backend` defaults to CudaBackend(); tests inject a host-memory one.
    """
    backend = backend or CudaBackend()
    devices = _devices(devices, kinds)
    loopback = len(devices) == 1 if loopback is None else loopback
    names = backend.device_names(devices)
    cells = _Cells(backend, devices, kinds, nbytes, latency_nbytes)
    jobs = [(k, p, a, b, False) for k in kinds for p in p2p for a in devices for b in devices]
    if loopback:
        jobs += [(k, "disabled", d, d, True) for k in kinds if k != "bandwidth_bi" for d in devices]
    if progress:
        from tqdm.auto import tqdm

        jobs = tqdm(jobs, desc="p2p", unit="cell", leave=False)
    results = [cells.measure(*job, repeats) for job in jobs]
    backend.synchronize(devices)
    return P2PRun(
        tuple(results),
        tuple(names),
        tuple(devices),
        tuple(tuple(r) for r in cells.access),
        int(nbytes),
        int(latency_nbytes),
        topology,
        _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


# --------------------------------------------------------------------------- what notebook 04 shows
def measure_here(*, all_pairs: bool, quick: bool, progress: bool = True) -> Found:
    """This machine's matrices: every GPU pair (`all_pairs`), or the copy inside GPU0 and its loopback staging."""
    env = environment(parameters={"quick": quick})
    run = measure(
        None if all_pairs else [0],
        nbytes=QUICK_BANDWIDTH_BYTES if quick else BANDWIDTH_BYTES,
        repeats=QUICK_REPEATS if quick else timing.DEFAULT_REPEATS,
        topology=env.get("topology"),
        progress=progress,
    )
    return Found(run, run.label, note="\n".join(f"- warning: {w}" for w in run.warnings) or None)


def what_this_run_measures(local_mode: str, pairs_mode: str) -> str:
    """One sentence for the reader: what of notebook 04 this run measures, and what it replays."""
    return {
        ("live", "live"): "every GPU pair of this machine is measured live below.",
        ("live", "reference"): (
            "this machine has one GPU, so there is no pair: the copy inside the GPU and a "
            "GPU→host→GPU staged copy are measured live; every matrix of GPU pairs below is "
            "replayed from recorded systems."
        ),
        ("reference", "reference"): (
            "no GPU is used in this run (none here, or mode='reference'): every number "
            "below is replayed from the recorded systems, each labelled with its source."
        ),
    }[(local_mode, pairs_mode)]


def gpus_measured(run, pairs: bool = False) -> int:
    """GPUs a live run measured (0 for none); with `pairs`, 0 unless it measured pairs (two or more)."""
    n = len(run.indices) if run is not None else 0
    return n if not pairs or n > 1 else 0


class ThisRun:
    """What of notebook 04 this run measures live and what it replays: one sentence, and the GPUs measured."""

    experiment = "p2p_local"

    def __init__(self, run: P2PRun | None, local_mode: str, pairs_mode: str):
        self.run, self.local_mode, self.pairs_mode = run, local_mode, pairs_mode

    def report(self) -> str:
        return f"**This run:** {what_this_run_measures(self.local_mode, self.pairs_mode)}"

    def notes(self) -> dict:
        return {"gpus_measured": gpus_measured(self.run)}


class LocalCopy:
    """The copy inside GPU0 measured here (nothing where this run replays): its rate, checked, and the run's rows."""

    def __init__(self, run: P2PRun | None):
        self.run = run
        self.local = None if run is None else run.matrix("bandwidth_uni", "enabled").iloc[0, 0]

    def numbers(self) -> dict:
        return {} if self.run is None else {"live_local_copy_GBps": self.local}

    def checks(self) -> dict:
        return {} if self.run is None else {"live_local_copy_plausible": 10 < self.local < 20000}

    def report(self):
        if self.run is None:
            return None
        columns = ["matrix", "p2p", "mode", "src", "dst", "bandwidth_GBps", "latency_us", "iqr_s"]
        return self.run.to_frame()[columns].round(3)
