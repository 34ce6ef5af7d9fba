"""labkit.logs reads nccl-tests output: every layout, every wrapper, several runs per file, and
nothing it does not print. Fixtures are published logs (tests/fixtures/logs/README.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from derive_helpers import as_text

from labkit.logs import LogFormatError, parse_log

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
RAW = Path(__file__).resolve().parents[1] / "data" / "raw"
DATA = Path(__file__).resolve().parents[1] / "data"


def _row(ds, nbytes, placement):
    f = as_text(ds.frame)
    hit = f[(f["nbytes"] == str(nbytes)) & (f["placement"] == placement)]
    assert len(hit) == 1, f"{len(hit)} rows for {nbytes} B {placement}"
    return hit.iloc[0]


def _printed(path: Path, first_token: str) -> list[str]:
    """The tokens of the (unwrapped) result line starting with `first_token`."""
    for raw in path.read_text().splitlines():
        toks = raw.replace("[1,0]<stdout>:", "").split()
        toks = toks[1:] if toks and toks[0] == "0:" else toks
        if toks and toks[0] == first_token:
            return toks
    raise AssertionError(f"no line starting with {first_token}")


# --------------------------------------------------------------------------- layouts
@pytest.mark.parametrize(
    "name,redop,root",
    [("allgather", None, None), ("alltoall", None, None), ("broadcast", None, "0"), ("reduce", "sum", "0")],
)
def test_old_layouts_with_and_without_redop_and_root(name, redop, root):
    """superbench fixtures: 2021 nccl-tests, 'error' column, an alltoall that printed its redop empty."""
    path = LOGS / f"nccl_superbench_{name}.log"
    (ds,) = parse_log(path)
    assert len(ds.frame) == 2 * 34  # 34 result lines x out-of-place / in-place
    toks = _printed(path, "8589934592")
    oop, inp = _row(ds, 8589934592, "out-of-place"), _row(ds, 8589934592, "in-place")
    assert (oop["time_us"], oop["algbw_GBps"], oop["busbw_GBps"], oop["wrong"]) == tuple(toks[-8:-4])
    assert (inp["time_us"], inp["algbw_GBps"], inp["busbw_GBps"], inp["wrong"]) == tuple(toks[-4:])
    assert oop["count"] == toks[1] and oop["dtype"] == "float"
    assert (oop["redop"] or None, oop["root"] or None) == (redop, root)
    # 8 '#   Rank' lines on one host: world size and node count are printed, so they are read
    assert ds.meta["gpu_count"] == 8 and ds.meta["nodes"] == 1 and ds.meta["hosts"] == ["localhost"]
    assert ds.meta["gpu"] == "A100-SXM4-40GB"
    # the log never names its binary: the collective stays unknown, never guessed
    assert ds.kind is None and ds.missing[:2] == ("kind", "op")
    assert ds.filled(op="all_gather").kind == "collective_sweep"


def test_repeated_zero_size_rows_stay_one_run():
    (ds,) = parse_log(LOGS / "nccl_superbench_alltoall.log")
    assert list(ds.frame["nbytes"][:10:2]) == [0, 0, 0, 0, 0]
    assert _row(ds, 32, "out-of-place")["time_us"] == "89.00"  # exact digits, trailing zero kept


def test_modern_mpirun_log_with_fences_and_fifteen_runs():
    """nccl-tests 2.18.0 under mpirun --tag-output, pasted into markdown code fences."""
    path = LOGS / "nccl_ncclebpf_socket_thread_validation.md"
    parsed = parse_log(path)
    assert len(parsed) == 15 and not parsed.skipped
    ops = [d.meta["op"] for d in parsed]
    assert ops.count("all_reduce") == 9 and ops.count("all_gather") == 6
    first = parsed[0]
    assert first.kind == "allreduce_sweep" and first.meta["program"] == "all_reduce_perf_mpi"
    assert first.meta["nccl_tests_version"] == "2.18.0" and first.meta["nccl_library"] == "22907"
    assert first.meta["parameters"]["iters"] == "50" and first.meta["parameters"]["warmup iters"] == "10"
    assert [r["pid"] for r in first.meta["devices"]] == [2994447, 2994448]
    assert first.meta["avg_busbw_printed"] == "1.57614"
    row = _row(first, 16777216, "out-of-place")
    assert (row["time_us"], row["algbw_GBps"], row["busbw_GBps"], row["wrong"]) == ("7728.29", "2.17", "2.17", "0")
    # the env of the command block before the run; per-rank NCCL_HOSTID values are not one config
    assert "NCCL_NET=Socket" in first.frame["config"][0] and "NCCL_HOSTID" not in first.frame["config"][0]
    assert first.meta["env_differs_between_ranks"] == ["NCCL_HOSTID"]
    assert parsed[1].frame["config"].isna().all()  # nothing printed before the second run


@pytest.mark.parametrize(
    "fixture,ops",
    [
        ("nccl_ncclebpf_allgather_reducescatter_sweep.md", ["all_gather"] * 4 + ["reduce_scatter"] * 3),
        ("nccl_ncclebpf_broadcast_proto_sweep.md", ["broadcast"] * 5),
    ],
)
def test_each_collective_is_named_by_its_binary(fixture, ops):
    parsed = parse_log(LOGS / fixture)
    assert [d.meta["op"] for d in parsed] == ops
    assert {d.kind for d in parsed} == {"collective_sweep"}
    if ops[0] == "broadcast":
        assert set(parsed[0].frame["root"]) == {0} and parsed[0].frame["redop"].eq("none").all()


def test_slurm_labels_multinode_rank_lines_and_exports():
    """nccl-tests#290 as posted: srun '0: ' prefixes, 16 ranks on two hosts, exports before a run."""
    parsed = parse_log(LOGS / "nccl_issue290_srun_labels.md")
    assert [(d.meta["gpu_count"], d.meta["nodes"]) for d in parsed] == [(8, 1), (16, 2), (16, 2)]
    assert parsed[1].meta["hosts"] == ["node005", "node007"]
    assert parsed[2].meta["env"]["NCCL_ALGO"] == "RING"
    # the same numbers as the committed dataset transcribed from this thread
    committed = pd.read_csv(
        DATA / "nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290.csv", dtype=str, keep_default_na=False
    )
    got = pd.concat([as_text(d.frame) for d in parsed], ignore_index=True)
    cols = ["nbytes", "placement", "count", "dtype", "time_us", "algbw_GBps", "busbw_GBps"]
    assert got[cols].equals(committed[cols])
    assert list(got["wrong"][24:26]) == ["N/A", "N/A"]


def test_two_node_rank_lines_give_world_size_and_nodes():
    (ds,) = parse_log(LOGS / "nccl_pkb_2node_k80.txt")
    assert (ds.meta["gpu_count"], ds.meta["nodes"]) == (2, 2)
    assert set(ds.frame["world_size"]) == {2} and set(ds.frame["nodes"]) == {2}
    assert _row(ds, 1073741824, "in-place")["time_us"] == "1763386"


def test_markdown_quoted_paste_reads_like_the_log():
    plain, quoted = (
        parse_log(LOGS / "nccl_superbench_allgather.log"),
        parse_log(LOGS / "paste_nccl_markdown_quoted.txt"),
    )
    assert as_text(plain[0].frame).equals(as_text(quoted[0].frame))


def test_hand_trimmed_table_with_digit_separators():
    """ml-engineering kept 'size time algbw busbw' and wrote sizes as 1_073_741_824."""
    from derive_helpers import log_text

    (ds,) = parse_log(log_text(RAW / "nccl_all_reduce_perf__8xA100_SXM_NVSwitch__mlengineering.txt"))
    assert ds.frame["nbytes"].tolist()[5] == 1048576  # printed '1048_576'
    assert set(ds.frame["placement"]) == {"unspecified"}  # no 'out-of-place' title: not guessed
    assert ds.frame["count"].isna().all()


def test_headerless_rows_after_an_nccl_version_line():
    from derive_helpers import log_text

    (ds,) = parse_log(log_text(RAW / "nccl_all_reduce_perf__2node_16xA100_p4d_EFA400__awsefaeks.txt"))
    assert ds.meta["nccl_version"] == "2.9.9+cuda11.2" and ds.meta["nodes"] == 2
    assert _row(ds, 8, "out-of-place")["wrong"] == "2e-07"  # the old 'error' column, as printed


# --------------------------------------------------------------------------- partial and broken input
def test_truncated_table_imports_the_complete_rows():
    parsed = parse_log(LOGS / "malformed_nccl_truncated_table.txt")
    (ds,) = parsed
    assert ds.frame["nbytes"].max() == 1048576 and len(ds.frame) == 2 * 18
    (skip,) = parsed.skipped
    assert skip.line == 29 and "cut short" in skip.reason and skip.text.strip().startswith("2097152")


def test_wrong_column_count_row_is_skipped_not_shifted():
    parsed = parse_log(LOGS / "malformed_nccl_wrong_column_count.log")
    (ds,) = parsed
    assert 1048576 not in set(ds.frame["nbytes"]) and len(ds.frame) == 2 * 33
    (skip,) = parsed.skipped
    assert skip.line == 37 and "busbw" in skip.reason


def test_excerpt_rows_cut_by_the_transcriber_are_reported():
    from derive_helpers import log_text

    parsed = parse_log(log_text(RAW / "datapoints_from_github_issues__various.txt"), format="nccl-tests")
    assert any("'(rest'" in s.reason for s in parsed.skipped)
    assert any("'|'" in s.reason for s in parsed.skipped)  # issue 44's '|'-regrouped rows are not tool output


def test_a_table_in_another_unit_is_not_read():
    text = (LOGS / "nccl_pkb_2node_k80.txt").read_text().replace("(us)  (GB/s)", "(ms)  (GB/s)", 1)
    with pytest.raises(LogFormatError, match=r"line 10: .*unit \(ms\)"):
        parse_log(text)
