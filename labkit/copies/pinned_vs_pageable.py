"""Pinned ÷ pageable: the copy speed-up pinning buys, on every recorded system that measured both kinds.

`ratio_survey(datasets)` gives the ratio per (system, direction, size); systems with pinned numbers only
have no ratio, and nothing is made up for them. `draw_sweeps` / `draw_ratios` draw both, with the
folklore "≈2×" as a claim, not a measurement.
"""

from __future__ import annotations

from ..plots import MEASURED, RECORDED, finish, line, size_axis
from ..reference import precise_rows
from ..runtime import Found
from ..units import KiB, pow2_sizes
from .sweeps import QUICK_MAX_BYTES, SWEEP_MAX_BYTES, gpu_copy_sweep


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


def ratio_survey(datasets, measured=()):
    """(ratios, pinned_only): ratio rows of every dataset that has both kinds, and the ones that do not.

    `pinned_only` is a DataFrame (dataset, title, directions) of host↔device sweeps holding pinned
    numbers only: they have no pinned/pageable ratio, and nothing is made up for them. `measured`
    live Sweeps (both memories) come first, as dataset "measured here".
    """
    import pandas as pd

    frames, only = ([measured_ratio_frame(measured)] if measured else []), []
    for ds in datasets:
        f = ds.frame
        hd = f[f["direction"].isin(["h2d", "d2h"])]
        if len(hd) == 0:
            continue
        r = ratio_frame(ds)
        if len(r):
            frames.append(r)
        elif set(hd["memory"]) == {"pinned"}:
            only.append(
                {"dataset": ds.name, "title": ds.meta["title"], "directions": ", ".join(sorted(set(hd["direction"])))}
            )
    ratios = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(
            columns=["dataset", "title", "label", "direction", "nbytes", "run", "pinned_GBps", "pageable_GBps", "ratio"]
        )
    )
    return ratios, pd.DataFrame(only, columns=["dataset", "title", "directions"])


def measure_here(quick: bool, *, progress: bool = True) -> Found:
    """Pinned and pageable H2D and D2H sweeps on this machine's GPU, 4 KiB .. 1 GiB every 4× (quick: 64 MiB)."""
    sizes = pow2_sizes(4 * KiB, QUICK_MAX_BYTES if quick else SWEEP_MAX_BYTES, step=2)
    sweeps = [
        gpu_copy_sweep(sizes, direction, memory, progress=progress)
        for direction in ("h2d", "d2h")
        for memory in ("pinned", "pageable")
    ]
    return Found(sweeps, f"measured here: {sweeps[0].device}")


def datasets_drawn(datasets, ratios, pinned_only) -> list:
    """The datasets the sweep figure draws: those with a ratio, and those with pinned numbers only."""
    names = set(ratios["dataset"]) | set(pinned_only["dataset"])
    return [d for d in datasets if d.name in names]


def largest_size_ratios(ratios):
    """Per (dataset, direction, run): the ratio at the largest size both kinds share (the plateau end)."""
    if len(ratios) == 0:
        return ratios
    idx = ratios.groupby(["dataset", "direction", "run"])["nbytes"].idxmax()
    return ratios.loc[idx].sort_values("ratio").reset_index(drop=True)


def _series(ax, x, y, name: str, *, color, lone: dict, **line_kw) -> None:
    """One source's series: a line through its sizes, or a lone marker (styled by `lone`) where it gives one size."""
    if len(x) == 1:
        ax.plot(x, y, ms=7, ls="none", color=color, label=name, **lone)
    else:
        line(ax, x, y, name, color=color, **line_kw)


def draw_ratios(ax, ratios, *, folklore: float | None = 2.0):
    """Pinned/pageable ratio vs size, every recorded system; single-size sources as markers.

    One colour per system; H2D solid, D2H dashed; several runs of one source get their own markers.
    """
    colors = dict(zip(dict.fromkeys(ratios["label"]), plt_colors()))
    for (label, direction, run), g in ratios.groupby(["label", "direction", "run"], sort=False):
        g = g.sort_values("nbytes")
        name = f"{label} — {direction.upper()}" + (f" ({run})" if run else "")
        _series(
            ax,
            g["nbytes"],
            g["ratio"],
            name,
            color=colors[label],
            lone={"marker": "D" if direction == "h2d" else "v", "mfc": "none", "mew": 1.5},
            how=RECORDED if not label.startswith("measured") else "measured",
            ls="-" if direction == "h2d" else "--",
            marker="s" if run == sorted(set(ratios[ratios["label"] == label]["run"]))[0] else "o",
        )
    ax.axhline(1.0, color="0.6", lw=0.8)
    if folklore:
        ax.axhline(
            folklore,
            color="tab:red",
            ls=":",
            lw=1.2,
            label=f"the folklore '≈{folklore:g}×' (a claim, not a measurement)",
        )
    size_axis(ax)
    finish(
        ax,
        "Pinned ÷ pageable bandwidth — every recorded system with both",
        "transfer size (bytes, log2)",
        "pinned ÷ pageable (×)",
        source="recorded: sources in the legend; H2D solid / ◇, D2H dashed / ▽",
    )
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
                rows.append(
                    {
                        "dataset": "measured here",
                        "title": p.device,
                        "label": f"measured here: {p.device}",
                        "direction": direction,
                        "nbytes": n,
                        "run": "",
                        "pinned_GBps": bw,
                        "pageable_GBps": qb[n],
                        "ratio": bw / qb[n],
                    }
                )
    return pd.DataFrame(rows)


def draw_sweeps(ax, datasets, direction: str, *, measured=()):
    """Bandwidth vs size, pinned (solid) and pageable (dashed), for one direction.

    Datasets holding both kinds are drawn in colour, one run per source (the ratio figure shows
    every run); pinned-only datasets are drawn in grey under one legend entry (they are listed
    in a table, and have no ratio); `measured` live Sweeps are drawn bold.
    """
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
            _series(
                ax,
                g["nbytes"],
                g["bandwidth_GBps"],
                name,
                color=color,
                lone={"marker": "D" if memory == "pinned" else "X"},
                how=RECORDED,
                ls="-" if memory == "pinned" else "--",
            )
    for s in measured:
        if s.direction == direction:
            line(
                ax,
                s.nbytes,
                s.bandwidth_GBps,
                f"measured here: {s.device} — {s.memory}",
                how=MEASURED,
                color="black",
                ls="-" if s.memory == "pinned" else "--",
            )
    ax.set_yscale("log")
    size_axis(ax)
    arrow = {"h2d": "host→device (H2D)", "d2h": "device→host (D2H)"}.get(direction, direction)
    finish(
        ax,
        f"{arrow}: pinned (solid, ◆) vs pageable (dashed, ✕)",
        "transfer size (bytes, log2)",
        "bandwidth (GB/s, unidirectional)",
        source="sources in the legend",
    )
    legend_below(ax)


def plt_colors() -> list[str]:
    """The default colour cycle (grey and black are kept for pinned-only and measured-here lines)."""
    import matplotlib.pyplot as plt

    return [c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"] if c not in ("#7f7f7f",)] * 3
