"""Notebook 06's result objects (labkit.hierarchy, labkit.cluster.views; shown by Session.present), no processes."""

from __future__ import annotations

import pandas as pd
import pytest

from labkit import cluster
from labkit.cluster import views
from labkit.hierarchy import slowlink, torchrun
from labkit.tools.explain import ExplainedRuns

GiB = 1 << 30


def test_the_recorded_cliff_against_the_healthy_model():
    cliff = views.h100_cliff(cluster.preset("h100_ndr_8nic"), 4 * GiB)
    n = cliff.numbers()
    assert n["recorded_h100_cliff_1_to_2_nodes"] == pytest.approx(473.6 / 154.74)
    assert 1.2 <= n["model_h100_cliff_healthy_ring"] <= 1.3 < n["recorded_h100_cliff_1_to_2_nodes"]
    assert 1.0 <= n["model_h100_cliff_nccl_pick"] < n["model_h100_cliff_healthy_ring"]
    assert cliff.checks() == {"recorded_2node_h100_below_healthy": True}
    assert cliff.label.startswith("recorded: H100") and "÷3.06" in cliff.report()


def test_explained_runs_word_every_run_and_an_invalid_one_without_a_ratio():
    explained = ExplainedRuns()  # nccl-tests#290 against 8x H100 + 8 NDR
    text = explained.report()
    assert text.count("\n- ") == len(explained.rows) == 3 and "recorded 89.9 GB/s busbw" in text
    invalid = {"nodes": 2, "algorithm": None, "verdict": "invalid", "ratio": None, "invalid_reasons": ["no data"]}
    assert explained._line(invalid) == "- 2 node(s), no model: **invalid** — no data"  # no format of None


def test_validation_counts_the_healthy_runs_and_shows_every_dataset():
    val = cluster.validation()
    view = views.ValidationView(val)
    n = view.numbers()
    assert n["healthy_runs_within_10pct"] == n["healthy_multi_node_runs"] >= 9
    assert view.checks() == {"model_explains_most_recorded_points": True}
    assert view.datasets == sorted(set(val["dataset"]))
    assert len(view.report()) == (val["scope"] == "multi-node").sum() > 0  # the table lists multi-node runs
    assert f"{n['healthy_runs_within_10pct']} of {n['healthy_multi_node_runs']} healthy" in view.summary_line()


def test_tp_across_nodes_communicates_more_than_inside():
    tp = views.TpView(cluster.preset("h100_ndr_8nic"), hidden=8192, seq_len=4096, micro_batch=1, layers=80)
    n = tp.numbers()
    assert n["tp16_comm_flat_s"] > n["tp8_comm_s"] > 0
    assert tp.verdict().startswith("TP=16 across 2 nodes spends ×")


def test_healthy_table_covers_five_systems():
    notes = views.HealthyTable().notes()
    assert notes["systems"] == 5 and notes["rows"] >= 15


def test_widget_without_a_result_records_nothing():
    assert views.ScalingDefaults(None).numbers() == {}
    assert views.ScalingDefaults({"flat_drop": 2.0, "hierarchical_drop": 1.5}).numbers() == {
        "widget_default_flat_drop": 2.0,
        "widget_default_hierarchical_drop": 1.5,
    }


def test_a_skipped_torchrun_records_no_experiment_and_says_how_to_run_it():
    skipped = torchrun.TwoAgents(None)
    assert skipped.experiment is None and skipped.checks() == {} and skipped.notes() == {}
    assert "quick = False" in skipped.report()
    ran = torchrun.TwoAgents({"endpoint": "127.0.0.1:1", "records": [{"correct": True}, {"correct": False}]})
    assert ran.experiment == "torchrun" and ran.checks() == {"torchrun_hierarchical_correct": False}


class _Comparison:
    def __init__(self, table):
        self.table = table

    def bytes_table(self):
        return self.table


def _bytes(wire: bool, resent: int = 0):
    rows = [("flat_ring", 1536, 1536, 3072, 3072), ("hierarchical", 512, 512, 2048, 2048)]
    t = pd.DataFrame(rows, columns=["impl", "computed_per_sending_rank", "counted_max_per_rank", "computed_total",
                                    "counted_total"])  # fmt: skip
    t["wire_total"] = t["counted_total"] * 1.01 + resent if wire else None
    t["wire_resent_at_most"] = float(resent) if wire else None
    t["wire_headers_at_most"] = t["counted_total"] * 0.01 if wire else None
    return _Comparison(t)


def test_slow_link_bytes_without_a_wire_count_check_the_formula_only():
    b = slowlink.SlowLinkBytes(_bytes(wire=False))
    assert b.checks() == {"counted_bytes_equal_formula": True} and b.wire_text() == ""
    assert b.numbers() == {"flat_bytes_over_slow_link": 3072.0, "hierarchical_bytes_over_slow_link": 2048.0}


def test_slow_link_bytes_on_the_wire_allow_resends_and_headers_only():
    assert slowlink.SlowLinkBytes(_bytes(wire=True, resent=100)).checks()["wire_bytes_match_payload"] is True
    padded = _bytes(wire=True)
    padded.table["wire_total"] = padded.table["counted_total"] * 1.2  # 20% more than payload + headers: not explained
    assert slowlink.SlowLinkBytes(padded).checks()["wire_bytes_match_payload"] is False
    assert "above the payload" in slowlink.SlowLinkBytes(_bytes(wire=True)).wire_text()
