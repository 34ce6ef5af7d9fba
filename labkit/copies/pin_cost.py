"""What pinning itself costs, and after how many copies it pays: `pin_memory()` against the H2D time it saves.

`measure_pin_cost` (GPU): cold and warm `tensor.pin_memory()` and pinned/pageable H2D copy times per
size; `measure_host_pin_part` (any CPU): the host half of pinning — a fresh allocation, first touch,
copy and page lock — a lower bound of the real cost. `break_even_table`: copying a tensor k times costs
k·t_pageable unpinned, or t_pin + k·t_pinned pinned once; pinning pays from k* = t_pin / (t_pageable − t_pinned).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from .. import plots, timing
from ..reference import precise_rows
from ..runtime import Found, require_cuda
from ..units import GB, KiB, MiB, check_pinned_request, format_bytes, format_time, pow2_sizes
from .pinned import NO_GPU_HINT, can_pin
from .pinned_vs_pageable import legend_below, ratio_frame
from .sweeps import gpu_copy_sweep

#: Sizes for the pin-cost experiment: 64 KiB .. 256 MiB every 4× (quick: up to 16 MiB).
PIN_MIN_BYTES, PIN_MAX_BYTES, PIN_QUICK_MAX_BYTES = 64 * KiB, 256 * MiB, 16 * MiB


#: Repeats of a cold pin (each one frees torch's pinned-memory cache first, so keep it small).
PIN_REPEATS = 5


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
        for quantity, m in (
            (self.what, self.pin),
            (WARM_PIN, self.pin_warm),
            (COPY_PINNED, self.pinned_copy),
            (COPY_PAGEABLE, self.pageable_copy),
        ):
            if m is not None:
                out.append(
                    {
                        "quantity": quantity,
                        "value": m.median_s,
                        "unit": "s",
                        "bandwidth_direction": "none",
                        "nbytes": self.nbytes,
                        "iqr_s": m.iqr_s,
                        "samples_s": " ".join(f"{s:.6e}" for s in m.samples_s),
                    }
                )
        return out


COLD_PIN = "pin_memory() of a fresh tensor, pinned-memory cache emptied first (cudaHostAlloc + copy)"


WARM_PIN = "pin_memory() with torch's pinned-memory cache warm (copy into a reused pinned block)"


HOST_PIN_PART = "host part of pinning: fresh allocation + first touch + copy + mlock/munlock"


COPY_PINNED = "H2D copy from pinned memory"


COPY_PAGEABLE = "H2D copy from pageable memory"


def _host_cache_emptier():
    """torch's call that frees the blocks its pinned-memory cache holds (newest name first), or None where this
    torch has none — a fact of the installed torch, the same for every call."""
    import torch

    for fn in (
        getattr(getattr(torch, "accelerator", None), "empty_host_cache", None),
        getattr(torch._C, "_host_emptyCache", None),
    ):
        if fn is not None:
            return fn
    return None


def measure_pin_cost(sizes: Sequence[int], *, repeats: int = PIN_REPEATS, device: int = 0) -> list[PinCost]:
    """On a GPU: cold and warm `pin_memory()` and pinned/pageable H2D copy times for each size.

    Cold: torch's pinned-block cache is emptied before each sample, so the sample pays
    cudaHostAlloc (page-locking and mapping the pages for DMA) plus the copy — what pinning a
    fresh tensor costs the first time. Warm: the cache hands back a block of that size, so only
    the copy is paid (DataLoader's pin thread in steady state).
    """
    import torch

    require_cuda("measure_pin_cost", hint=NO_GPU_HINT)
    out = []
    empty_cache = _host_cache_emptier()  # run before every cold sample; None: nothing to run, the label says so
    what = (
        COLD_PIN
        if empty_cache is not None
        else "pin_memory() of a fresh tensor (this torch cannot empty its pinned cache: may be warm)"
    )
    for n in sizes:
        check_pinned_request(n)
        src = torch.ones(int(n), dtype=torch.uint8)
        cold = timing.time_host(  # the pinned tensor is dropped at once, so the next setup can free its block
            lambda: src.pin_memory(),
            repeats=repeats,
            warmup=1,
            inner=1,
            setup=empty_cache,
            label=f"cold pin {format_bytes(n)}",
            nbytes=int(n),
        )
        warm = timing.time_host(
            lambda: src.pin_memory(), repeats=repeats, label=f"warm pin {format_bytes(n)}", nbytes=int(n)
        )
        pinned = gpu_copy_sweep([n], "h2d", "pinned", repeats=repeats, device=device).measurements[0]
        pageable = gpu_copy_sweep([n], "h2d", "pageable", repeats=repeats, device=device).measurements[0]
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
    pin_memory() does after allocating) and page-locks it with mlock — a CPU-side *stand-in* for the
    page-locking the CUDA driver does, not what it does: the driver pins pages with get_user_pages
    (open-gpu-kernel-modules, kernel-open/nvidia/os-mlock.c, os_lock_user_pages) and maps them for the
    GPU's DMA engine (the part no CPU can time), and it does not check RLIMIT_MEMLOCK. mlock does, so the
    note returned says whether this process's memlock limit allowed the stand-in (it often is 8 MiB).
    """
    import ctypes

    lock = _mlock_pair()
    refused = []
    out = []
    for n in sizes:
        n = int(n)
        src = np.ones(n, dtype=np.uint8)

        def pin_part(src=src, n=n):
            dst = np.empty(n, dtype=np.uint8)
            np.copyto(dst, src)
            if lock is not None:
                addr, size = ctypes.c_void_p(dst.ctypes.data), ctypes.c_size_t(n)
                if lock[0](addr, size) == 0:
                    lock[1](addr, size)
                else:
                    refused.append(n)

        label = f"host pin part {format_bytes(n)}"
        m = timing.time_host(pin_part, repeats=repeats, warmup=1, inner=1, label=label, nbytes=n)
        out.append(PinCost(n, m, HOST_PIN_PART))
    if lock is None:
        note = "mlock is not available on this OS: the page-locking step is missing too"
    elif refused:
        note = (
            f"mlock was refused for {format_bytes(min(refused))} and above (RLIMIT_MEMLOCK; `ulimit -l`): "
            "those sizes time allocation + copy only"
        )
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
        rows.append(
            {
                "nbytes": n,
                "size": format_bytes(n),
                "pin_s": pin_s[n],
                "pageable_copy_s": pageable_s[n],
                "pinned_copy_s": pinned_s[n],
                "saved_per_copy_s": saved,
                "break_even_copies": k,
                "pays_for_one_copy": bool(k <= 1),
            }
        )
    return pd.DataFrame(rows)


def copy_times_from_sweep(ds, direction: str = "h2d", run: str | None = None) -> tuple[dict, dict]:
    """(pageable_s, pinned_s) by size from a recorded sweep: t = nbytes / bandwidth (the sources print GB/s)."""
    f = precise_rows(ds)
    f = f[f["direction"] == direction]
    if "run" in f.columns:
        run = run or sorted(set(f["run"]))[0]
        f = f[f["run"] == run]
    t = lambda m: {
        int(n): n / (bw * GB) for n, bw in zip(f[f["memory"] == m]["nbytes"], f[f["memory"] == m]["bandwidth_GBps"])
    }  # noqa: E731
    return t("pageable"), t("pinned")


def recorded_pin_cost(datasets):
    """(pin_s, pageable_s, pinned_s, dataset) from a `pin_cost` point dataset written by `labkit record`, or None."""
    for ds in datasets:
        f = ds.frame
        if ds.kind == "point" and "nbytes" in f.columns and (f["quantity"] == COPY_PAGEABLE).any():
            pick = lambda q: {
                int(n): float(v) for n, v in zip(f[f["quantity"] == q]["nbytes"], f[f["quantity"] == q]["value"])
            }  # noqa: E731
            cold = [q for q in set(f["quantity"]) if q.startswith("pin_memory() of a fresh tensor")]
            if cold:
                return pick(cold[0]), pick(COPY_PAGEABLE), pick(COPY_PINNED), ds
    return None


# --------------------------------------------------------------------------- what notebook 02 shows
@dataclasses.dataclass(frozen=True)
class BreakEven:
    """The break-even table and where its two halves came from (pin cost, copy times)."""

    table: object  # DataFrame of break_even_table
    pin_label: str
    copy_label: str
    what: str  # what the pin time times, in plain words


def measured_here(quick: bool, gpu_name: str):
    """Pin cost and copy times measured on this machine's GPU (Found), or None without one."""
    if not can_pin():
        return None
    sizes = pow2_sizes(PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES if quick else PIN_MAX_BYTES, step=2)
    costs = measure_pin_cost(sizes, repeats=3 if quick else PIN_REPEATS)
    label = f"measured here: {gpu_name}"
    table = break_even_table(
        {c.nbytes: c.pin.median_s for c in costs},
        {c.nbytes: c.pageable_copy.median_s for c in costs},
        {c.nbytes: c.pinned_copy.median_s for c in costs},
    )
    return Found(BreakEven(table, label, label, costs[0].what), label)


def recorded(datasets):
    """The pin-cost run a `labkit record` profile holds among `datasets` (Found), or None."""
    got = recorded_pin_cost(datasets)
    if got is None:
        return None
    pin_s, pageable_s, pinned_s, ds = got
    return Found(
        BreakEven(
            break_even_table(pin_s, pageable_s, pinned_s),
            ds.label,
            ds.label,
            "pin_memory() of a fresh tensor (recorded)",
        ),
        ds.label,
        (ds.name,),
    )


def host_part_here(copy_sweep, quick: bool, cpu: str):
    """The host half of pinning measured on this CPU (a lower bound), against a recorded sweep's H2D copy times."""
    pageable_s, pinned_s = copy_times_from_sweep(copy_sweep, "h2d")
    sizes = [n for n in sorted(pageable_s) if n >= PIN_MIN_BYTES][:: 2 if quick else 1]
    costs, lock_note = measure_host_pin_part(sizes, repeats=3 if quick else PIN_REPEATS)
    pin_label = f"measured here: host part of pinning only ({cpu}) — a lower bound"
    table = break_even_table({c.nbytes: c.pin.median_s for c in costs}, pageable_s, pinned_s)
    return Found(
        BreakEven(table, pin_label, copy_sweep.label + " (H2D)", costs[0].what + f"; {lock_note}"),
        pin_label,
        (copy_sweep.name,),
    )


def copy_reference(datasets, ratios, shipped=()):
    """The recorded sweep whose copy times the break-even uses: of those with both kinds (in `ratios`), the one
    with the most sizes; from `shipped` when none of `datasets` has both."""
    with_both = [d for d in datasets if d.name in set(ratios["dataset"])] or [d for d in shipped if len(ratio_frame(d))]
    return max(with_both, key=lambda d: d.frame["nbytes"].nunique())


def pin_or_not(table, nbytes: int, copies: int, *, pin_label: str, copy_label: str) -> dict:
    """The widget's view: pin once then copy k times, or copy pageable k times — which is faster, drawn."""
    row = table.set_index("nbytes").loc[nbytes]
    ks = list(range(copies + 1))
    fig, ax = plots.figure(width=8, height=4.2)
    plots.line(
        ax,
        ks,
        [k * row.pageable_copy_s * 1e3 for k in ks],
        f"model: k pageable copies ({copy_label})",
        how=plots.MODEL,
        color="tab:gray",
    )
    plots.line(
        ax,
        ks,
        [(row.pin_s + k * row.pinned_copy_s) * 1e3 for k in ks],
        f"model: pin once ({pin_label}), then k pinned copies",
        how=plots.MODEL,
        color="tab:blue",
    )
    if row.break_even_copies <= copies:
        ax.axvline(row.break_even_copies, color="tab:red", lw=0.8, label=f"k* = {row.break_even_copies:.2f}")
    plots.finish(
        ax,
        f"Pin a fresh {row['size']} tensor or not? (H2D)",
        "copies of the same tensor (count)",
        "total time (ms)",
        source="model from the times in the table above",
    )
    ax.xaxis.get_major_locator().set_params(integer=True)  # whole copies
    legend_below(ax, fontsize=7)
    unpinned, pinned_total = copies * row.pageable_copy_s, row.pin_s + copies * row.pinned_copy_s
    verdict = "pinning pays" if pinned_total < unpinned else "stay pageable"
    print(
        f"{row['size']}, {copies} {'copy' if copies == 1 else 'copies'}: {format_time(unpinned)} pageable vs "
        f"{format_time(pinned_total)} pin + pinned → {verdict} (k* = {row.break_even_copies:.2f})"
    )
    return {"nbytes": int(nbytes), "copies": copies, "pays": bool(pinned_total < unpinned)}
