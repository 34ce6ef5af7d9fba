"""Notebook 04 executed by papermill in reference mode, asserting on its results JSON."""

import json

import pytest

from labkit import reference
from labkit.p2p import diagnosis, matrices, placement, read_write


@pytest.mark.notebook
def test_nb04_reference_mode(run_nb):
    r = run_nb("04_p2p_matrix")
    assert r["mode"] == "reference"
    # with no GPU in the run, both experiments are replayed
    assert r["experiments"]["p2p_local"]["mode"] == "reference"
    assert r["experiments"]["p2p_matrix"]["mode"] == "reference"
    assert r["experiments"]["p2p_matrix"]["gpus_measured"] == 0 == r["experiments"]["p2p_local"]["gpus_measured"]
    # every recorded p2p system is shown, plus the bandwidthTest run behind the staging model
    shown = set(r["datasets"])
    assert set(reference.list_datasets(kind="p2p_matrix")) <= shown
    assert any("bandwidthtest_rtx2080ti" in n for n in shown)
    # the headless widget drew its static default: the complete 8x A100 set, unidirectional, P2P on
    assert r["experiments"]["widget"]["default"] == [
        "p2p_8xa100_sxm4_80gb_nvswitch_distserve",
        "bandwidth_uni",
        "enabled",
    ]
    # numbers come from the recorded matrices (medians over GPU pairs)
    n = r["numbers"]
    assert 260 < n["a100_uni_p2p_GBps"] < 280 and 15 < n["a100_uni_staged_GBps"] < 21
    assert n["a100_latency_p2p_us"] < n["a100_latency_staged_us"]
    assert 85 < n["a100_nvlink_reached_pct"] < 95  # of 300 GB/s per direction, not of 600
    assert 250 < n["h100_bridge_uni_p2p_GBps"] < 260
    # GeForce: the stock driver stages (≈38 GB/s); the 5090 + PRO 6000 box runs real P2P (median 55.6 GB/s)
    assert 38 < n["rtx5090_stock_uni_p2p_median_GBps"] < 39 and n["rtx5090_mix_uni_p2p_median_GBps"] == pytest.approx(
        55.605
    )
    # copy engines vs SM copies (8x H200 class, both directions summed) and the NVSwitch pair of the exercise
    assert n["h200_d2d_bi_ce_GBps"] == pytest.approx(783.73) and n["h200_d2d_bi_sm_GBps"] == pytest.approx(671)
    assert n["h100_nvswitch_pair_uni_GBps"] == pytest.approx(376.195) and n["h100_nvswitch_pair_uni_GBps"] > 450 / 7
    assert {"nvbandwidth_sm_azure_ndh200v5_points", "nvbandwidth_sm_azure_nda100v4_points"} <= shown
    model = r["experiments"]["staging_model"]
    assert model["serial_GBps"] < model["pipelined_GBps"] and model["recorded_GBps"] < model["pipelined_GBps"]
    # self-checks: data valid, invariants hold, diagnosis finds what it should, figures labelled
    assert r["all_checks_passed"], r["checks"]
    for name in (
        "recorded_matrices_valid",
        "bidirectional_at_least_unidirectional_on_nvlink",
        "diagnosis_finds_a100_staged_outliers",
        "diagnosis_finds_geforce_without_p2p",
        "diagnosis_quiet_on_healthy_nvlink_bridge",
        "tp_answer_key_selfcheck",
        "figures_labelled",
    ):
        assert r["checks"][name] is True, name
    assert r["experiments"]["tp_answer_key"] == {
        "tp2": [0, 2],
        "tp4": [0, 1, 2, 3],
        "partition_tp2": [[0, 2], [1, 3], [4, 6], [5, 7]],
    }
    # unanswered exercises and predictions are reported, not crashed on
    assert set(r["experiments"]["exercises"].values()) == {"not attempted"}
    assert len(r["experiments"]["exercises"]) == 9  # 4 exercises + 5 spot-the-error
    assert set(r["experiments"]["predictions"].values()) == {"not attempted"}
    assert r["_seconds"] < 60, f"quick reference run took {r['_seconds']:.0f} s (budget ~30 s)"
    # reads vs writes: the one fabric with both kinds recorded, and the datasets behind it shown
    assert 0.97 < n["h100_p2p_read_over_write"] < 1.0
    assert {"nvbandwidth_d2d_read_ce_8xh100_azure_nd96isr_v5", "p2p_uni_writes_8xh100_nvswitch_mlengineering"} <= shown
    _summary_quotes_the_run(r)


def _markdown(name="04_p2p_matrix"):
    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook(name).read_text())
    return [" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _summary_quotes_the_run(r):
    """The summary's numbers (inside the interview cell, after '## Summary') are this run's, as the text rounds them."""
    text = next(t for t in _markdown() if "## Summary" in t)
    text = text[text.index("## Summary") :]
    n = r["numbers"]
    assert f"median {n['a100_uni_p2p_GBps']:.0f} GB/s of NVLink 3's 300 ({n['a100_nvlink_reached_pct']:.0f} %)" in text
    assert (
        f"≈{n['h100_nvswitch_pair_uni_GBps']:.0f} of NVLink 4's 450 ({100 * n['h100_nvswitch_pair_uni_GBps'] / 450:.0f} %)"
        in text
    )
    assert f"≈{n['a100_uni_staged_GBps']:.1f} GB/s instead of {n['a100_uni_p2p_GBps']:.0f}" in text
    assert f"≈{n['a100_latency_staged_us']:.1f} µs instead of ≈{n['a100_latency_p2p_us']:.1f} µs" in text
    assert f"(read ÷ write {n['h100_p2p_read_over_write']:.2f} on 8× H100)" in text
    q3 = next(t for t in _markdown() if "reaches ~" in t and "per pair" in t)
    pair = n["h100_nvswitch_pair_uni_GBps"]
    assert f"reaches ~{pair:.0f} GB/s per pair (≈{100 * pair / 450:.0f}% of 450" in q3
    answers = next(t for t in _markdown() if t.startswith("<details><summary>Answer</summary> 4. **25 GB/s**"))
    rw = read_write.table()["median_GBps"]
    assert f"**≈{n['h100_p2p_read_over_write']:.2f}** ({rw.iloc[0]:.2f} ÷ {rw.iloc[1]:.2f} GB/s)" in answers


def test_nb04_stated_solutions_pass_the_checks_the_notebook_uses():
    """The answers written in the notebook's <details> are the ones its checks accept."""
    from labkit import check, specs

    topo = placement.HYPOTHETICAL_PCIE_SERVER_TOPOLOGY
    a100 = reference.load("p2p_8xa100_sxm4_80gb_nvswitch_distserve")
    odd = {
        tuple(sorted(f.pairs[0]))
        for f in diagnosis.diagnose(a100)
        if f.rule == "outlier_pair" and "unidirectional, P2P off" in f.message
    }
    uni = matrices.median_off_diagonal(matrices.matrix(a100, "bandwidth_uni", "enabled"))
    assert placement.check_tp_group("1a", [0, 2], topo, 2, include=[0]).passed
    assert placement.check_tp_group("1b", [0, 1, 2, 3], topo, 4, include=[0]).passed
    assert diagnosis.check_pair("2", (5, 4), odd).passed and diagnosis.check_pair("2", (6, 7), odd).passed
    assert check.numeric("3", 91, 100 * uni / specs.spec("NVLink 3").per_direction_GBps(), unit="%").passed


def test_nb04_text_matches_the_answer_key():
    """The solution text names the groups the ranking function returns."""
    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook("04_p2p_matrix").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    topo = placement.HYPOTHETICAL_PCIE_SERVER_TOPOLOGY
    assert f"`{list(placement.rank_tp_groups(topo, 2, include=[0])[0].gpus)}`" in text
    assert f"`{list(placement.rank_tp_groups(topo, 4, include=[0])[0].gpus)}`" in text
    assert "{0,2} {1,3} {4,6} {5,7}" in text


def test_nb04_geforce_answer_quotes_the_data():
    """The Q2 answer's numbers are the shipped matrices' (stock 2x RTX 5090 vs the 5090 + PRO 6000 box)."""
    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook("04_p2p_matrix").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")

    def span(name, kind):
        m = matrices.matrix(reference.load(name), kind, "enabled")
        v = [x for _, _, x in matrices.off_diagonal(m)]
        return min(v), matrices.median_off_diagonal(m), max(v)

    lo, _, hi = span("p2p_2xrtx5090_pcie5_nop2p_issue287", "bandwidth_uni")
    assert f"{lo:.1f}–{hi:.1f} GB/s" in text  # 38.2–38.7
    lo, med, hi = span("p2p_pcie5_4xrtxpro6000_2xrtx5090_dualturin_rtx6kpro", "bandwidth_uni")
    assert f"{lo:.1f}–{hi:.1f} GB/s one way (median {med:.1f})" in text  # 50.2–56.6, 55.6
    lo, _, hi = span("p2p_pcie5_4xrtxpro6000_2xrtx5090_dualturin_rtx6kpro", "latency_gpu")
    assert f"{lo:.2f}–{hi:.2f} µs" in text
