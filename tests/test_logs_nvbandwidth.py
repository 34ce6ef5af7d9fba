"""labkit.logs reads nvbandwidth, plain and --json: every matrix a dataset, directions from the
tool's source, bidirectional testcases tagged for what they report. Fixtures: published logs."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from labkit.logs import parse_log

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
B300 = LOGS / "nvbandwidth_xe9780_7xb300_v0.10.log"


def _by_label(parsed, label):
    (ds,) = [d for d in parsed if d.label == f"nvbandwidth {label}"]
    return ds


def _value(ds, src, dst, col="bandwidth_GBps"):
    f = ds.frame
    (v,) = f[(f["src"] == src) & (f["dst"] == dst)][col]
    return v


def _printed_values(ds):
    if ds.kind == "point":
        return [Decimal(v) for v in ds.frame["value"]]
    col = "latency_us" if ds.frame["latency_us"].notna().any() else "bandwidth_GBps"
    scale = Decimal(1000) if col == "latency_us" else Decimal(1)  # back to the printed ns
    return [Decimal(v) * scale for v in ds.frame[col]]


@pytest.mark.parametrize("path", [B300, LOGS / "nvbandwidth_issue50_6xa6000_v0.8.md"], ids=lambda p: p.name[:30])
def test_every_matrix_adds_up_to_its_printed_sum(path):
    """Each SUM line is the tool's own checksum of the matrix above it (2 decimals per value)."""
    parsed = parse_log(path)
    assert parsed
    for ds in parsed:
        values = _printed_values(ds)
        assert abs(sum(values) - Decimal(ds.meta["sum_printed"])) <= Decimal("0.005") * len(values), ds.label


def test_v0_10_log_every_testcase_and_the_failed_one():
    parsed = parse_log(B300)
    assert len(parsed) == 42
    (failed,) = parsed.skipped
    assert failed.line == 426 and "device_to_device_memcpy_read_tma printed no result" in failed.reason
    meta = parsed[0].meta
    assert meta["nvbandwidth_version"] == "v0.10.0" and "Driver Version 610.57.04" in meta["software"]
    assert meta["devices"] == []  # this version's output here lists no devices: none invented
    assert meta["cv_printed"] == "0.00"


def test_read_and_write_directions_follow_the_copy_not_the_arrow():
    parsed = parse_log(B300)
    read, write = (
        _by_label(parsed, "device_to_device_memcpy_read_ce"),
        _by_label(parsed, "device_to_device_memcpy_write_ce"),
    )
    # printed row 0, column 1: read 765.45 is a copy from GPU 1 into GPU 0; write 774.43 from GPU 0 to GPU 1
    assert _value(read, 1, 0) == "765.45" and _value(write, 0, 1) == "774.43"
    assert set(read.frame["mode"]) == {"ce_read"} and set(write.frame["mode"]) == {"ce_write"}
    assert len(read.frame) == 42 and not (read.frame["src"] == read.frame["dst"]).any()  # N/A diagonal: no rows


def test_bidirectional_gpu_tests_one_direction_each_and_the_total():
    parsed = parse_log(B300)
    r1, r2 = (_by_label(parsed, f"device_to_device_bidirectional_memcpy_read_ce {q}") for q in ("Read1", "Read2"))
    total = _by_label(parsed, "device_to_device_bidirectional_memcpy_read_ce Total")
    assert _value(r1, 1, 0) == "760.98" and _value(r2, 0, 1) == "760.91" and _value(total, 0, 1) == "1521.89"
    for one in (r1, r2):
        assert set(one.frame["bandwidth_direction"]) == {"unidirectional"}
        assert set(one.frame["mode"]) == {"ce_read_duplex"} and one.meta["bandwidth_direction"] == "unidirectional"
    assert set(total.frame["matrix"]) == {"bandwidth_bi"} and total.meta["bandwidth_direction"] == "bidirectional"
    sm_total = _by_label(parsed, "device_to_device_bidirectional_memcpy_write_sm Total")
    assert set(sm_total.frame["mode"]) == {"sm_write"}


def test_host_testcases_are_points_tagged_for_what_they_report():
    parsed = parse_log(B300)
    h2d = _by_label(parsed, "host_to_device_memcpy_ce")
    bi = _by_label(parsed, "host_to_device_bidirectional_memcpy_ce")
    assert h2d.kind == "point" and list(h2d.frame["value"][:2]) == ["55.59", "55.60"]
    assert h2d.frame["quantity"][3] == "nvbandwidth host_to_device_memcpy_ce, GPU 3: CPU -> GPU, alone"
    # 'Only the host to device copy bandwidth is reported': one direction, not the sum of both
    assert (
        set(bi.frame["bandwidth_direction"]) == {"unidirectional"}
        and "while GPU -> CPU runs" in bi.frame["quantity"][0]
    )
    assert set(_by_label(parsed, "all_to_one_write_ce").frame["bandwidth_direction"]) == {"aggregate"}
    latency = _by_label(parsed, "host_device_latency_sm")
    assert list(latency.frame["unit"])[0] == "ns" and latency.frame["value"][0] == "1150.17"


def test_latency_matrix_in_microseconds_exactly():
    d2d = _by_label(parse_log(B300), "device_to_device_latency_sm")
    assert d2d.kind == "p2p_matrix" and set(d2d.frame["matrix"]) == {"latency_gpu"}
    assert _value(d2d, 0, 1, "latency_us") == "1.59750"  # printed 1597.50 ns: the point moved, no digit lost


def test_device_list_and_versions_from_the_header():
    from derive_helpers import log_text

    raw = Path(__file__).resolve().parents[1] / "data" / "raw"
    (ds,) = parse_log(log_text(raw / "nvbandwidth_d2d_read__8xH100_AzureND96isr_v5__azurenhc_debugnotes.txt"))
    assert ds.meta["gpu"] == "NVIDIA H100 80GB HBM3" and ds.meta["gpu_count"] == 8
    assert ds.meta["nvbandwidth_version"] == "v0.4" and ds.meta["git_version"] == "v0.4.2-12-g8857188"
    assert ds.meta["sum_printed"] == "20785.58"


def test_a_paste_without_the_running_line_is_named_by_its_sum_line():
    (ds,) = parse_log(LOGS / "nvbandwidth_issue50_6xa6000_v0.8.md")
    assert ds.meta["testcase"] == "device_to_device_memcpy_read_ce" and len(ds.frame) == 30
    assert _value(ds, 0, 3) == "21.82"  # printed row 3, column 0


@pytest.mark.parametrize(
    "fixture", ["nvbandwidth_dcgm_v0.5_verbose.json", "nvbandwidth_dcgm_v0.5_json_between_warnings.txt"]
)
def test_json_output(fixture):
    parsed = parse_log(LOGS / fixture)
    assert parsed.formats == ("nvbandwidth",) and len(parsed) == 15
    h2d = _by_label(parsed, "host_to_device_memcpy_ce")
    assert h2d.frame["value"][0] == "12.3964" and h2d.meta["nvbandwidth_version"] == "v0.5"
    assert "device_to_device_memcpy_read_ce" in h2d.meta["waived"]
    assert _by_label(parsed, "host_device_latency_sm").frame["value"][0] == "649.879"


def test_json_concatenated_bidirectional_matrices_are_split_back():
    """nvbandwidth's JSON appends Read1, Read2 and Total to one bandwidth_matrix (json_output.cpp)."""
    import json

    from labkit.logs import nvbandwidth

    grid = [["N/A", "1"], ["2", "N/A"], ["N/A", "3"], ["4", "N/A"], ["N/A", "4"], ["6", "N/A"]]
    doc = {
        "nvbandwidth": {
            "version": "v0.8",
            "testcases": [
                {
                    "name": "device_to_device_bidirectional_memcpy_read_ce",
                    "status": "Passed",
                    "sum": 20,
                    "bandwidth_description": "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s) ",
                    "bandwidth_matrix": grid,
                }
            ],
        }
    }
    parsed = parse_log(json.dumps(doc, indent=1))
    assert [d.label.split()[-1] for d in parsed] == ["Read1", "Read2", "Total"]
    assert nvbandwidth._split_json("x_read_ce", "memcpy CE GPU(row) -> GPU(column) bandwidth", grid[:2]) == [
        ("memcpy CE GPU(row) -> GPU(column) bandwidth", [["0", "N/A", "1"], ["1", "2", "N/A"]])
    ]


def test_short_row_is_skipped_the_rest_kept():
    parsed = parse_log(LOGS / "malformed_nvbandwidth_short_row.md")
    (ds,) = parsed
    assert len(ds.frame) == 25 and 3 not in set(ds.frame["dst"])  # row 3 = copies into GPU 3 (read test)
    assert _value(ds, 0, 4) == "22.64"  # printed row 4 stays row 4 after the skipped row
    (skip,) = parsed.skipped
    assert skip.line == 17 and "5 values for 6 columns" in skip.reason


def test_a_matrix_whose_running_line_was_cut_out_is_named_by_its_own_sum_line():
    """A paste that keeps 'Running host_to_device_memcpy_ce.' but not the next testcase's 'Running' line: the next
    matrix is device_to_host (its SUM line says so), not a second host_to_device (the direction would be wrong)."""
    lines = B300.read_text().splitlines()
    lines.remove("Running device_to_host_memcpy_ce.")
    h2d, d2h = list(parse_log("\n".join(lines[:23])))
    assert h2d.meta["testcase"] == "host_to_device_memcpy_ce" and d2h.meta["testcase"] == "device_to_host_memcpy_ce"
    assert set(d2h.frame["value"]) == {"57.29", "57.30"}


def test_a_matrix_with_neither_running_nor_sum_line_after_a_finished_testcase_is_not_named_after_it():
    """host_to_device is finished (its SUM line printed); the next matrix lost both its 'Running' and its SUM line: it is
    skipped with the reason, not read as a second host_to_device matrix."""
    lines = B300.read_text().splitlines()
    lines.remove("Running device_to_host_memcpy_ce.")
    (h2d,) = parsed = parse_log("\n".join(lines[:19]))  # cut under the device_to_host matrix, before its SUM
    assert h2d.meta["testcase"] == "host_to_device_memcpy_ce"
    (skip,) = parsed.skipped
    assert skip.text == "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)" and "naming it" in skip.reason
