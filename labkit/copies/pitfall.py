"""The non_blocking pitfall: reading a non_blocking D2H copy's destination before synchronising gives wrong data.

On a GPU the stream is kept busy first, so the copy has not even started when the host reads; on a CPU
a worker thread plays the copy engine (an overlap host stream) and an event plays the earlier GPU work.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..overlap.streams import HostEvent, HostStream
from ..runtime import Found, require_cuda
from ..units import MiB
from .pinned import NO_GPU_HINT, pinned_empty

#: Bytes copied in the non_blocking pitfall demo (large enough that the copy takes a while).
PITFALL_BYTES = 64 * MiB


#: GPU clock cycles `torch.cuda._sleep` spins before the pitfall's copy (≈ 25-50 ms at 1-2 GHz):
#: it stands in for a forward pass still running when the host reads the result.
PITFALL_SLEEP_CYCLES = 50_000_000


@dataclasses.dataclass(frozen=True)
class PitfallResult:
    """Fraction of wrong bytes read from a non_blocking D2H destination before and after synchronising."""

    wrong_before_sync: float
    wrong_after_sync: float
    nbytes: int
    source: str  # "measured here: <GPU>" or "measured here: host thread standing in for the copy engine"


def nonblocking_pitfall_gpu(
    nbytes: int = PITFALL_BYTES, *, device: int = 0, sleep_cycles: int = PITFALL_SLEEP_CYCLES
) -> PitfallResult:
    """`dst.copy_(gpu_tensor, non_blocking=True)` into pinned memory, read at once, then after a synchronise.

    The stream is kept busy first (`torch.cuda._sleep`, standing in for a forward pass), so when
    copy_ returns the copy has not even started: the host reads the zeros that were there.
    """
    import torch

    require_cuda("nonblocking_pitfall_gpu", hint=NO_GPU_HINT)
    dev = torch.device("cuda", device)
    src = torch.full((int(nbytes),), 7, dtype=torch.uint8, device=dev)
    dst = pinned_empty(nbytes).zero_()
    torch.cuda.synchronize(dev)
    torch.cuda._sleep(int(sleep_cycles))  # the GPU is still busy with earlier work
    dst.copy_(src, non_blocking=True)  # returns at once: only enqueued
    before = torch.count_nonzero(dst != 7).item() / dst.numel()  # read before synchronising: WRONG
    torch.cuda.current_stream(dev).synchronize()
    after = torch.count_nonzero(dst != 7).item() / dst.numel()  # read after synchronising: right
    return PitfallResult(before, after, int(nbytes), f"measured here: {torch.cuda.get_device_name(dev)}")


def nonblocking_pitfall_host(nbytes: int = PITFALL_BYTES) -> PitfallResult:
    """The same race on a CPU: a worker thread plays the copy engine, an event plays the earlier GPU work.

    The copy is enqueued behind work that has not finished (an event the demo fires only after
    the premature read, which makes the race deterministic); the host reads the destination at
    once (zeros), then fires the event, synchronises and reads again (sevens).
    """
    src = np.full(int(nbytes), 7, dtype=np.uint8)
    dst = np.zeros(int(nbytes), dtype=np.uint8)
    with HostStream("copy engine") as stream:
        earlier_work = HostEvent()
        stream.wait(earlier_work)  # the stream is still busy with earlier work
        stream.run(lambda: np.copyto(dst, src))  # a non_blocking copy: enqueued, not done
        before = float(np.mean(dst != 7))  # read before synchronising: WRONG
        earlier_work.fire()  # the earlier work finishes; the copy runs
        stream.synchronize()
        after = float(np.mean(dst != 7))  # read after synchronising: right
    return PitfallResult(before, after, int(nbytes), "measured here: host thread standing in for the copy engine")


# --------------------------------------------------------------------------- what notebook 02 shows
def on_gpu() -> Found:
    """The pitfall on this machine's GPU."""
    r = nonblocking_pitfall_gpu()
    return Found(r, r.source)


def on_host(nbytes: int = 16 * MiB) -> Found:
    """The same race on this CPU (a thread plays the copy engine) — what a run without a GPU shows."""
    r = nonblocking_pitfall_host(nbytes)
    return Found(r, r.source)
