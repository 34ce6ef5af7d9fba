"""`DataLoader(pin_memory=True)` against `pin_memory=False`: host→GPU throughput on synthetic images (GPU only)."""

from __future__ import annotations

import time

import numpy as np

from .. import plots
from ..runtime import Found, require_cuda
from ..units import GB
from .pinned import NO_GPU_HINT

#: DataLoader experiment: ImageNet-sized uint8 images (3×224×224 = 150,528 B), batch 64 (≈ 9.6 MB).
SAMPLE_SHAPE, BATCH_SIZE, LOADER_WORKERS = (3, 224, 224), 64, 2


#: Batches timed per DataLoader run (after one untimed pass that starts the workers).
LOADER_BATCHES, QUICK_LOADER_BATCHES = 60, 20


#: Distinct samples held in RAM by the synthetic dataset (indices wrap around).
DATASET_SAMPLES = 256


class SyntheticImages:
    """`samples` random uint8 images held in RAM; `length` indices wrap around (no disk, no decoding).

    A map-style dataset (`__len__` + `__getitem__`) defined at module level, so DataLoader workers
    started with spawn or forkserver can unpickle it too.
    """

    def __init__(self, length: int, samples: int = DATASET_SAMPLES, shape=SAMPLE_SHAPE):
        import torch

        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, 256, (samples, *shape), dtype=torch.uint8, generator=g)
        self.length = int(length)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i):
        return self.data[i % len(self.data)]


def measure_dataloader(
    pin_memory: bool,
    *,
    batches: int = LOADER_BATCHES,
    batch_size: int = BATCH_SIZE,
    workers: int = LOADER_WORKERS,
    device: int = 0,
) -> dict:
    """Host→GPU throughput of `DataLoader(pin_memory=...)` feeding `.to(device, non_blocking=True)`.

    One untimed pass starts the (persistent) workers; the timed pass moves `batches` batches and
    synchronises once at the end. Bytes counted: the uint8 batches that reach the GPU.
    """
    import torch
    from torch.utils.data import DataLoader

    require_cuda("measure_dataloader", hint=NO_GPU_HINT)
    dev = torch.device("cuda", device)
    ds = SyntheticImages(batches * batch_size)
    loader = DataLoader(
        ds, batch_size=batch_size, num_workers=workers, pin_memory=pin_memory, persistent_workers=workers > 0
    )
    try:
        for x in loader:  # warm-up pass: workers start, pinned blocks get cached
            x.to(dev, non_blocking=True)
        torch.cuda.synchronize(dev)
        nbytes = 0
        t0 = time.perf_counter()
        for x in loader:
            y = x.to(dev, non_blocking=True)
            nbytes += y.numel()
        torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - t0
    finally:
        del loader  # stops persistent workers
    return {
        "pin_memory": pin_memory,
        "batches": batches,
        "batch_bytes": batch_size * int(np.prod(SAMPLE_SHAPE)),
        "workers": workers,
        "seconds": seconds,
        "batches_per_s": batches / seconds,
        "throughput_GBps": nbytes / seconds / GB,
        "device": torch.cuda.get_device_name(dev),
    }


# --------------------------------------------------------------------------- what notebook 02 shows
#: Why nothing is shown without a GPU and without a recorded run (nothing is invented).
NOTHING_RECORDED = (
    "No DataLoader run is recorded in data/ (no published source measures it this way), and this "
    "machine has no GPU. Nothing is shown rather than an invented number: run this notebook on a GPU, "
    "or replay a profile recorded there (`labkit record --out profiles/<node>`, then "
    "reference='profiles/<node>')."
)


def measured_here(quick: bool, gpu_name: str) -> Found:
    """Both settings measured on this machine's GPU: a frame (pin_memory, throughput_GBps, batches_per_s, ...)."""
    import pandas as pd

    batches = QUICK_LOADER_BATCHES if quick else LOADER_BATCHES
    return Found(
        pd.DataFrame([measure_dataloader(pm, batches=batches) for pm in (False, True)]), f"measured here: {gpu_name}"
    )


def recorded(datasets):
    """The DataLoader run a `labkit record` profile holds among `datasets` (Found), or None."""
    import pandas as pd

    runs = [
        d
        for d in datasets
        if "memory" in d.frame.columns and d.frame["quantity"].astype(str).str.startswith("DataLoader(").any()
    ]
    if not runs:
        return None
    f = runs[0].frame
    frame = pd.DataFrame(
        {"pin_memory": f["memory"] == "pinned", "throughput_GBps": f["value"], "batches_per_s": f.get("batches_per_s")}
    )
    return Found(frame, runs[0].label, (runs[0].name,))


def plot(frame, label: str):
    """Throughput with pin_memory=False and True, side by side."""
    fig, ax = plots.figure(width=6, height=3.8)
    ax.bar(
        ["pin_memory=False", "pin_memory=True"], frame["throughput_GBps"], color=["tab:gray", "tab:blue"], label=label
    )
    plots.finish(
        ax,
        "DataLoader → GPU throughput",
        "DataLoader setting (flag)",
        "throughput (GB/s, unidirectional)",
        source=label,
    )
    return fig


def speedup(frame) -> float:
    """Throughput with pin_memory=True ÷ with pin_memory=False."""
    return float(frame.throughput_GBps.iloc[1] / frame.throughput_GBps.iloc[0])
