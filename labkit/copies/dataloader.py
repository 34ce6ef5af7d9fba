"""`DataLoader(pin_memory=True)` against `pin_memory=False`: host→GPU throughput on synthetic images (GPU only)."""

from __future__ import annotations

import numpy as np

from .. import plots, timing
from ..provenance import measured_meta
from ..runtime import Found, require_cuda
from ..units import GB
from .pinned import NO_GPU_HINT

#: DataLoader experiment: ImageNet-sized uint8 images (3×224×224 = 150,528 B), batch 64 (≈ 9.6 MB).
SAMPLE_SHAPE, BATCH_SIZE, LOADER_WORKERS = (3, 224, 224), 64, 2


#: Batches timed per DataLoader run (after one untimed pass that starts the workers).
LOADER_BATCHES, QUICK_LOADER_BATCHES = 60, 20
#: Batches per stage in quick mode (`measure_stages`): starting the workers costs more than timing them.
QUICK_STAGE_BATCHES = 10


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
    moved = []  # bytes that reached the GPU, per pass

    def one_pass(loader=loader):
        moved.append(sum(x.to(dev, non_blocking=True).numel() for x in loader))
        torch.cuda.synchronize(dev)

    try:  # the warm-up pass starts the workers and caches pinned blocks; the second pass is timed
        seconds = timing.time_host(one_pass, repeats=1, warmup=1, inner=1).median_s
        nbytes = moved[-1]
    finally:
        del loader, one_pass  # drops the last references: stops persistent workers
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


# --------------------------------------------------------------------------- the pipeline, stage by stage
#: The stages of the two pipelines, each timed alone by `measure_stages` (name: what is timed, what it needs).
STAGES = {
    "workers": ("workers → main process: DataLoader(pin_memory=False), batches not copied", "any CPU"),
    "workers+pin_thread": (
        "workers → pin-memory thread → main process: DataLoader(pin_memory=True), batches not copied",
        "a CUDA GPU",
    ),
    "pin_one_batch": (
        "Tensor.pin_memory() of one received batch (the pin-memory thread's work per batch)",
        "a CUDA GPU",
    ),
    "h2d_from_pageable": ("one batch .to(cuda) from pageable memory, synchronised", "a CUDA GPU"),
    "h2d_from_pinned": ("one batch .to(cuda, non_blocking=True) from pinned memory, synchronised", "a CUDA GPU"),
}


def _loader(pin_memory: bool, batches: int, batch_size: int, workers: int):
    from torch.utils.data import DataLoader

    return DataLoader(
        SyntheticImages(batches * batch_size),
        batch_size=batch_size,
        num_workers=workers,
        pin_memory=pin_memory,
        persistent_workers=workers > 0,
    )


def _seconds_per_batch_of_loader(pin_memory: bool, batches: int, batch_size: int, workers: int) -> float:
    """One untimed pass (workers start, pinned blocks get cached), then a timed pass that only receives batches."""
    loader = _loader(pin_memory, batches, batch_size, workers)
    received = []
    try:
        seconds = timing.time_host(
            lambda loader=loader: received.append(sum(1 for _ in loader)), repeats=1, warmup=1, inner=1
        ).median_s
        return seconds / received[-1]
    finally:
        del loader  # the lambda that also held it is gone: workers stop


def _median_seconds(fn, repeats: int) -> float:
    """Median seconds of one call, `repeats` samples after one warm-up call (allocator caches, CUDA context)."""
    return timing.time_host(fn, repeats=repeats, warmup=1, inner=1).median_s


def measure_stages(
    *,
    batches: int = QUICK_LOADER_BATCHES,
    batch_size: int = BATCH_SIZE,
    workers: int = LOADER_WORKERS,
    device: int | None = 0,
):
    """Each stage of the DataLoader → GPU pipeline timed alone; a frame (stage, what, seconds_per_batch, ...).

    The pipeline moves batches no faster than its slowest serial stage. `workers` runs anywhere; the others
    only with CUDA (`device=None`, or no GPU: they are left out, never estimated). GB/s counts the batch's
    bytes (uint8 images) per second, one direction.
    """
    import pandas as pd
    import torch

    cuda = device is not None and torch.cuda.is_available()
    batch_bytes = batch_size * int(np.prod(SAMPLE_SHAPE))
    timed = {"workers": _seconds_per_batch_of_loader(False, batches, batch_size, workers)}
    if cuda:
        dev = torch.device("cuda", device)
        torch.cuda.set_device(dev)
        timed["workers+pin_thread"] = _seconds_per_batch_of_loader(True, batches, batch_size, workers)
        x = next(iter(_loader(False, 1, batch_size, 0)))
        xp = x.pin_memory()
        timed["pin_one_batch"] = _median_seconds(lambda: x.pin_memory(), batches)

        def h2d(src, non_blocking):
            src.to(dev, non_blocking=non_blocking)
            torch.cuda.synchronize(dev)

        timed["h2d_from_pageable"] = _median_seconds(lambda: h2d(x, False), batches)
        timed["h2d_from_pinned"] = _median_seconds(lambda: h2d(xp, True), batches)
    return pd.DataFrame(
        [
            {
                "stage": name,
                "what": STAGES[name][0],
                "needs": STAGES[name][1],
                "seconds_per_batch": s,
                "batches_per_s": 1 / s,
                "GBps": batch_bytes / s / GB,
                "batch_bytes": batch_bytes,
                "workers": workers,
            }
            for name, s in timed.items()
        ]
    )


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


def stages_as_points(frame):
    """`measure_stages`' frame as a point dataset (`labkit record`): value = seconds per batch."""
    return frame.assign(
        quantity=frame["what"], value=frame["seconds_per_batch"], unit="s", bandwidth_direction="unidirectional"
    )


def stages_meta(env: dict) -> dict:
    """Provenance of a `measure_stages` run on this machine (`labkit record`)."""
    return measured_meta(
        env,
        kind="point",
        title="DataLoader → GPU pipeline, each stage timed alone",
        bandwidth_direction="unidirectional",
        method=(
            f"labkit.copies.dataloader.measure_stages: {BATCH_SIZE} x {SAMPLE_SHAPE} uint8 per batch, "
            f"{LOADER_WORKERS} workers; loaders host-timed over a pass after an untimed one; pin and copies: "
            "median per batch after one warm-up"
        ),
        caveats="value = seconds per batch; GBps = batch bytes per second, one direction",
    )


def stages_here(quick: bool, gpu_name: str, have_gpu: bool) -> Found:
    """`measure_stages` on this machine: every stage with a GPU, the workers' stage alone without one."""
    frame = measure_stages(batches=QUICK_STAGE_BATCHES if quick else LOADER_BATCHES, device=0 if have_gpu else None)
    return Found(frame, f"measured here: {gpu_name}")


def stages_recorded(datasets):
    """The stage timings a `labkit record` profile holds among `datasets` (Found), or None."""
    runs = [d for d in datasets if "stage" in d.frame.columns and "seconds_per_batch" in d.frame.columns]
    return Found(runs[0].frame, runs[0].label, (runs[0].name,)) if runs else None


def pace_text(pipelines, stages, pipelines_label: str = "", stages_label: str = "") -> str:
    """What the whole-pipeline rates (`measured_here`/`recorded` frame) and the stages say, in numbers, each
    with where it comes from."""
    lines = []
    if pipelines is not None and len(pipelines) == 2 and pipelines["batches_per_s"].notna().all():
        plain, pinned = (float(v) for v in pipelines["batches_per_s"])
        lines.append(
            f"Whole pipelines{f' ({pipelines_label})' if pipelines_label else ''}: {plain:.0f} batches/s with pin_memory=False, {pinned:.0f} with pin_memory=True. "
            + (
                f"The same workers delivered {plain:.0f} batches/s to the unpinned run, so they are not what holds "
                f"the pinned run at {pinned:.0f}: a stage that pinning adds is."
                if pinned < plain
                else "Pinning did not slow this pipeline down."
            )
        )
    if stages is not None:
        lines.append(f"Each stage alone{f' ({stages_label})' if stages_label else ''}:")
        for r in stages.itertuples():
            lines.append(f"- {r.what}: {r.seconds_per_batch * 1e3:.2f} ms per batch ({r.batches_per_s:.0f} batches/s)")
        if len(stages) == 1:
            lines.append(f"- the other stages ({', '.join(k for k in STAGES if k != 'workers')}) need a CUDA GPU")
    return "\n".join(lines)


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
