"""`DataLoader(pin_memory=True)` against `pin_memory=False`: host→GPU throughput on synthetic images (GPU only)."""

from __future__ import annotations

import time

import numpy as np

from ..runtime import require_cuda
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


def measure_dataloader(pin_memory: bool, *, batches: int = LOADER_BATCHES, batch_size: int = BATCH_SIZE,
                       workers: int = LOADER_WORKERS, device: int = 0) -> dict:
    """Host→GPU throughput of `DataLoader(pin_memory=...)` feeding `.to(device, non_blocking=True)`.

    One untimed pass starts the (persistent) workers; the timed pass moves `batches` batches and
    synchronises once at the end. Bytes counted: the uint8 batches that reach the GPU.
    """
    import torch
    from torch.utils.data import DataLoader

    require_cuda("measure_dataloader", hint=NO_GPU_HINT)
    dev = torch.device("cuda", device)
    ds = SyntheticImages(batches * batch_size)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, pin_memory=pin_memory,
                        persistent_workers=workers > 0)
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
    return {"pin_memory": pin_memory, "batches": batches, "batch_bytes": batch_size * int(np.prod(SAMPLE_SHAPE)),
            "workers": workers, "seconds": seconds, "batches_per_s": batches / seconds,
            "throughput_GBps": nbytes / seconds / GB, "device": torch.cuda.get_device_name(dev)}
