"""`labkit model --nodes` and notebook 06's cluster views, all through labkit.cluster (no timings, no GPU)."""

import json

import pytest

from labkit import cluster
from labkit.cluster import views
from labkit.tools.cli import main

GiB = 1 << 30
CLUSTER = ["model", "--size", "8GiB", "--gpus", "16", "--nodes", "2", "--gpus-per-node", "8", "--bandwidth", "450"]
NICS = ["--nic-bandwidth", "25", "--nics-per-node", "8"]


def test_cli_cluster_model_prints_one_json_line_per_algorithm(capsys):
    assert main(CLUSTER + NICS + ["--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["algorithm"] for r in rows] == ["tree", "ring", "hierarchical"]
    S, N = 8 * GiB, 16
    for r in rows:
        assert r["algbw_GBps"] == pytest.approx(S / r["seconds"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * 2 * (N - 1) / N)
    ring = rows[1]
    # the ring leaves each node over all 8 NICs: 8 channels x 24 GB/s (NCCL's speed for a 25 GB/s NIC), not one NIC
    assert 0.95 * 8 * 24 <= ring["busbw_GBps"] <= 8 * 24
    assert sum(r["nccl_would_pick"] for r in rows) == 1


def test_cli_cluster_model_table_and_in_network_reduction(capsys):
    assert main(CLUSTER + NICS + ["--nvls", "--sharp"]) == 0
    out = capsys.readouterr().out
    for algorithm in ("ring", "tree", "hierarchical", "nvls_tree", "collnet_chain"):
        assert f"\n{algorithm} " in out
    assert "busbw" in out and "a model, not a measurement" in out


@pytest.mark.parametrize(
    "change,needle",
    [
        (["--nodes", "3"], "--nodes (3) must divide --gpus (16)"),
        (["--bandwidth", "nan"], "--bandwidth must be finite"),
        (["--bandwidth", "-450"], "--bandwidth must be"),
        (["--nic-bandwidth", "inf"], "--nic-bandwidth must be finite"),
        (["--nic-bandwidth", "0"], "--nic-bandwidth must be"),
        (["--gpus-per-node", "4"], "--gpus-per-node (4) must equal"),
    ],
)
def test_cli_cluster_model_refuses_bad_input_naming_the_flag(change, needle, capsys):
    args = CLUSTER + NICS
    i = args.index(change[0]) if change[0] in args else None
    args = args[:i] + change + args[i + 2 :] if i is not None else args + change
    assert main(args) != 0
    assert needle in capsys.readouterr().err


def test_bytes_over_the_slow_link_single_channel():
    S = 3 * 1024 * 1024
    for g, m in ((2, 2), (3, 2), (8, 4)):
        N = g * m
        b = views.slow_link_bytes(S, g, m)
        assert b["flat_per_crossing_rank"] == pytest.approx(2 * (N - 1) / N * S)
        assert b["hier_per_group_uplink"] == pytest.approx(2 * (m - 1) / m * S)
    assert views.slow_link_bytes(S, 4, 1)["flat_total"] == 0


def test_hierarchical_with_given_rates_reduces_to_the_ring_at_one_group_or_one_rank_per_group():
    S = GiB
    s = cluster.given_rates(
        gpus_per_node=8, intra_GBps=450.0, nics_per_node=8, nic_GBps=50.0, alpha_intra_s=3e-6, alpha_inter_s=10e-6
    )
    # NCCL's latency form for the flat ring: 2(N-m) intra steps + 2(m-1) network steps
    assert cluster.predict(s, 2, 1.0, algorithm="ring").seconds == pytest.approx(2 * 14 * 3e-6 + 2 * 10e-6, rel=1e-6)
    one = cluster.given_rates(gpus_per_node=1, intra_GBps=450.0, nics_per_node=1, nic_GBps=50.0)
    for m in (2, 5, 16):
        assert cluster.predict(one, m, S, algorithm="hierarchical").seconds == pytest.approx(
            cluster.predict(one, m, S, algorithm="ring").seconds
        )


def test_tp_placement_uses_nccls_pick_and_pays_the_network_across_nodes():
    s = cluster.preset("h100_ndr_8nic")
    tp = views.tp_placement(s, hidden=8192, seq_len=4096, micro_batch=1, layers=80, tp_degrees=(1, 8, 16))
    assert list(tp["nccl_pick"]) == ["-", "nvls", "nvls_tree"]
    inside, across = tp.iloc[1], tp.iloc[2]
    assert inside["allreduce_s"] == pytest.approx(cluster.predict(s, 1, 8192 * 4096 * 2).seconds)
    assert across["comm_s"] > inside["comm_s"]
    p4d = views.tp_placement(
        cluster.preset("p4d_efa"), hidden=8192, seq_len=4096, micro_batch=1, layers=80, tp_degrees=(8, 16)
    )
    assert p4d["comm_s"].iloc[1] > 2 * p4d["comm_s"].iloc[0]  # and dearly where the NICs are few
    with pytest.raises(ValueError, match="multiple"):
        views.tp_placement(s, hidden=8, seq_len=8, micro_batch=1, layers=1, tp_degrees=(12,))


def test_healthy_table_shows_the_pick_the_forced_ring_and_the_recorded_runs():
    rows = views.healthy()
    assert {r["preset"] for r in rows} == set(views.HEALTHY_SYSTEMS) and len(rows) >= 15
    h100 = {r["nodes"]: r for r in rows if r["preset"] == "h100_ndr_8nic"}
    assert h100[2]["nccl_pick"] == "nvls_tree" and h100[2]["ring_busbw_GBps"] < h100[2]["pick_busbw_GBps"]
    assert "misconfigured" in h100[2]["recorded"] and "CoreWeave" in h100[8]["recorded"]


def test_scaling_view_draws_and_reports_the_drop():
    out = views.scaling_view(8, 8, 450.0, 50.0, 8, GiB)
    assert out["pick_2_nodes"] == "nvls_tree" and 1.0 < out["flat_drop"] < 1.4
