"""Notebook 5's measured-vs-model view: the α-β link fit, and what happens when a busy machine gives
times that cannot carry one (the notebook reports it instead of failing)."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from labkit import plots  # noqa: E402
from labkit.allreduce import views  # noqa: E402
from labkit.collectives import busbw  # noqa: E402
from labkit.models import allreduce_time  # noqa: E402

N = 4
SIZES = [64 << 10, 1 << 20, 4 << 20]


def _records(seconds_by_size, impls=("library", "ring")):
    return [
        {
            "impl": impl,
            "nbytes": s,
            "world_size": N,
            "seconds": t,
            "busbw_GBps": busbw("all_reduce", s, t, N),
            "samples_s": [t],
        }
        for impl in impls
        for s, t in seconds_by_size.items()
    ]


def test_fit_recovers_the_ring_link_it_was_given():
    alpha, beta = 80e-6, 1.5  # per message; GB/s per direction per rank
    records = _records({s: allreduce_time(s, N, beta, alpha, "ring") for s in SIZES})
    link, why = views.try_fit_ring_link(records, "library")
    assert why is None
    assert link["alpha_s"] == pytest.approx(alpha, rel=1e-6) and link["beta_GBps"] == pytest.approx(beta, rel=1e-6)


def test_times_that_do_not_grow_give_no_link_and_say_why():
    # the scheduler made the smallest all-reduce the slowest: no bandwidth term exists in these times
    records = _records({64 << 10: 12e-3, 1 << 20: 7e-3, 4 << 20: 6e-3})
    with pytest.raises(ValueError, match="do not grow with size"):
        views.fit_ring_link(records, "library")
    link, why = views.try_fit_ring_link(records, "library")
    assert link is None
    assert "do not grow with size" in why and "64 KiB: 12.00 ms" in why and "4 MiB: 6.00 ms" in why


def test_figure_without_a_fit_draws_measurements_only_and_says_so():
    records = _records({64 << 10: 12e-3, 1 << 20: 7e-3, 4 << 20: 6e-3})
    fig = views.measured_vs_model_figure(records, "measured here: test", None, models=False)
    ax = fig.axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert labels == ["measured: library", "measured: ring"]
    assert "no α-β model" in ax.get_title()
    assert plots.figure_problems(fig) == []


def test_figure_with_a_fit_draws_the_models():
    records = _records({s: allreduce_time(s, N, 1.5, 80e-6, "ring") for s in SIZES})
    link, _ = views.try_fit_ring_link(records)
    ax = views.measured_vs_model_figure(records, "measured here: test", link).axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert "model: ring (α=80 µs, β=1.50 GB/s fitted)" in labels, labels


def test_summarize_line_names_the_sizes_its_plateau_comes_from():
    s = views.summarize_line([1 << 20, 64 << 10, 4 << 20, 16 << 20], [1.0, 0.2, 1.5, 2.0])
    assert s["plateau_busbw_GBps"] == 1.5  # median of the three largest: 1.0, 1.5, 2.0
    assert (s["plateau_from_bytes"], s["plateau_to_bytes"]) == (1 << 20, 16 << 20)
