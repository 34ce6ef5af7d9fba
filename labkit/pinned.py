"""Pinned vs pageable host memory: the copy speed-up, what pinning itself costs, and the non_blocking pitfall.

- `pinned_empty` / `pin`: pinned allocations capped by `labkit.units.PINNED_CAP_BYTES`, with a
  clear error past it (pinned pages cannot be swapped out; pinning too much starves the OS).
- `ratio_survey(datasets)`: pinned/pageable bandwidth ratio of every recorded `copy_sweep` that
  holds both kinds for the same direction and size; systems with pinned numbers only have no ratio.
- `measure_pin_cost` (GPU): what `tensor.pin_memory()` costs, cold and warm, against the H2D time
  it saves; `measure_host_pin_part` (any CPU): the host half of pinning — a fresh allocation,
  first touch, copy and page lock — a lower bound of the real cost. `break_even_table`: after how
  many copies pinning a fresh tensor pays.
- `measure_dataloader` (GPU): `DataLoader(pin_memory=True/False)` throughput on synthetic images.
- `nonblocking_pitfall_gpu` / `_host`: reading the destination of a non_blocking D2H copy before
  synchronising gives wrong data; after synchronising it is right.
- `labkit bench pinned` and the `pinned` recorder of `labkit record` (GPU only).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

import numpy as np

from . import timing
from .overlap import reference_sets  # noqa: F401  (what a notebook's reference= selects, per kind)
from .reference import precise_rows
from .runtime import gpu_count, require_cuda
from .units import GB, PINNED_CAP_BYTES, KiB, MiB, PinnedCapError, check_pinned_request, format_bytes, pow2_sizes  # noqa: F401

#: What to do without a GPU, added to `require_cuda`'s message.
NO_GPU_HINT = " (notebook 02 replays recorded data), `labkit bench host` for host memory"
#: Sizes for the pin-cost experiment: 64 KiB .. 256 MiB every 4× (quick: up to 16 MiB).
PIN_MIN_BYTES, PIN_MAX_BYTES, PIN_QUICK_MAX_BYTES = 64 * KiB, 256 * MiB, 16 * MiB
#: Repeats of a cold pin (each one frees torch's pinned-memory cache first, so keep it small).
PIN_REPEATS = 5
#: DataLoader experiment: ImageNet-sized uint8 images (3×224×224 = 150,528 B), batch 64 (≈ 9.6 MB).
SAMPLE_SHAPE, BATCH_SIZE, LOADER_WORKERS = (3, 224, 224), 64, 2
#: Batches timed per DataLoader run (after one untimed pass that starts the workers).
LOADER_BATCHES, QUICK_LOADER_BATCHES = 60, 20
#: Distinct samples held in RAM by the synthetic dataset (indices wrap around).
DATASET_SAMPLES = 256
#: Bytes copied in the non_blocking pitfall demo (large enough that the copy takes a while).
PITFALL_BYTES = 64 * MiB
#: GPU clock cycles `torch.cuda._sleep` spins before the pitfall's copy (≈ 25-50 ms at 1-2 GHz):
#: it stands in for a forward pass still running when the host reads the result.
PITFALL_SLEEP_CYCLES = 50_000_000


def can_pin() -> bool:
    """True when torch can allocate pinned memory here (it needs a CUDA driver and device)."""
    return gpu_count() > 0


def pinned_empty(nbytes: int, *, cap: int = PINNED_CAP_BYTES):
    """An uninitialised pinned uint8 tensor of nbytes, refused above `cap` before anything is allocated."""
    import torch

    check_pinned_request(nbytes, cap)
    require_cuda("pinned_empty", hint=NO_GPU_HINT)
    return torch.empty(int(nbytes), dtype=torch.uint8, pin_memory=True)


def pin(tensor, *, cap: int = PINNED_CAP_BYTES):
    """`tensor.pin_memory()` (a pinned copy), refused above `cap`."""
    check_pinned_request(tensor.numel() * tensor.element_size(), cap)
    require_cuda("pin", hint=NO_GPU_HINT)
    return tensor.pin_memory()


# --------------------------------------------------------------------------- recorded ratios
def ratio_frame(ds):
    """Pinned/pageable ratios of one copy_sweep dataset: one row per (direction, run, size) with both."""
    import pandas as pd

    f = ds.frame
    if "memory" not in f.columns or not {"pinned", "pageable"} <= set(f["memory"]):
        return pd.DataFrame()
    keys = ["direction", "nbytes"] + (["run"] if "run" in f.columns else [])
    f = precise_rows(ds)
    p = f[f["memory"] == "pinned"].set_index(keys)["bandwidth_GBps"]
    q = f[f["memory"] == "pageable"].set_index(keys)["bandwidth_GBps"]
    both = pd.concat({"pinned_GBps": p, "pageable_GBps": q}, axis=1, join="inner").reset_index()
    if "run" not in both.columns:
        both["run"] = ""
    both["ratio"] = both["pinned_GBps"] / both["pageable_GBps"]
    both.insert(0, "dataset", ds.name)
    both.insert(1, "title", ds.meta["title"])
    both.insert(2, "label", ds.label)
    return both.sort_values(["direction", "run", "nbytes"]).reset_index(drop=True)


def ratio_survey(datasets):
    """(ratios, pinned_only): ratio rows of every dataset that has both kinds, and the ones that do not.

    `pinned_only` is a DataFrame (dataset, title, directions) of host↔device sweeps holding pinned
    numbers only: they have no pinned/pageable ratio, and nothing is made up for them.
    """
    import pandas as pd

    frames, only = [], []
    for ds in datasets:
        f = ds.frame
        hd = f[f["direction"].isin(["h2d", "d2h"])]
        if len(hd) == 0:
            continue
        r = ratio_frame(ds)
        if len(r):
            frames.append(r)
        elif set(hd["memory"]) == {"pinned"}:
            only.append({"dataset": ds.name, "title": ds.meta["title"],
                         "directions": ", ".join(sorted(set(hd["direction"])))})
    ratios = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["dataset", "title", "label", "direction", "nbytes", "run", "pinned_GBps", "pageable_GBps", "ratio"])
    return ratios, pd.DataFrame(only, columns=["dataset", "title", "directions"])


def largest_size_ratios(ratios):
    """Per (dataset, direction, run): the ratio at the largest size both kinds share (the plateau end)."""
    if len(ratios) == 0:
        return ratios
    idx = ratios.groupby(["dataset", "direction", "run"])["nbytes"].idxmax()
    return ratios.loc[idx].sort_values("ratio").reset_index(drop=True)


def draw_ratios(ax, ratios, *, folklore: float | None = 2.0):
    """Pinned/pageable ratio vs size, every recorded system; single-size sources as markers.

    One colour per system; H2D solid, D2H dashed; several runs of one source get their own markers.
    """
    from .plots import RECORDED, finish, line, size_axis

    colors = dict(zip(dict.fromkeys(ratios["label"]), plt_colors()))
    for (label, direction, run), g in ratios.groupby(["label", "direction", "run"], sort=False):
        g = g.sort_values("nbytes")
        name = f"{label} — {direction.upper()}" + (f" ({run})" if run else "")
        if len(g) == 1:
            ax.plot(g["nbytes"], g["ratio"], marker="D" if direction == "h2d" else "v", ms=7, ls="none",
                    mfc="none", mew=1.5, color=colors[label], label=name)
        else:
            line(ax, g["nbytes"], g["ratio"], name, how=RECORDED if not label.startswith("measured") else "measured",
                 color=colors[label], ls="-" if direction == "h2d" else "--",
                 marker="s" if run == sorted(set(ratios[ratios["label"] == label]["run"]))[0] else "o")
    ax.axhline(1.0, color="0.6", lw=0.8)
    if folklore:
        ax.axhline(folklore, color="tab:red", ls=":", lw=1.2, label=f"the folklore '≈{folklore:g}×' (a claim, not a measurement)")
    size_axis(ax)
    finish(ax, "Pinned ÷ pageable bandwidth — every recorded system with both", "transfer size (bytes, log2)",
           "pinned ÷ pageable (×)", source="recorded: sources in the legend; H2D solid / ◇, D2H dashed / ▽")
    legend_below(ax)


def legend_below(ax, fontsize: float = 6.5) -> None:
    """Move the legend under the axes, where it hides no data (long source labels need the room)."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=1, frameon=False)


def measured_ratio_frame(sweeps):
    """Ratio rows (same columns as `ratio_frame`) from live `transfer.Sweep`s of both memories."""
    import pandas as pd

    by = {(s.direction, s.memory): s for s in sweeps}
    rows = []
    for direction in ("h2d", "d2h"):
        p, q = by.get((direction, "pinned")), by.get((direction, "pageable"))
        if p is None or q is None:
            continue
        qb = dict(zip(q.nbytes, q.bandwidth_GBps))
        for n, bw in zip(p.nbytes, p.bandwidth_GBps):
            if n in qb:
                rows.append({"dataset": "measured here", "title": p.device, "label": f"measured here: {p.device}",
                             "direction": direction, "nbytes": n, "run": "", "pinned_GBps": bw,
                             "pageable_GBps": qb[n], "ratio": bw / qb[n]})
    return pd.DataFrame(rows)


def draw_sweeps(ax, datasets, direction: str, *, measured=()):
    """Bandwidth vs size, pinned (solid) and pageable (dashed), for one direction.

    Datasets holding both kinds are drawn in colour, one run per source (the ratio figure shows
    every run); pinned-only datasets are drawn in grey under one legend entry (they are listed
    in a table, and have no ratio); `measured` live Sweeps are drawn bold.
    """
    from .plots import MEASURED, RECORDED, finish, line, size_axis

    grey_labelled = False
    colors = iter(plt_colors())
    for ds in datasets:
        if ds.meta.get("bandwidth_direction") != "unidirectional":
            continue  # aggregate / mixed figures are not one link's bandwidth
        f = precise_rows(ds)
        f = f[(f["direction"] == direction) & f["memory"].isin(["pinned", "pageable"])]
        if "run" in f.columns and len(f):
            f = f[f["run"] == sorted(set(f["run"]))[0]]
        if len(f) == 0:
            continue
        if set(f["memory"]) == {"pinned"}:
            label = None if grey_labelled else "recorded: systems with pinned numbers only (table below)"
            grey_labelled = True
            g = f.sort_values("nbytes")
            ax.plot(g["nbytes"], g["bandwidth_GBps"], color="0.65", marker="o", ms=3, lw=0.8, label=label, zorder=1)
            continue
        color = next(colors)  # one colour per system: pinned and pageable side by side
        for memory, g in f.groupby("memory"):
            g = g.sort_values("nbytes")
            name = f"recorded: {ds.meta['title']} — {memory}"
            if len(g) == 1:
                ax.plot(g["nbytes"], g["bandwidth_GBps"], marker="D" if memory == "pinned" else "X", ms=7, ls="none",
                        color=color, label=name)
            else:
                line(ax, g["nbytes"], g["bandwidth_GBps"], name, how=RECORDED, color=color,
                     ls="-" if memory == "pinned" else "--")
    for s in measured:
        if s.direction == direction:
            line(ax, s.nbytes, s.bandwidth_GBps, f"measured here: {s.device} — {s.memory}", how=MEASURED,
                 color="black", ls="-" if s.memory == "pinned" else "--")
    ax.set_yscale("log")
    size_axis(ax)
    arrow = {"h2d": "host→device (H2D)", "d2h": "device→host (D2H)"}.get(direction, direction)
    finish(ax, f"{arrow}: pinned (solid, ◆) vs pageable (dashed, ✕)", "transfer size (bytes, log2)",
           "bandwidth (GB/s, unidirectional)", source="sources in the legend")
    legend_below(ax)


def plt_colors() -> list[str]:
    """The default colour cycle (grey and black are kept for pinned-only and measured-here lines)."""
    import matplotlib.pyplot as plt

    return [c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"] if c not in ("#7f7f7f",)] * 3


# --------------------------------------------------------------------------- pin cost and break-even
@dataclasses.dataclass(frozen=True)
class PinCost:
    """What pinning `nbytes` costs, and (when measured on a GPU) the copy times it changes."""

    nbytes: int
    pin: timing.Measurement  # cold pin_memory() on a GPU; the host part (alloc + touch + copy + lock) on a CPU
    what: str  # what `pin` times, in plain words
    pin_warm: timing.Measurement | None = None  # pin_memory() with torch's pinned-block cache warm
    pinned_copy: timing.Measurement | None = None  # H2D from pinned memory
    pageable_copy: timing.Measurement | None = None  # H2D from pageable memory

    def to_rows(self) -> list[dict]:
        """Rows of the `point` dataset kind (quantity, value, unit, bandwidth_direction) + nbytes, iqr_s."""
        out = []
        for quantity, m in ((self.what, self.pin), (WARM_PIN, self.pin_warm),
                            (COPY_PINNED, self.pinned_copy), (COPY_PAGEABLE, self.pageable_copy)):
            if m is not None:
                out.append({"quantity": quantity, "value": m.median_s, "unit": "s", "bandwidth_direction": "none",
                            "nbytes": self.nbytes, "iqr_s": m.iqr_s,
                            "samples_s": " ".join(f"{s:.6e}" for s in m.samples_s)})
        return out


COLD_PIN = "pin_memory() of a fresh tensor, pinned-memory cache emptied first (cudaHostAlloc + copy)"
WARM_PIN = "pin_memory() with torch's pinned-memory cache warm (copy into a reused pinned block)"
HOST_PIN_PART = "host part of pinning: fresh allocation + first touch + copy + mlock/munlock"
COPY_PINNED = "H2D copy from pinned memory"
COPY_PAGEABLE = "H2D copy from pageable memory"


def _empty_host_cache() -> bool:
    import torch

    for fn in (getattr(getattr(torch, "accelerator", None), "empty_host_cache", None),
               getattr(torch._C, "_host_emptyCache", None)):
        if fn is not None:
            fn()
            return True
    return False


def measure_pin_cost(sizes: Sequence[int], *, repeats: int = PIN_REPEATS, device: int = 0) -> list[PinCost]:
    """On a GPU: cold and warm `pin_memory()` and pinned/pageable H2D copy times for each size.

    Cold: torch's pinned-block cache is emptied before each sample, so the sample pays
    cudaHostAlloc (page-locking and mapping the pages for DMA) plus the copy — what pinning a
    fresh tensor costs the first time. Warm: the cache hands back a block of that size, so only
    the copy is paid (DataLoader's pin thread in steady state).
    """
    import torch

    require_cuda("measure_pin_cost", hint=NO_GPU_HINT)
    from .transfer import gpu_copy_sweep

    out = []
    have_cache_control = True
    for n in sizes:
        check_pinned_request(n)
        src = torch.ones(int(n), dtype=torch.uint8)
        samples = []
        for _ in range(repeats + 1):  # the first sample is a warm-up
            have_cache_control = _empty_host_cache() and have_cache_control
            t0 = time.perf_counter()
            p = src.pin_memory()
            samples.append(time.perf_counter() - t0)
            del p
        cold = timing.Measurement(tuple(samples[1:]), 1, "host", f"cold pin {format_bytes(n)}", int(n))
        warm = timing.time_host(lambda: src.pin_memory(), repeats=repeats, label=f"warm pin {format_bytes(n)}", nbytes=int(n))
        pinned = gpu_copy_sweep([n], "h2d", "pinned", repeats=repeats, device=device).measurements[0]
        pageable = gpu_copy_sweep([n], "h2d", "pageable", repeats=repeats, device=device).measurements[0]
        what = COLD_PIN if have_cache_control else "pin_memory() of a fresh tensor (this torch cannot empty its pinned cache: may be warm)"
        out.append(PinCost(int(n), cold, what, warm, pinned, pageable))
    return out


def _mlock_pair():
    """(mlock, munlock) from libc, or None where this OS has no mlock."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.mlock, libc.munlock
    except (OSError, AttributeError):
        return None


def measure_host_pin_part(sizes: Sequence[int], *, repeats: int = PIN_REPEATS) -> tuple[list[PinCost], str]:
    """On any CPU: time the host half of pinning a fresh tensor, a *lower bound* of pin_memory()'s cost.

    Each sample allocates a new buffer, touches and fills it with a copy of the source (what
    pin_memory() does after allocating) and page-locks it with mlock (what cudaHostAlloc does on
    top of allocating, before mapping the pages for the GPU's DMA engine — the part no CPU can time).
    Returns the costs and a note saying whether mlock was allowed (RLIMIT_MEMLOCK often is 8 MiB).
    """
    import ctypes

    lock = _mlock_pair()
    refused = []
    out = []
    for n in sizes:
        n = int(n)
        src = np.ones(n, dtype=np.uint8)
        samples = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            dst = np.empty(n, dtype=np.uint8)
            np.copyto(dst, src)
            if lock is not None:
                addr, size = ctypes.c_void_p(dst.ctypes.data), ctypes.c_size_t(n)
                if lock[0](addr, size) == 0:
                    lock[1](addr, size)
                else:
                    refused.append(n)
            samples.append(time.perf_counter() - t0)
            del dst
        out.append(PinCost(n, timing.Measurement(tuple(samples[1:]), 1, "host", f"host pin part {format_bytes(n)}", n),
                           HOST_PIN_PART))
    if lock is None:
        note = "mlock is not available on this OS: the page-locking step is missing too"
    elif refused:
        note = (f"mlock was refused for {format_bytes(min(refused))} and above (RLIMIT_MEMLOCK; `ulimit -l`): "
                "those sizes time allocation + copy only")
    else:
        note = "mlock allowed for every size"
    return out, note


def break_even_table(pin_s: dict[int, float], pageable_s: dict[int, float], pinned_s: dict[int, float]):
    """Per size: pin cost, the time one pinned copy saves, and the copies needed before pinning pays.

    Copying a tensor k times costs k·t_pageable unpinned, or t_pin + k·t_pinned after pinning it
    once, so pinning pays from k* = t_pin / (t_pageable − t_pinned) copies on; a fresh tensor
    copied once pays only if k* ≤ 1. Where pinned is not faster (small sizes), it never pays.
    """
    import pandas as pd

    rows = []
    for n in sorted(set(pin_s) & set(pageable_s) & set(pinned_s)):
        saved = pageable_s[n] - pinned_s[n]
        k = pin_s[n] / saved if saved > 0 else math.inf
        rows.append({"nbytes": n, "size": format_bytes(n), "pin_s": pin_s[n], "pageable_copy_s": pageable_s[n],
                     "pinned_copy_s": pinned_s[n], "saved_per_copy_s": saved, "break_even_copies": k,
                     "pays_for_one_copy": bool(k <= 1)})
    return pd.DataFrame(rows)


def copy_times_from_sweep(ds, direction: str = "h2d", run: str | None = None) -> tuple[dict, dict]:
    """(pageable_s, pinned_s) by size from a recorded sweep: t = nbytes / bandwidth (the sources print GB/s)."""
    f = precise_rows(ds)
    f = f[f["direction"] == direction]
    if "run" in f.columns:
        run = run or sorted(set(f["run"]))[0]
        f = f[f["run"] == run]
    t = lambda m: {int(n): n / (bw * GB) for n, bw in zip(f[f["memory"] == m]["nbytes"], f[f["memory"] == m]["bandwidth_GBps"])}  # noqa: E731
    return t("pageable"), t("pinned")


def recorded_pin_cost(datasets):
    """(pin_s, pageable_s, pinned_s, dataset) from a `pin_cost` point dataset written by `labkit record`, or None."""
    for ds in datasets:
        f = ds.frame
        if ds.kind == "point" and "nbytes" in f.columns and (f["quantity"] == COPY_PAGEABLE).any():
            pick = lambda q: {int(n): float(v) for n, v in zip(f[f["quantity"] == q]["nbytes"], f[f["quantity"] == q]["value"])}  # noqa: E731
            cold = [q for q in set(f["quantity"]) if q.startswith("pin_memory() of a fresh tensor")]
            if cold:
                return pick(cold[0]), pick(COPY_PAGEABLE), pick(COPY_PINNED), ds
    return None


# --------------------------------------------------------------------------- DataLoader
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


# --------------------------------------------------------------------------- the non_blocking pitfall
@dataclasses.dataclass(frozen=True)
class PitfallResult:
    """Fraction of wrong bytes read from a non_blocking D2H destination before and after synchronising."""

    wrong_before_sync: float
    wrong_after_sync: float
    nbytes: int
    source: str  # "measured here: <GPU>" or "measured here: host thread standing in for the copy engine"


def nonblocking_pitfall_gpu(nbytes: int = PITFALL_BYTES, *, device: int = 0,
                            sleep_cycles: int = PITFALL_SLEEP_CYCLES) -> PitfallResult:
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
    from .overlap import HostEvent, HostStream

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


# --------------------------------------------------------------------------- bench and record
WHATS = ("sweep", "pin_cost", "dataloader", "pitfall")


def bench_arguments(p, name: str) -> None:
    p.add_argument("--what", default=",".join(WHATS), help=f"comma-separated subset of {', '.join(WHATS)}")
    p.add_argument("--sizes", help="sweep / pin-cost sizes, e.g. 64KiB,4MiB,256MiB (default: 64 KiB .. 256 MiB every 4x)")
    p.add_argument("--repeats", type=int, default=PIN_REPEATS)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--quick", action="store_true")


def bench(args, name: str):
    """Records: pinned/pageable sweep with ratios, pin cost with break-even, DataLoader, pitfall."""
    from .units import parse_sizes

    whats = [w.strip() for w in args.what.split(",") if w.strip()]
    unknown = set(whats) - set(WHATS)
    if unknown:
        raise ValueError(f"unknown --what {sorted(unknown)}; choose from {', '.join(WHATS)}")
    require_cuda("labkit bench pinned", hint=NO_GPU_HINT)
    sizes = parse_sizes(args.sizes) if args.sizes else pow2_sizes(
        PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES if args.quick else PIN_MAX_BYTES, step=2)
    base = {"experiment": "pinned"}
    if "sweep" in whats:
        from .transfer import gpu_copy_sweep

        for direction in ("h2d", "d2h"):
            sw = {m: gpu_copy_sweep(sizes, direction, m, repeats=args.repeats, device=args.device) for m in ("pinned", "pageable")}
            pageable = {q.nbytes: q for q in sw["pageable"].measurements}  # a size skipped (out of memory) in one
            for p in sw["pinned"].measurements:  # kind has no ratio
                q = pageable.get(p.nbytes)
                if q is None:
                    continue
                yield {**base, "test": "sweep", "direction": direction, "device": sw["pinned"].device, "nbytes": p.nbytes,
                       "size": format_bytes(p.nbytes), "pinned_GBps": p.bandwidth_GBps, "pageable_GBps": q.bandwidth_GBps,
                       "ratio": p.bandwidth_GBps / q.bandwidth_GBps, "bandwidth_direction": "unidirectional"}
    if "pin_cost" in whats:
        for c in measure_pin_cost(sizes, repeats=args.repeats, device=args.device):
            saved = c.pageable_copy.median_s - c.pinned_copy.median_s
            yield {**base, "test": "pin_cost", "nbytes": c.nbytes, "size": format_bytes(c.nbytes),
                   "pin_cold_s": c.pin.median_s, "pin_warm_s": c.pin_warm.median_s,
                   "pinned_copy_s": c.pinned_copy.median_s, "pageable_copy_s": c.pageable_copy.median_s,
                   "saved_per_copy_s": saved, "break_even_copies": c.pin.median_s / saved if saved > 0 else math.inf}
    if "dataloader" in whats:
        for pm in (False, True):
            r = measure_dataloader(pm, batches=QUICK_LOADER_BATCHES if args.quick else LOADER_BATCHES, device=args.device)
            yield {**base, "test": "dataloader", **r, "bandwidth_direction": "unidirectional"}
    if "pitfall" in whats:
        r = nonblocking_pitfall_gpu(device=args.device)
        yield {**base, "test": "nonblocking_pitfall", **dataclasses.asdict(r)}


def record(folder, quick: bool, env: dict) -> list[str]:
    """GPU only: `pin_cost`, `dataloader_throughput` and `nonblocking_pitfall` point datasets; [] without a GPU.

    The pinned/pageable bandwidth sweep itself is recorded by the `copy` recorder (gpu_copy_sweep).
    """
    import pandas as pd

    from .provenance import measured_meta
    from .reference import write_dataset

    if not env.get("cuda_available") or not can_pin():
        return []
    sizes = pow2_sizes(PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES if quick else PIN_MAX_BYTES, step=2)
    rows = [r for c in measure_pin_cost(sizes) for r in c.to_rows()]
    write_dataset(folder, "pin_cost", pd.DataFrame(rows), measured_meta(
        env, kind="point", title="cost of pin_memory() vs the H2D time it saves", bandwidth_direction="none",
        method=("labkit.pinned.measure_pin_cost: tensor.pin_memory() host-timed (cold: torch pinned cache emptied "
                "before each sample; warm: cache reused); H2D copies by labkit.transfer.gpu_copy_sweep; median of "
                f"{PIN_REPEATS} samples"),
        caveats="times in seconds per call (value column, unit s); samples_s keeps the raw samples"))
    loader = [measure_dataloader(pm, batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES) for pm in (False, True)]
    write_dataset(folder, "dataloader_throughput", pd.DataFrame([{
        "quantity": f"DataLoader(pin_memory={r['pin_memory']}) → .to(cuda, non_blocking=True) throughput",
        "value": r["throughput_GBps"], "unit": "GB/s", "bandwidth_direction": "unidirectional",
        "memory": "pinned" if r["pin_memory"] else "pageable", "batches_per_s": r["batches_per_s"],
        "batch_bytes": r["batch_bytes"], "workers": r["workers"], "batches": r["batches"]} for r in loader]),
        measured_meta(env, kind="point", title="DataLoader pin_memory=True vs False, synthetic images",
                      bandwidth_direction="unidirectional",
                      method=(f"labkit.pinned.measure_dataloader: {BATCH_SIZE} x {SAMPLE_SHAPE} uint8 per batch, "
                              f"{LOADER_WORKERS} workers, one untimed pass, then a host-timed pass ending in one synchronize"),
                      caveats="in-memory synthetic data: no decoding or disk, so the copy path dominates"))
    r = nonblocking_pitfall_gpu()
    write_dataset(folder, "nonblocking_pitfall", pd.DataFrame([
        {"quantity": "fraction of wrong bytes read before synchronize", "value": r.wrong_before_sync, "unit": "fraction",
         "bandwidth_direction": "none", "nbytes": r.nbytes},
        {"quantity": "fraction of wrong bytes read after synchronize", "value": r.wrong_after_sync, "unit": "fraction",
         "bandwidth_direction": "none", "nbytes": r.nbytes}]),
        measured_meta(env, kind="point", title="non_blocking D2H read before vs after synchronize",
                      bandwidth_direction="none",
                      method="labkit.pinned.nonblocking_pitfall_gpu: torch.cuda._sleep, then copy_(non_blocking=True) into pinned memory"))
    return ["pin_cost", "dataloader_throughput", "nonblocking_pitfall"]
