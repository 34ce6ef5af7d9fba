"""labkit.overlap.lesson: notebook 03's results present themselves through Session.present (no notebook run)."""

import matplotlib
import pytest

from labkit import plots
from labkit import reference as ref
from labkit.overlap import lesson, recorded, timelines
from labkit.runtime import Session, Shown
from labkit.units import MiB

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def model():
    link, fit = recorded.link_model(ref.load_all(kind="copy_sweep"), 64 * MiB)
    t_copy = fit.predict(64 * MiB)
    return lesson.PipelineModel(link, fit, 64 * MiB, t_copy, 0.75 * t_copy)


@pytest.fixture(scope="module")
def gpu_run():
    found = recorded.gpu_run(None)
    return lesson.GpuOverlap(Shown("overlap", "reference", "recorded", found.data, found.label))


def test_the_model_step_is_the_slowest_stage_overlapped_and_the_sum_serial(model):
    n = model.numbers()
    assert n["model_step_overlapped_s"] == pytest.approx(max(model.t_copy_s, model.t_compute_s))
    assert n["model_step_serial_s"] == pytest.approx(model.t_copy_s + model.t_compute_s)
    assert model.checks() == {"model_overlapped_faster": True}
    assert model.notes()["source"].startswith("model:") and model.datasets == (model.link.name,)
    assert not plots.figure_problems(model.figure())


def test_the_widget_view_agrees_with_the_step_time_rule(model):
    out = model.view(1 << 26, 50.0)  # 50 ms of compute: compute-bound
    assert out["bound"] == "compute"
    assert out["overlapped_step_s"] == pytest.approx(0.05)


def test_a_recorded_gpu_run_shows_eta_per_memory_and_its_loader(gpu_run, tmp_path):
    s = Session("03_overlap", "reference", gpus=0)
    s.present(gpu_run)
    assert set(s.numbers) == {"gpu_efficiency_pinned", "gpu_efficiency_pageable", "gpu_loader_speedup"}
    assert s.numbers["gpu_efficiency_pinned"] > s.numbers["gpu_efficiency_pageable"]  # pageable memory kills overlap
    assert s.figures_checked == 1 and not s.figure_problems


def test_without_a_gpu_run_nothing_is_drawn_or_recorded(model):
    empty = lesson.GpuOverlap(Shown("overlap", "reference", "fell back", None, model.source))
    assert empty.figure() is None and empty.report() is None and empty.numbers() == {} and empty.duplex.empty
    pageable = lesson.PageableOverlap(empty, model)  # the model instead: pageable copies run serially
    assert pageable.notes()["pageable_step_s"] == pytest.approx(model.numbers()["model_step_serial_s"])
    interview = lesson.Interview(None, empty, None, model)
    assert "no GPU run" in interview._gpu_lines()[0][0]


def test_the_interview_quotes_the_run_and_the_recorded_duplex(gpu_run, model):
    duplex = lesson.Duplex(recorded.recorded_duplex_for(None)[0], gpu_run)
    n = duplex.numbers()
    assert 0 < n["duplex_retained_min"] <= n["duplex_retained_max"] < 1
    lines, iv = lesson.Interview(None, gpu_run, duplex, model)._gpu_lines()
    assert 0.5 < iv["gpu_duplex_retained"] < 1 and iv["gpu_source"] == gpu_run.source
    assert iv["gpu_eta_pinned"] == pytest.approx(gpu_run.by_memory["pinned"])
    assert duplex.gpu0_h2d_retained() is None or 0 < duplex.gpu0_h2d_retained() < 1


def test_the_loader_self_test_records_both_checks():
    t = lesson.LoaderSelfTest({"seen": [0, 2, 1], "in_order_once": False, "intact": True})
    assert t.checks() == {"loader_every_batch_once_in_order": False, "loader_buffers_intact": True}


def _host_frame():
    """A host run of three compute/copy ratios, one repeat each: copy 1 s, compute = ratio, both as given."""
    import pandas as pd

    rows = []
    for ratio, both in ((0.5, 1.0), (1.0, 1.2), (2.0, 2.5)):
        for scenario, end in ((timelines.COPY_ALONE, 1.0), (timelines.COMPUTE_ALONE, ratio), (timelines.BOTH, both)):
            rows.append({"scenario": scenario, "compute_to_copy": ratio, "repeat": 0, "end_s": end, "nbytes": 8})
    frame = pd.DataFrame(rows)
    frame.attrs["source"] = "measured here: test"
    return frame


def test_host_overlap_reads_eta_at_ratio_1_from_its_table():
    host = lesson.HostOverlap(_host_frame(), 0.5)
    assert host.at_1.efficiency == pytest.approx(timelines.overlap_efficiency(1.0, 1.0, 1.2))  # 0.8
    assert host.bucket == "high" and host.numbers() == {"host_efficiency_at_ratio_1": pytest.approx(0.8)}
    assert host.notes()["efficiency"] == [1.0, 0.8, 0.5]


def test_sources_names_every_dataset_shown(gpu_run):
    name = recorded.gpu_run(None).datasets[0]
    assert lesson.sources([name], None).startswith("- ")


def test_present_displays_a_report_list_in_order(capsys):
    class Two:
        def report(self):
            return ["first line", "second line"]

    Session("demo", "reference", gpus=0).present(Two())
    out = capsys.readouterr().out
    assert out.index("first line") < out.index("second line")


def test_a_gpu_run_of_pageable_memory_only_reports_without_a_pinned_median(gpu_run, model):
    """PageableOverlap.report formatted a missing pinned median (None) and raised TypeError."""
    frame = gpu_run.frame[gpu_run.frame.memory == "pageable"]
    only = lesson.GpuOverlap(Shown("overlap", "reference", "recorded", frame, gpu_run.source))
    text = lesson.PageableOverlap(only, model).report()
    assert "pinned: not in this run" in text and f"pageable {only.by_memory['pageable']:.2f}" in text


def test_the_host_run_reports_a_load_average_the_os_does_not_keep(monkeypatch):
    """os.getloadavg does not exist on Windows: the run says the load is unknown instead of raising."""
    monkeypatch.delattr("os.getloadavg", raising=False)
    assert lesson.load_average() is None
    host = lesson.HostOverlap(_host_frame(), lesson.load_average())
    assert "load average before the run: not kept by this OS" in host.report()[0]
    assert host.notes()["load_average_1min"] is None


def test_exercise_4_says_why_when_the_readme_system_is_not_shown(gpu_run):
    from labkit import check

    table = recorded.recorded_duplex_for(None)[0]
    kept = lesson.Duplex(table, gpu_run).gpu0_h2d_retained()
    assert lesson.Duplex(table, gpu_run).check_gpu0_h2d_retained(kept).passed
    without = lesson.Duplex(table[~table.dataset.str.contains("readme")], gpu_run).check_gpu0_h2d_retained(0.9)
    assert without.status == check.NOTHING_TO_CHECK and "README's GPU 0" in without.message
