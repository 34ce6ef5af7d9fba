"""labkit.logs on real tool output that none of its other fixtures or data/raw holds: excerpts from public GitHub
issues and pull requests (tests/fixtures/unseen_logs/README.md names each source). Each test states what the reader
must take from the text — the dataset kinds, a few numbers exactly as printed — and, for what it cannot read, the
line it names and a true reason (most of these excerpts end mid-line, as pasted)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from labkit.logs import LogFormatError, parse_log

UNSEEN = Path(__file__).resolve().parent / "fixtures" / "unseen_logs"


def _cell(ds, col, **where):
    f = ds.frame
    for k, v in where.items():
        f = f[f[k] == v]
    assert len(f) == 1, f"{len(f)} rows for {where}"
    return f.iloc[0][col]


def _reasons(parsed) -> dict[int, str]:
    return {s.line: s.reason for s in parsed.skipped}


def _refused(name: str, fmt: str = "auto") -> LogFormatError:
    with pytest.raises(LogFormatError) as e:
        parse_log(UNSEEN / name, fmt)
    return e.value


# --------------------------------------------------------------------------- nvbandwidth
def test_nvbandwidth_v02_cut_in_a_matrix_row():
    """v0.2 (no bus ids): two host testcases read; the third's only row is cut at '16.', and that is the reason given
    (not 'a testcase this reader does not know')."""
    parsed = parse_log(UNSEEN / "nvbandwidth_issue15_v0.2_8xrtx4090_cut.txt")
    assert [(d.kind, d.meta["testcase"]) for d in parsed] == [
        ("point", "host_to_device_memcpy_ce"),
        ("point", "device_to_host_memcpy_ce"),
    ]
    h2d, d2h = parsed
    assert _cell(h2d, "value", gpu=4) == "26.28" and _cell(d2h, "value", gpu=7) == "26.83"
    for ds in parsed:  # each matrix adds up to the SUM line under it, within the rounding of 8 two-decimal values
        total = sum(Decimal(v) for v in ds.frame["value"])
        assert abs(total - Decimal(ds.meta["sum_printed"])) <= Decimal("0.005") * len(ds.frame)
    assert h2d.meta["nvbandwidth_version"] == "v0.2" and h2d.meta["gpu_count"] == 8
    reasons = _reasons(parsed)
    assert "no complete matrix row" in reasons[36] and "cut" in reasons[36]
    assert reasons[38] == "matrix row with 3 values for 8 columns"


def test_nvbandwidth_two_pasted_runs_keep_their_own_header_and_buffer_size():
    """Two outputs, each under its own command line: one device each (not both runs' devices in the second), and the
    -b buffer size (MiB, nvbandwidth -h) the command line states."""
    first, second = parse_log(UNSEEN / "nvbandwidth_issue42_v0.8_1xa100_two_runs.md")
    for ds, mib in ((first, 512), (second, 1024)):
        assert ds.kind == "point" and list(ds.frame["value"]) == ["25.13"]
        assert len(ds.meta["devices"]) == 1 and ds.meta["gpu_count"] == 1
        assert ds.meta["command"].endswith(f"-b {mib}")
        assert ds.meta["buffer_size_MiB"] == mib and ds.meta["nbytes"] == mib * 2**20


def test_nvbandwidth_quoted_running_lines_and_unindented_columns():
    h2d, d2h = parse_log(UNSEEN / "nvbandwidth_issue24_8xh100_quoted_running.md")
    assert (h2d.meta["testcase"], d2h.meta["testcase"]) == ("host_to_device_memcpy_sm", "device_to_host_memcpy_sm")
    assert _cell(h2d, "value", gpu=7) == "35.06" and _cell(d2h, "value", gpu=4) == "52.76"
    assert h2d.meta["gpu_count"] == 8 and set(d2h.frame["bandwidth_direction"]) == {"unidirectional"}


@pytest.mark.parametrize(
    "name, line, testcase",
    [
        ("nvbandwidth_issue34_v0.7_8xa100_assert.txt", 17, "device_to_device_memcpy_read_ce"),
        ("nvbandwidth_issue19_v0.4_8xl40s_aborted.md", 22, "one_to_all_read_sm"),
    ],
)
def test_nvbandwidth_failed_testcase_is_named(name, line, testcase):
    e = _refused(name)
    assert e.line == line and f"testcase {testcase} printed no result" in e.reason
    assert "Invalid value when checking the pattern" in e.reason


# --------------------------------------------------------------------------- p2pBandwidthLatencyTest
def test_p2p_writes_and_reads_matrices_and_the_cut_bidirectional_block():
    (ds,) = parse_log(UNSEEN / "p2p_nccl814_6gpu_writes_reads_cut.md")
    assert ds.kind == "p2p_matrix" and len(ds.frame) == 3 * 36
    assert _cell(ds, "bandwidth_GBps", p2p="disabled", src=0, dst=1) == "20.10"
    assert _cell(ds, "bandwidth_GBps", mode="write", src=4, dst=1) == "9.64"  # writes: row 4 copies to column 1
    assert _cell(ds, "bandwidth_GBps", mode="read", src=2, dst=3) == "10.45"  # reads: row 3 reads from column 2
    assert "bandwidth_bi" not in set(ds.frame["matrix"])
    assert ds.meta["completeness"]["status"] == "incomplete"
    reasons = _reasons(parse_log(UNSEEN / "p2p_nccl814_6gpu_writes_reads_cut.md"))
    assert reasons[29] == "bidirectional bandwidth row 0: 5 values for 6 GPU columns"


def test_p2p_value_cut_mid_number_is_not_read():
    """The excerpt ends at '375.6': eight values, but the last one lost a digit (the tool prints %6.02f). Reading it
    would record 375.6 GB/s that nobody measured."""
    parsed = parse_log(UNSEEN / "p2p_nccl1264_8xh100_tabs_cut.txt")
    (ds,) = parsed
    assert set(ds.frame["p2p"]) == {"disabled"} and len(ds.frame) == 64
    assert _cell(ds, "bandwidth_GBps", src=5, dst=6) == "38.05"
    assert _cell(ds, "bandwidth_GBps", src=1, dst=1) == "2512.44"
    assert ds.meta["connectivity"] == [[1] * 8] * 8  # tab-separated rows
    assert "'375.6' does not have the two decimals" in _reasons(parsed)[23]
    assert ds.meta["completeness"]["status"] == "incomplete"


def test_p2p_cut_matrix_title_is_named():
    e = _refused("p2p_ginkgo164_4xv100_cut_at_title.md")
    assert e.line == 29 and "matrix title cut off" in e.reason


def test_p2p_last_value_cut_to_an_integer_is_not_read():
    """A 2-GPU run whose paste ends at '924' (of 924.xx): that row is not read (the whole row is skipped), the other
    matrices and row 0 are."""
    parsed = parse_log(UNSEEN / "p2p_tinygrad44_2xrtx4090_cut.md")
    (ds,) = parsed
    assert len(ds.frame) == 3 * 4 + 2 and ds.meta["gpu_count"] == 2
    assert _cell(ds, "bandwidth_GBps", matrix="bandwidth_bi", p2p="enabled", src=0, dst=1) == "12.88"
    assert _cell(ds, "bandwidth_GBps", matrix="bandwidth_uni", p2p="enabled", src=1, dst=1) == "945.63"
    bi_on = ds.frame[(ds.frame["matrix"] == "bandwidth_bi") & (ds.frame["p2p"] == "enabled")]
    assert set(bi_on["src"]) == {0}
    assert "'924' does not have the two decimals" in _reasons(parsed)[32]
    assert ds.meta["completeness"]["status"] == "incomplete"


def test_p2p_matrices_with_editor_line_numbers_are_named_not_misread():
    """Every line of this paste starts with vim's line number ('  3      0   2.61 ...'): read as printed, row '3' would
    be GPU 3 and the GPU index a value. The reader reads none of it and says why, naming the first title."""
    e = _refused("p2p_cudasamples230_4gpu_latency_vim_line_numbers.md")
    assert e.line == 2 and "matrix title after '1' (a line number from an editor?)" in e.reason


# --------------------------------------------------------------------------- bandwidthTest
def test_bandwidthtest_cuda_10_1_range_mode_with_tabs():
    (ds,) = parse_log(UNSEEN / "bandwidthtest_helixer22_rtx2080ti_cuda10.1_range.txt")
    assert ds.kind == "copy_sweep"
    assert ds.frame.to_dict("records") == [
        {"direction": "h2d", "memory": "pinned", "nbytes": 100000000, "bandwidth_GBps": "13.1"}
    ]
    assert ds.meta["mode"] == "range" and ds.meta["gpu"] == "GeForce RTX 2080 Ti"
    assert "--htod" in ds.meta["options"] and ds.meta["result"] is None  # the excerpt ends before 'Result ='


# --------------------------------------------------------------------------- nccl-tests
def test_nccl_old_error_column_and_a_row_cut_short():
    parsed = parse_log(UNSEEN / "nccl_issue176_error_column_1e-06_cut.md")
    (ds,) = parsed
    assert ds.kind is None and len(ds.frame) == 12  # all_reduce is only in the prose: the importer gives --op
    assert _cell(ds, "time_us", nbytes=131072, placement="out-of-place") == "120.9"
    assert set(ds.frame["wrong"]) == {"1e-06"} and ds.frame["root"].isna().all()
    assert ds.meta["completeness"]["status"] == "incomplete"
    assert _reasons(parsed)[13].startswith("row cut short after 2 value(s)")


def test_nccl_mpi_tagged_rows():
    parsed = parse_log(UNSEEN / "nccl_awsk8stester503_mpi_tagged_cut.md")
    (ds,) = parsed  # the quoted '# Avg bus bandwidth : 92.3405' above is another run's, not this table's
    assert list(ds.frame["nbytes"].unique()) == [8, 16, 32] and ds.meta["avg_busbw_printed"] is None
    assert _cell(ds, "time_us", nbytes=32, placement="in-place") == "13.34" and set(ds.frame["root"]) == {-1}
    assert _reasons(parsed)[15].startswith("row cut short")


def test_nccl_paste_that_starts_at_the_units_line():
    """NCCL 2.6-era output pasted from the '(B) (elements)' line down: recognised without --format."""
    parsed = parse_log(UNSEEN / "nccl_issue340_nccl2.6.4_error_0e+00_cut.txt")
    (ds,) = parsed
    assert parsed.formats == ("nccl-tests",) and len(ds.frame) == 22
    assert _cell(ds, "algbw_GBps", nbytes=8192, placement="in-place") == "0.24"
    assert set(ds.frame["wrong"]) == {"0e+00"} and set(ds.frame["redop"]) == {"sum"}
    assert "'0e' in column wrong is not a number" in _reasons(parsed)[13]


def test_nccl_two_node_run_under_a_quoted_command():
    """A complete 16-rank, 2-host run: the binary from the '> '-quoted mpirun block names the collective, the rank
    lines give world size and nodes, and the sweep reaches the stated maxBytes."""
    (ds,) = parse_log(UNSEEN / "nccl_a3mega_2node_16xh100_quoted_command.md")
    assert ds.kind == "allreduce_sweep" and len(ds.frame) == 2 * 31
    assert set(ds.frame["world_size"]) == {16} and set(ds.frame["nodes"]) == {2}
    assert _cell(ds, "busbw_GBps", nbytes=8589934592, placement="out-of-place") == "338.82"
    assert _cell(ds, "time_us", nbytes=2147483648, placement="in-place") == "12641"
    assert ds.meta["completeness"]["status"] == "complete" and ds.meta["avg_busbw_printed"] == "70.742"
    assert ds.meta["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"]


def test_nccl_headerless_rows_and_a_last_row_cut_in_its_second_group():
    """Rows pasted without any header (named with --format). The last row stops inside its in-place group: before the
    fix its root '-1' was read as the time and every value moved one column (algbw '768.4'). Now the run's earlier
    rows fix the layout (a root column), and a row that does not fit it is not read."""
    name = "nccl_issue119_headerless_rows_cut.md"
    assert _refused(name).line == 2  # no header or preamble: auto-detection finds no tool's output
    parsed = parse_log(UNSEEN / name, "nccl-tests")
    (ds,) = parsed
    assert len(ds.frame) == 2 * 11 and 34603016 not in set(ds.frame["nbytes"])
    assert set(ds.frame["root"]) == {-1} and not any(v.startswith("-") for v in ds.frame["time_us"])
    assert _cell(ds, "busbw_GBps", nbytes=32505864, placement="out-of-place") == "81.60"
    assert _reasons(parsed)[13].endswith("row not read")


def test_nccl_complete_large_message_run():
    (ds,) = parse_log(UNSEEN / "nccl_issue252_ring_5rows_avg.md")
    assert len(ds.frame) == 10 and ds.meta["avg_busbw_printed"] == "95.3009"
    assert _cell(ds, "time_us", nbytes=536870912, placement="in-place") == "9676.9"
    assert ds.meta["completeness"]["status"] == "complete"
    assert ds.filled(op="all_reduce").kind == "allreduce_sweep"


@pytest.mark.parametrize(
    "name, fmt, line, reason",
    [
        # the row is cut at '0.' (3 of the out-of-place group's 4 values) and nothing else follows
        ("nccl_issue1439_8xrtx3090_cut_in_first_row.md", "auto", 18, "out-of-place columns cut short (3 of 4 values)"),
        # two ranks each printed the preamble and header (a build without MPI); the excerpt ends before any row
        ("nccl_issue107_error_column_header_twice_no_rows.md", "auto", 3, "without a complete result table"),
        # -S timestamps: the excerpt ends at the header
        ("nccl_pr349_timestamps_header_only.md", "auto", 3, "without a complete result table"),
        # every result line is split by NCCL INFO lines written between its columns
        ("nccl_issue1453_rank_prefix_interleaved_info.txt", "auto", 1, "no nccl-tests, nvbandwidth"),
        ("nccl_issue1453_rank_prefix_interleaved_info.txt", "nccl-tests", 1, "without a complete result table"),
    ],
)
def test_nccl_excerpts_with_no_complete_row_are_refused_naming_the_line(name, fmt, line, reason):
    e = _refused(name, fmt)
    assert e.line == line and reason in e.reason
