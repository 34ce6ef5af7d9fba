"""Copy sweeps: host↔device copies (pinned and pageable), device-local copies, and the host-memory copy sweep.

Method (docs/design.md, "Measurement conventions"): warm up, then time batches of back-to-back copies
between CUDA events on one stream for pinned memory; pageable copies are synchronous from the
host's side, so they are timed on the host around synchronised copies. Raw samples are kept.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from .. import timing
from ..models import fit_alpha_beta
from ..runtime import require_cuda
from ..system import cpu_model
from ..units import GiB, MiB, check_pinned_request, check_size, format_bytes

DIRECTIONS = ("h2d", "d2h", "d2d")
MEMORIES = ("pinned", "pageable")
#: Sweeps: 4 B to 1 GiB (the issue's range); quick mode stops at 64 MiB.
SWEEP_MIN_BYTES, SWEEP_MAX_BYTES, QUICK_MAX_BYTES = 4, 1 * GiB, 64 * MiB
#: Host-memory sweep: 64 B to 256 MiB covers L1, L2, LLC and DRAM on any laptop.
HOST_MIN_BYTES, HOST_MAX_BYTES, HOST_QUICK_MAX_BYTES = 64, 256 * MiB, 32 * MiB


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One copy sweep: a Measurement per size, plus what was copied and where."""

    direction: str  # h2d, d2h, d2d, host
    memory: str  # pinned, pageable, device, host
    measurements: tuple[timing.Measurement, ...]
    device: str  # e.g. "NVIDIA H100 80GB HBM3" or the CPU model
    skipped: tuple[str, ...] = ()  # sizes left out, with the reason (e.g. out of memory)

    @property
    def nbytes(self) -> list[int]:
        return [m.nbytes for m in self.measurements]

    @property
    def seconds(self) -> list[float]:
        return [m.median_s for m in self.measurements]

    @property
    def bandwidth_GBps(self) -> list[float]:
        return [m.bandwidth_GBps for m in self.measurements]

    def fit(self):
        return fit_alpha_beta(self.nbytes, self.seconds)

    def to_frame(self):
        """Tidy rows in the `copy_sweep` schema, with IQR and raw samples kept."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "direction": self.direction,
                    "memory": self.memory,
                    "nbytes": m.nbytes,
                    "bandwidth_GBps": m.bandwidth_GBps,
                    "time_s": m.median_s,
                    "iqr_s": m.iqr_s,
                    "inner": m.inner,
                    "timer": m.timer,
                    "samples_s": " ".join(f"{s:.6e}" for s in m.samples_s),
                }
                for m in self.measurements
            ]
        )


def _progress(sizes, desc: str, progress: bool):
    if not progress:
        return sizes
    from tqdm.auto import tqdm

    return tqdm(sizes, desc=desc, unit="size", leave=False)


def host_copy_sweep(
    sizes: Sequence[int],
    *,
    repeats: int = timing.DEFAULT_REPEATS,
    progress: bool = False,
    alloc: Callable[[int], object] | None = None,
) -> Sweep:
    """Time `dst[:] = src` between two host buffers for each size (memcpy through caches and DRAM).

    The same α-β law holds as for PCIe: a fixed cost per call (Python + memcpy start-up) and a
    bandwidth set by the memory level the buffer fits in. Labelled 'host memory' everywhere.
    """
    import numpy as np

    alloc = alloc or (lambda n: np.ones(n, dtype=np.uint8))
    out = []
    for n in _progress(sizes, "host copy", progress):
        n = check_size(n)
        src, dst = alloc(n), alloc(n)
        out.append(
            timing.time_host(
                lambda: np.copyto(dst, src), repeats=repeats, nbytes=n, label=f"host copy {format_bytes(n)}"
            )
        )
    return Sweep("host", "host", tuple(out), f"host memory ({cpu_model()})")


def sweep_sizes(
    sizes,
    measure_one: Callable[[int], timing.Measurement],
    *,
    is_oom: Callable[[BaseException], bool],
    on_oom: Callable[[], None] = lambda: None,
    desc: str = "",
    progress: bool = False,
):
    """Measure each size; a size that runs out of memory is skipped and named, the rest are kept.

    Returns (measurements, skipped). `measure_one` allocates and times one size; `is_oom` tells an
    out-of-memory error from a real failure (which propagates).
    """
    out, skipped = [], []
    for n in _progress(sizes, desc, progress):
        try:
            out.append(measure_one(n))
        except Exception as e:  # noqa: BLE001 — filtered by is_oom, everything else re-raised
            if not is_oom(e):
                raise
            skipped.append(f"{format_bytes(n)}: out of memory ({type(e).__name__})")
            on_oom()
    return out, skipped


def gpu_copy_sweep(
    sizes: Sequence[int],
    direction: str = "h2d",
    memory: str = "pinned",
    *,
    repeats: int = timing.DEFAULT_REPEATS,
    device: int = 0,
    progress: bool = False,
) -> Sweep:
    """Time host↔device (or device-local) copies for each size on one CUDA device.

    pinned: `dst.copy_(src, non_blocking=True)` batches between CUDA events;
    pageable: host-timed synchronous copies (the driver stages them through a pinned buffer).
    A size that does not fit in memory is skipped and named in `Sweep.skipped`.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if memory not in MEMORIES:
        raise ValueError(f"memory must be one of {MEMORIES}, got {memory!r}")
    sizes = [check_size(n) for n in sizes]
    if memory == "pinned" and direction != "d2d":
        for n in sizes:
            check_pinned_request(n)
    require_cuda("gpu_copy_sweep", hint=" (or 'auto')")
    import torch

    dev = torch.device("cuda", device)

    def measure_one(n: int) -> timing.Measurement:
        src, dst = _buffers(n, direction, memory, dev)
        label = f"{direction} {memory} {format_bytes(n)}"
        if memory == "pinned" or direction == "d2d":
            return timing.time_cuda(lambda: dst.copy_(src, non_blocking=True), repeats=repeats, nbytes=n, label=label)

        def copy():
            dst.copy_(src)
            torch.cuda.synchronize(dev)

        return timing.time_host(copy, repeats=repeats, nbytes=n, label=label)

    out, skipped = sweep_sizes(
        sizes,
        measure_one,
        is_oom=lambda e: isinstance(e, torch.OutOfMemoryError),
        on_oom=torch.cuda.empty_cache,
        desc=f"{direction} {memory}",
        progress=progress,
    )
    return Sweep(
        direction,
        "device" if direction == "d2d" else memory,
        tuple(out),
        torch.cuda.get_device_name(dev),
        tuple(skipped),
    )


def _buffers(n: int, direction: str, memory: str, dev):
    import torch

    pin = memory == "pinned"
    host = lambda: torch.empty(n, dtype=torch.uint8, pin_memory=pin)  # noqa: E731
    gpu = lambda: torch.empty(n, dtype=torch.uint8, device=dev)  # noqa: E731
    if direction == "h2d":
        return host().fill_(1), gpu()
    if direction == "d2h":
        return gpu().fill_(1), host()
    return gpu().fill_(1), gpu()
