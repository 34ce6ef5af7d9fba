"""Notebook 03 (overlap) executed by papermill in reference mode, asserting on its results JSON."""

import math

import pytest


@pytest.mark.notebook
def test_nb03_reference_mode(run_nb):
    r = run_nb("03_overlap")
    assert r["mode"] == "reference"
    ex = r["experiments"]
    # the GPU experiment replays the overlap run recorded on the H100 (labkit record), labelled as recorded
    assert ex["overlap"]["mode"] == "reference"
    assert ex["overlap"]["shown_as"] == "recorded"
    assert ex["overlap"]["source"].startswith("recorded:") and "H100" in ex["overlap"]["source"]
    assert "h100_vm_labkit_gpu_overlap_run" in r["datasets"]
    assert ex["overlap_model"]["source"].startswith("model:")
    assert ex["overlap_model"]["beta_GBps"] > 0 and ex["overlap_model"]["alpha_us"] >= 0
    # the host-thread experiment is real, runs in every mode, and says so
    assert ex["host_overlap"]["mode"] == "live"
    assert ex["host_overlap"]["source"].startswith("measured here: host threads")
    assert math.isfinite(r["numbers"]["host_efficiency_at_ratio_1"])
    assert r["numbers"]["host_loader_speedup"] > 0
    # the model: overlapped is faster, and its step is the slowest stage
    assert r["numbers"]["model_step_overlapped_s"] < r["numbers"]["model_step_serial_s"]
    m = ex["overlap_model"]
    assert r["numbers"]["model_step_overlapped_s"] == pytest.approx(max(m["t_copy_s"], m["t_compute_s"]))
    # recorded full duplex: nvbandwidth bidirectional runs, none a perfect duplex
    assert len(ex["full_duplex"]["recorded"]) >= 2
    assert 0 < r["numbers"]["duplex_retained_min"] <= r["numbers"]["duplex_retained_max"] < 1
    # the double-buffered loader: every batch once, in order, buffers intact
    assert ex["loader_self_test"]["seen"] == list(range(12))
    assert r["checks"]["loader_every_batch_once_in_order"] and r["checks"]["loader_buffers_intact"]
    assert r["checks"]["figures_labelled"]
    assert r["all_checks_passed"], r["checks"]
    # the widget rendered its static default (headless) and returned the model's numbers
    assert ex["widget"]["overlapped_step_s"] <= ex["widget"]["serial_step_s"]
    assert set(ex["exercises"].values()) == {"not attempted"}
    assert any("copy_sweep" not in d and "nvbandwidth" in d for d in r["datasets"])
    # the interview numbers come from this run: host threads measured here, the GPU run replayed
    iv, n = ex["interview"], r["numbers"]
    assert iv["host_source"] == ex["host_overlap"]["source"]
    assert iv["host_eta_at_ratio_1"] == n["host_efficiency_at_ratio_1"]
    assert iv["gpu_source"] == ex["overlap"]["source"]
    assert iv["gpu_eta_pinned"] == pytest.approx(n["gpu_efficiency_pinned"])
    assert iv["gpu_eta_pageable"] == pytest.approx(n["gpu_efficiency_pageable"])
    assert all(math.isfinite(iv[k]) for k in ("gpu_eta_pinned", "gpu_eta_pageable", "gpu_duplex_retained"))
    assert iv["gpu_eta_pinned"] > 0.8 > 0.3 > iv["gpu_eta_pageable"]  # pageable memory kills overlap
    # H2D + D2H at once: faster than one after the other, slower than two independent links
    assert 0.5 < iv["gpu_duplex_retained"] < 1
    assert r["_seconds"] < 60
    _summary_quotes_the_run(r)


def _summary_quotes_the_run(r):
    """The summary's and Q4's numbers are this run's (results JSON), as the text rounds them."""
    import json

    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook("03_overlap").read_text())
    md = [" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"]
    summary = next(t for t in md if t.startswith("## Summary"))
    n, pg = r["numbers"], r["experiments"]["pageable_overlap"]

    def num(x, digits=2):
        return f"{x:.{digits}f}".replace("-", "−")  # the text uses the minus sign

    assert f"median η = {num(n['gpu_efficiency_pinned'])} with pinned memory" in summary
    assert (
        f"median {num(pg['pageable'])} of five runs that spread from {num(pg['pageable_min'])} to {num(pg['pageable_max'])}"
        in summary
    )
    assert f"compute only {100 * pg['ratio_min']:.0f}–{100 * pg['ratio_max']:.0f}% of the copy time" in summary
    d = r["experiments"]["interview"]
    assert 0.5 < d["gpu_duplex_retained"] < 1


def test_nb03_text_quotes_the_data():
    """The full-duplex figure the text quotes is the recorded H100 run's H2D + D2H at once."""
    import json

    from labkit.overlap import recorded, timelines
    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook("03_overlap").read_text())
    md = " ".join(" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    both = timelines.duplex_table(recorded.gpu_run(None).data).bidirectional_GBps.iloc[0]
    assert f"(the recorded H100 VM: {both:.1f} GB/s, table below)" in md
