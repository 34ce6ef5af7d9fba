"""Overlap drawn: Gantt charts of timelines, full duplex bars, efficiency against the compute/copy ratio."""

from __future__ import annotations

import re
import textwrap

import numpy as np

from .. import plots
from ..plots import finish, line
from ..units import format_time
from .timelines import Timeline

_KINDS = (
    ("copy back", "tab:green"),
    ("compute", "tab:orange"),
    ("H2D", "tab:blue"),
    ("D2H", "tab:green"),
    ("copy", "tab:blue"),
)


def _kind(span_name: str) -> str:
    """The legend entry of a span: the first word(s) of its name that we know a colour for."""
    for key, _ in _KINDS:
        if span_name.startswith(key):
            return key
    return "other"


def _color(span_name: str) -> str:
    return dict(_KINDS).get(_kind(span_name), "tab:gray")


def draw_gantt(ax, timeline: Timeline, *, title: str | None = None, unit: str = "ms", xmax_s: float | None = None):
    """One row per stream, one bar per span; x in ms from the first start. Title carries the source."""
    from matplotlib.patches import Patch

    scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
    tl = timeline.shifted()
    rows = tl.streams
    for y, stream in enumerate(rows):
        spans = tl.on(stream)
        ax.broken_barh(
            [(s.start_s * scale, max(s.duration_s * scale, 1e-9)) for s in spans],
            (y - 0.35, 0.7),
            facecolors=[_color(s.name) for s in spans],
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first stream on top
    if xmax_s is not None:
        ax.set_xlim(0, xmax_s * scale)
    kinds = list(dict.fromkeys(_kind(s.name) for s in tl.spans))
    ax.legend(handles=[Patch(color=_color(k), label=k) for k in kinds], fontsize=7, loc="lower right")
    finish(
        ax,
        title or f"{tl.scenario}: {format_time(tl.makespan_s)} in all",
        f"time ({unit.replace('us', 'µs')})",
        "stream (row)",
        source=tl.source,
        legend=False,
    )
    return ax


def draw_duplex(ax, table):
    """Recorded full duplex: each direction alone vs the same direction while the other runs."""
    from matplotlib.ticker import FuncFormatter, ScalarFormatter

    labels = [
        "\n".join(textwrap.wrap(re.split(r"[:,(]", t)[0].strip(), 9)) + f"\n{d.upper()}, GPU {g}"
        for t, d, g in zip(table["title"], table["direction"], table["gpu"])
    ]
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["alone_GBps"], 0.4, label="alone (unidirectional)", color="tab:blue")
    ax.bar(
        x + 0.2,
        table["while_other_runs_GBps"],
        0.4,
        color="tab:purple",
        label="same direction while the other runs (bidirectional test; % of alone on top)",
    )
    for xi, r, v in zip(x, table["retained"], table["while_other_runs_GBps"]):
        ax.annotate(
            f"{100 * r:.0f}%", (xi + 0.2, v), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7
        )
    ax.set_xticks(x, labels, fontsize=6.5)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    finish(
        ax,
        "Full duplex: does one direction keep its bandwidth while the other runs?",
        "GPU and direction (label)",
        "bandwidth of that direction (GB/s)",
        source="recorded: nvbandwidth copy-engine tests — sources in the text",
    )


def draw_efficiency(ax, table, label: str, how: str = "measured", **kw):
    """Efficiency vs measured compute/copy ratio, with the per-repeat IQR as error bars."""
    t = table.sort_values("measured_ratio")
    h = line(ax, t["measured_ratio"], t["efficiency"], label, how=how, **kw)
    # the spread of the per-repeat efficiencies (q1..q3); the point, from median times, may lie outside it
    ax.vlines(t["measured_ratio"], t["efficiency_q1"], t["efficiency_q3"], color=h.get_color(), alpha=0.5, lw=3)
    return h


def loader_gantt(timelines: dict, note: str = ""):
    """The loader's timelines (serial, double-buffered) one above the other, on one time axis."""
    xmax = max(tl.makespan_s for tl in timelines.values())
    fig, axes = plots.figure(2, 1, width=10, height=2.6)
    for ax, (name, tl) in zip(axes, timelines.items()):
        draw_gantt(ax, tl, title=f"{name}: {format_time(tl.step_s())} per batch{note}", xmax_s=xmax)
    fig.tight_layout()
    return fig
