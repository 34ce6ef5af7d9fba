"""The figures of `labkit compare`: one per kind, a panel per group, each source a line."""

from __future__ import annotations

import math

from .. import plots
from ..units import format_bytes
from .compare_groups import PLATEAU_SIZES, Group, bandwidths


def plot_kind(groups: list[Group]):
    """One figure for one kind: a panel per group, each source a line, the source in the legend."""
    ncols = 1 if len(groups) == 1 else 2
    nrows = math.ceil(len(groups) / ncols)
    fig, axes = plots.figure(nrows, ncols, width=7.0, height=5.4)
    axes = [axes] if len(groups) == 1 else list(axes)
    for ax, g in zip(axes, groups):
        _plot_group(ax, g)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _legend_labels(g: Group) -> list[str]:
    labels = [s.source.label for s in g.series]
    return [
        lab if labels.count(lab) == 1 else f"{lab} · {s.dataset.name}{' [' + s.split_text + ']' if s.split else ''}"
        for lab, s in zip(labels, g.series)
    ]


def _plot_group(ax, g: Group) -> None:
    q, unit = g.quantity
    direction = "" if g.direction == "none" else f", {g.direction}"
    for s, label in zip(g.series, _legend_labels(g)):
        how = plots.MEASURED if s.dataset.meta["provenance"] == "measured" else plots.RECORDED
        pts = s.points(g.value_column)
        if g.rule.sweep:  # the whole curve; the common sizes that make the plateau are shaded
            sizes = sorted(x[0] for x in pts)
            plots.line(ax, sizes, bandwidths(s, g.value_column, sizes), label, how)
        else:
            plots.line(ax, range(len(g.shown)), [pts[c] for c in g.shown], label, how)
    if g.rule.sweep:
        top = [x[0] for x in g.common[-PLATEAU_SIZES:]]
        ax.axvspan(top[0] / 1.2, top[-1] * 1.2, color="0.88", zorder=0, label="plateau: largest common sizes")
        ax.set_yscale("log")
        plots.size_axis(ax)
        xlabel = "message size (bytes, log2)"
    else:
        ax.set_xticks(range(len(g.shown)))
        ax.set_xticklabels([_tick(g.kind, c) for c in g.shown], rotation=90, fontsize=6 if len(g.shown) > 16 else 8)
        ax.set_ylim(bottom=0)
        xlabel = {"p2p_matrix": "GPU pair (src → dst index)", "point": "message size (bytes, where given)"}.get(
            g.kind, f"{', '.join(g.rule.x)} (ranks)"
        )
    plots.finish(ax, f"{g.title}\n{q} ({g.value_column}){direction}", xlabel, f"{q} ({unit}{direction})", legend=False)
    # under the panel, so that long source names never cover the data
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)


def _tick(kind: str, x: tuple) -> str:
    if kind == "point":
        return format_bytes(x[0]) if x[0] != "" else "—"
    return "→".join(str(v) for v in x)
