"""labkit.logs reads cuda-samples bandwidthTest and p2pBandwidthLatencyTest output. Fixtures are
published logs (tests/fixtures/logs/README.md) and the project's raw logs (data/raw)."""

from __future__ import annotations

from pathlib import Path

import pytest
from derive_helpers import log_text

from labkit.logs import LogFormatError, parse_log

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
RAW = Path(__file__).resolve().parents[1] / "data" / "raw"


def _cell(ds, **where):
    f = ds.frame
    for k, v in where.items():
        f = f[f[k] == v] if v is not None else f[f[k].isna()]
    assert len(f) == 1, f"{len(f)} rows for {where}"
    return f.iloc[0]


# --------------------------------------------------------------------------- bandwidthTest
def test_range_mode_on_all_devices():
    parsed = parse_log(LOGS / "bandwidthtest_jdh4_a100pcie_range.md")
    assert len(parsed) == 2 and not parsed.skipped
    first = parsed[0]
    assert first.meta["mode"] == "range" and first.meta["cumulative"] and first.meta["result"] == "PASS"
    assert first.meta["gpu"] == "NVIDIA A100-PCIE-40GB" and "--mode=range" in first.meta["options"]
    assert "sum over all devices" in first.meta["caveats"]
    assert len(first.frame) == 30 and set(first.frame["direction"]) == {"h2d", "d2h", "d2d"}
    assert _cell(first, direction="h2d", nbytes=1000000)["bandwidth_GBps"] == "17.7"
    assert _cell(first, direction="d2h", nbytes=3000000)["bandwidth_GBps"] == "23.8"
    assert set(first.frame[first.frame["direction"] == "d2d"]["memory"]) == {"device"}
    assert _cell(parsed[1], direction="d2d", nbytes=1000000000)["bandwidth_GBps"] == "1226.1"


def test_csv_shmoo_keeps_the_printed_time():
    parsed = parse_log(log_text(RAW / "bandwidthTest_shmoo_pinned__V100PCIe32GB__superbench_fixture.txt"))
    h2d = parsed[0]
    assert h2d.meta["mode"] == "shmoo" and len(h2d.frame) == 81
    row = _cell(h2d, nbytes=28000)
    assert (row["bandwidth_GBps"], row["time_s"]) == ("5.4", "0.00001")


def test_pinned_and_pageable_runs_and_an_editor_s_tab_rendering():
    """gengwg's DGX output shows tabs as '>---' (vim listchars); the numbers are unaffected."""
    parsed = parse_log(log_text(RAW / "bandwidthTest_pinned_vs_pageable__DGXA100_and_A100PCIe__gengwg.txt"))
    assert [d.frame["memory"][0] for d in parsed] == ["pinned", "pageable", "pinned", "pageable"]
    assert _cell(parsed[1], direction="h2d")["bandwidth_GBps"] == "10.0"
    assert parsed[0].meta["command"].startswith("# ./bandwidthTest --memory=pinned")


@pytest.mark.parametrize(
    "fixture,line", [("bandwidthtest_pkb_k80_quick_mbps.txt", 11), ("bandwidthtest_pkb_k80_range_mbps.txt", 13)]
)
def test_megabytes_per_second_are_not_converted(fixture, line):
    """Old bandwidthTest printed MB/s whose MB was 2^20 or 1,024,000 B by release: no exact conversion."""
    with pytest.raises(LogFormatError) as e:
        parse_log(LOGS / fixture)
    assert e.value.line == line and "MB/s" in str(e.value) and "not converted" in str(e.value)


def test_mixed_units_import_the_gb_per_s_runs_and_report_the_rest():
    parsed = parse_log(LOGS / "malformed_bandwidthtest_mixed_units.txt")
    assert len(parsed) == 2 and len(parsed.skipped) == 9
    assert all("MB/s" in s.reason for s in parsed.skipped)
    assert {s.text.split()[0] for s in parsed.skipped} == {"67108864", "134217728", "201326592"}


# --------------------------------------------------------------------------- p2pBandwidthLatencyTest
def test_reads_variant_direction_and_options():
    """wohlbier/gpu-micro: a p2p_read run on 8x TITAN RTX (no P2P) and a DGX-2 run of 16 V100."""
    parsed = parse_log(LOGS / "p2p_wohlbier_titanrtx_v100_reads.md")
    lambda_, dgx2 = parsed
    assert lambda_.meta["gpu_count"] == 8 and dgx2.meta["gpu_count"] == 16
    assert lambda_.meta["gpu"] == "TITAN RTX" and "--p2p_read" in lambda_.meta["options"]
    assert len(lambda_.meta["peer_access"]) == 56 and not any(ok for *_, ok in lambda_.meta["peer_access"])
    conn = lambda_.meta["connectivity"]  # printed 1 only on the diagonal: no GPU reaches a peer
    assert [conn[i][j] for i in range(8) for j in range(8)] == [int(i == j) for i in range(8) for j in range(8)]
    # printed '(P2P Reads)' row 0: '0 550.50 9.96 11.37 ...': GPU 0 reads from GPU 1, so the data flows 1 -> 0
    reads = _cell(lambda_, matrix="bandwidth_uni", p2p="enabled", mode="read", src=1, dst=0)
    writes = _cell(lambda_, matrix="bandwidth_uni", p2p="enabled", mode="write", src=0, dst=1)
    assert (reads["bandwidth_GBps"], writes["bandwidth_GBps"]) == ("9.96", "9.91")
    assert _cell(lambda_, matrix="bandwidth_uni", p2p="enabled", mode="read", src=2, dst=0)["bandwidth_GBps"] == "11.37"
    assert _cell(lambda_, matrix="latency_cpu", p2p="enabled", mode="read", src=1, dst=0)["latency_us"] == "13.03"
    assert "nbytes" not in lambda_.meta  # this modified copy takes --nElements, not --numElems: not read


def test_every_matrix_of_a_full_run_with_topology():
    (ds,) = parse_log(log_text(RAW / "p2pBandwidthLatencyTest__8xA100SXM4_80GB_NVSwitch__DistServe_issue3.txt"))
    assert len(ds.frame) == 8 * 64
    assert _cell(ds, matrix="latency_cpu", p2p="disabled", src=0, dst=1)["latency_us"] == "7.27"
    assert _cell(ds, matrix="bandwidth_bi", p2p="enabled", src=4, dst=5)["bandwidth_GBps"] == "517.80"
    assert ds.meta["topology"].startswith("nvidia-smi topo -m\n        GPU0")
    assert ds.meta["topology"].endswith("NIC3: mlx5_3")


def test_several_machines_quoted_on_one_page_are_separate_runs():
    parsed = parse_log(log_text(RAW / "p2pBandwidthLatencyTest_uniP2Pwrites__8xA100_8xH100_4xGB200__mlengineering.txt"))
    assert [d.meta["gpu_count"] for d in parsed] == [8, 8, 4]
    assert _cell(parsed[2], src=0, dst=0)["bandwidth_GBps"] == "5714.94"


def test_an_elided_matrix_keeps_its_complete_rows():
    parsed = parse_log(
        log_text(RAW / "p2pBandwidthLatencyTest_PCIeGen5_P2Penabled__RTXPRO6000_5090_multi__rtx6kpro.txt")
    )
    partial = parsed[1]
    assert sorted(set(partial.frame["src"])) == [0, 1] and len(partial.frame) == 16
    (skip,) = parsed.skipped
    assert "2 of 8 rows" in skip.reason and skip.text.strip() == "..."


def test_truncated_matrix_at_the_end_of_a_file():
    parsed = parse_log(LOGS / "malformed_p2p_truncated_matrix.txt")
    (ds,) = parsed
    bi_on = ds.frame[(ds.frame["matrix"] == "bandwidth_bi") & (ds.frame["p2p"] == "enabled")]
    assert list(bi_on["src"]) == [0, 0]
    (skip,) = parsed.skipped
    assert "1 of 2 rows" in skip.reason


def test_a_paste_cut_inside_a_matrix_title_is_marked_incomplete():
    """Cut in the middle of the next matrix's title: the matrices above are read, and the run says that what followed
    is missing (import-log warns 'incomplete'), as it does for a paste cut inside a matrix row."""
    lines = (LOGS / "p2p_wohlbier_titanrtx_v100_reads.md").read_text().splitlines()
    title = lines.index("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)")
    parsed = parse_log("\n".join([*lines[:title], "Bidirectional P2P=Disabled Band"]))
    (ds,) = parsed
    assert set(ds.frame["matrix"]) == {"bandwidth_uni"}
    (skip,) = parsed.skipped
    assert "matrix title cut off" in skip.reason
    assert ds.meta["completeness"]["status"] == "incomplete"
    assert ds.meta["completeness"]["missing"] == [f"{skip.reason} (line {skip.line})"]
