"""Bring your own measurements: `labkit ref import-log`, the per-user data folder, and `reference=` given a log.

Inputs are real published logs (tests/fixtures/logs/README.md and data/raw/ name each source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit import reference, schema
from labkit.logs import parse_log
from labkit.tools import cli

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "logs"
RAW = ROOT / "data" / "raw"
SUPERBENCH_ALLGATHER = FIX / "nccl_superbench_allgather.log"  # nccl-tests output that never names its collective
RTX2080_ALLREDUCE = RAW / "nccl_all_reduce_perf__2x_RTX2080Ti_PCIe3_noP2P__anthonyhoo.txt"


@pytest.fixture(autouse=True)
def user_data(tmp_path, monkeypatch):
    folder = tmp_path / "user-data"
    monkeypatch.setenv("LABKIT_DATA", str(folder))
    return folder


def test_the_user_data_folder_is_labkit_data_or_the_platforms(user_data, monkeypatch):
    assert reference.user_data_dir() == user_data
    monkeypatch.delenv("LABKIT_DATA")
    default = reference.user_data_dir()
    assert default.name == "labkit" and reference.data_dir() not in default.parents


def test_import_log_writes_a_dataset_the_catalogue_and_notebooks_find(user_data, capsys):
    assert (
        cli.main(
            [
                "ref",
                "import-log",
                str(SUPERBENCH_ALLGATHER),
                "--name",
                "sb_ag",
                "--op",
                "all_gather",
                "--system",
                "8x A100",
            ]
        )
        == 0
    )
    assert "imported sb_ag: collective_sweep, 68 rows" in capsys.readouterr().out
    assert (user_data / "sb_ag.csv").exists() and (user_data / "sb_ag.meta.json").exists()
    ds = reference.load("sb_ag")  # found by name: the user folder is searched after the shipped data
    assert "sb_ag" in reference.list_datasets(kind="collective_sweep")
    assert ds.meta["system"] == "8x A100" and ds.meta["provenance"] == "recorded"
    assert ds.meta["date"] == schema.NOT_STATED  # the log has no date: said, not guessed
    assert set(ds.frame["op"]) == {"all_gather"}
    # numbers exactly as printed: the CSV holds the log's text for every busbw
    printed = [str(v) for v in parse_log(SUPERBENCH_ALLGATHER)[0].frame["busbw_GBps"]]
    csv_rows = (user_data / "sb_ag.csv").read_text().splitlines()
    header = csv_rows[0].split(",")
    col = header.index("busbw_GBps")
    assert [r.split(",")[col] for r in csv_rows[1:]] == printed


def test_a_log_with_several_tables_gives_numbered_datasets(user_data, capsys):
    log = RAW / "p2pBandwidthLatencyTest_uniP2Pwrites__8xA100_8xH100_4xGB200_mlengineering.txt"
    if not log.exists():
        log = next(RAW.glob("p2pBandwidthLatencyTest_uniP2Pwrites*"))
    assert cli.main(["ref", "import-log", str(log), "--name", "uni", "--format", "p2pbandwidthlatencytest"]) == 0
    out = capsys.readouterr().out
    assert "imported uni_1: p2p_matrix" in out and "imported uni_2: p2p_matrix" in out
    assert json.loads((user_data / "uni_1.meta.json").read_text())["source_file"] == str(log)


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            [str(SUPERBENCH_ALLGATHER), "--name", "x"],
            "does not name its collective (lines 14-50 (busbw/algbw = 0.875 < 1 fits all_gather, reduce_scatter or "
            "alltoall, 8 ranks)); give it: --op all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall",
        ),
        ([str(FIX / "malformed_empty.txt"), "--name", "x"], "line 1: empty input"),
        ([str(FIX / "malformed_binary_gzip_of_nccl_log.gz"), "--name", "x"], "line 1: binary data"),
        ([str(RTX2080_ALLREDUCE), "--name", "Bad Name"], "--name 'Bad Name'"),
        ([str(RTX2080_ALLREDUCE), "--name", "nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290"], "shipped dataset"),
        ([str(RTX2080_ALLREDUCE), "--name", "x", "--fill", "nodes"], "COLUMN=VALUE"),
    ],
)
def test_bad_input_is_refused_naming_the_line_or_the_argument(args, needle, user_data):
    import sys
    from subprocess import run

    r = run([sys.executable, "-m", "labkit", "ref", "import-log", *args], capture_output=True, text=True)
    assert r.returncode != 0 and needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not user_data.exists() or not list(user_data.iterdir())  # nothing half-written


def test_a_partial_log_imports_what_is_complete_and_says_what_was_skipped(user_data, capsys):
    log = FIX / "malformed_nccl_truncated_table.txt"
    assert cli.main(["ref", "import-log", str(log), "--name", "trunc", "--op", "all_reduce"]) == 0
    captured = capsys.readouterr()
    assert "imported trunc: allreduce_sweep, 36 rows" in captured.out
    assert "skipped line 29: out-of-place columns cut short" in captured.err


def test_existing_datasets_are_not_overwritten_without_force(user_data):
    reference.import_log(RTX2080_ALLREDUCE, "mine")
    with pytest.raises(FileExistsError, match="--force"):
        reference.import_log(RTX2080_ALLREDUCE, "mine")
    assert reference.import_log(RTX2080_ALLREDUCE, "mine", force=True)[0] == ["mine"]


def test_reference_given_a_log_file_or_a_folder_of_logs(tmp_path):
    datasets, note = reference.select(str(RTX2080_ALLREDUCE), "allreduce_sweep")
    assert note is None
    assert datasets[0].meta["source_file"] == str(RTX2080_ALLREDUCE) and datasets[0].kind == "allreduce_sweep"
    assert len(datasets) > 1  # the shipped ones follow, as after a profile folder
    folder = tmp_path / "cluster-logs"
    folder.mkdir()
    (folder / "all_gather_perf.log").write_text(SUPERBENCH_ALLGATHER.read_text())  # the file name names the collective
    (folder / "all_reduce.log").write_text(RTX2080_ALLREDUCE.read_text())
    sweeps, _ = reference.select(str(folder), "collective_sweep")
    assert sweeps[0].name == "all_gather_perf" and set(sweeps[0].frame["op"]) == {"all_gather"}
    reduce_, _ = reference.select(str(folder), "allreduce_sweep")
    assert reduce_[0].name == "all_reduce"


def test_import_profile_goes_to_the_user_folder_by_default(user_data):
    names = reference.import_profile(reference.profile_path("h100_pcie5_vm_20261123"), "myclass")
    assert names and all((user_data / f"{n}.meta.json").exists() for n in names)
    assert not any((reference.data_dir() / f"{n}.meta.json").exists() for n in names)
