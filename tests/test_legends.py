"""Legible legends (labkit.plots.tidy, applied by Session.figure to every notebook figure)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from labkit import plots, specs  # noqa: E402
from labkit.runtime import Session  # noqa: E402


def _crowded():
    """Thirteen recorded series (tab10 repeats after ten), three spec lines of one grey, 6 pt legend text,
    and labels that say "recorded:" twice."""
    fig, ax = plots.figure()
    x = np.arange(1, 10)
    for i in range(13):
        plots.line(ax, x, x * (i + 1), f"recorded: recorded: system {i}", how=plots.RECORDED)
    for gen in (3, 4, 5):
        plots.spec_line(ax, specs.pcie_spec(gen))
    plots.finish(ax, "thirteen systems", "size (B)", "bandwidth (GB/s)")
    ax.legend(fontsize=6)
    return fig, ax


def test_tidy_gives_every_entry_its_own_look_one_prefix_and_readable_text():
    fig, ax = _crowded()
    before = plots.legend_problems(fig)
    assert any("doubled prefix" in p for p in before)
    assert any("looks like" in p for p in before)
    assert any("6 pt" in p for p in before)
    data = [line.get_ydata().copy() for line in ax.lines]
    plots.tidy(fig)
    assert plots.legend_problems(fig) == []
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "recorded: system 0" and [line.get_label() for line in ax.lines][0] == "recorded: system 0"
    # the legend's swatches match the lines they stand for, and no number moved
    lines = {line.get_label(): line for line in ax.lines}
    for text, proxy in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles):
        assert matplotlib.colors.to_hex(proxy.get_color()) == matplotlib.colors.to_hex(
            lines[text.get_text()].get_color()
        )
    assert all(np.array_equal(a, line.get_ydata()) for a, line in zip(data, ax.lines))
    fig.canvas.draw()  # the resized legend still lays out


def test_distinct_styles_keep_their_shared_colour():
    """Same colour, different style (H2D solid, D2H dashed of one system) is told apart already: kept."""
    fig, ax = plots.figure()
    plots.line(ax, [1, 2], [1, 2], "recorded: A, H2D", how=plots.RECORDED, color="C0")
    plots.line(ax, [1, 2], [2, 3], "recorded: A, D2H", how=plots.RECORDED, color="C0", ls="--")
    plots.finish(ax, "t", "x (B)", "y (GB/s)")
    plots.tidy(fig)
    assert [matplotlib.colors.to_hex(line.get_color()) for line in ax.lines] == ["#1f77b4"] * 2


def test_every_notebook_figure_goes_through_tidy(tmp_path):
    """Look-alike lines and small text are tidied away; a doubled prefix is tidied on screen but still reported,
    because the label was built wrong (tests/test_runtime.py)."""
    session = Session("01_pcie_latency_curve", "reference", True, None, str(tmp_path / "r.json"))
    fig, _ = _crowded()
    session.figure(fig)
    assert session.figure_problems and all("doubled prefix" in p for p in session.figure_problems)


def test_a_recorded_label_says_recorded_once():
    """notebook 01 printed "recorded: recorded: H2D/D2H/D2D copy sweep …" for the small-copy floor."""
    from labkit.copies import small_copy as sc

    label = sc.recorded_floor(sc.RECORDED_SWEEP).label
    assert label.startswith("recorded: ") and "recorded: recorded" not in label


def test_a_legend_below_its_axes_does_not_run_into_the_next_one():
    """Two panels side by side, legends under each: larger text must not overlap the right panel's legend."""
    fig, axes = plots.figure(1, 2, width=7.5, height=5)
    label = "recorded: Quadro RTX 6000, cudaMemcpy H2D/D2H 1 B - 1 MiB, pageable vs pinned (UW CSE 554) — pageable"
    for ax in axes:
        for i in range(3):
            plots.line(ax, [1, 2], [i, i + 1], f"{label} {i}", how=plots.RECORDED)
        plots.finish(ax, "t", "x (B)", "y (GB/s)", legend=False)
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(0.0, -0.16), frameon=False)
    plots.tidy(fig)
    renderer = fig.canvas.get_renderer()
    left, right = (ax.get_legend().get_window_extent(renderer) for ax in axes)
    assert left.x1 < right.x0
    assert "\n" in axes[0].get_legend().get_texts()[0].get_text()
    assert axes[0].lines[0].get_label() == f"{label} 0"  # the line's own label is whole


def test_only_a_legend_with_axes_on_its_right_is_laid_out(monkeypatch):
    """tidy measures a legend's text (a renderer pass over it) only where an axes to its right could be hit:
    none for panels stacked in one column, the left panel's alone for two side by side."""
    from matplotlib.legend import Legend

    measured = []
    real = Legend.get_window_extent
    monkeypatch.setattr(Legend, "get_window_extent", lambda self, *a, **k: measured.append(self) or real(self, *a, **k))
    for (rows, cols), expected in (((2, 1), 0), ((1, 2), 1)):
        fig, axes = plots.figure(rows, cols)
        for ax in axes:
            plots.line(ax, [1, 2], [1, 2], "recorded: a system whose name is long enough to matter")
            plots.finish(ax, "t", "x (B)", "y (GB/s)")
        measured.clear()
        plots.tidy(fig)
        assert measured == [axes[0].get_legend()] * expected, (rows, cols)
