"""Figures carry a title, axis labels with units, and their source."""

import matplotlib

matplotlib.use("Agg")

import pytest

from labkit import plots, reference, specs
from labkit.copies import curves as lc


def test_finish_requires_units():
    fig, ax = plots.figure()
    ax.plot([1, 2], [1, 2])
    with pytest.raises(ValueError, match="unit"):
        plots.finish(ax, "t", "size", "time (s)")


def test_figure_problems_finds_what_is_missing():
    fig, ax = plots.figure()
    ax.plot([1, 2], [1, 2])
    assert len(plots.figure_problems(fig)) >= 3
    plots.line(ax, [1, 2], [2, 3], "recorded: x — source", plots.RECORDED)
    plots.finish(ax, "A title", "size (bytes)", "time (µs)")
    assert plots.figure_problems(fig) == []


def test_model_lines_are_labelled_as_models():
    fig, ax = plots.figure()
    h = plots.line(ax, [1, 2], [1, 2], "ring all-reduce", plots.MODEL)
    assert h.get_label().startswith("model:") and h.get_linestyle() == "--"


def test_spec_line_says_per_direction():
    fig, ax = plots.figure()
    h = plots.spec_line(ax, specs.spec("NVLink 4"))
    assert "450 GB/s per direction" in h.get_label()


def test_latency_curve_figures_are_complete():
    ds = reference.load(next(n for n in reference.list_datasets(kind="copy_sweep") if "shmoo" in n))
    fig = lc.plot_curves(lc.curves_from_dataset(ds), title="t")
    assert plots.figure_problems(fig) == []
    fit = lc.curves_from_dataset(ds)[0].fit()
    fig, p = lc.plot_prediction(fit, 1 << 20, "V100")
    assert plots.figure_problems(fig) == [] and p["bound"] in ("latency-bound", "bandwidth-bound")
