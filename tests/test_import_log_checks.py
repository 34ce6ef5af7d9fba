"""The importer notices what is wrong with a log (issue 23.3) and derives what its numbers fix (issue 24.4).

Every input is a published nccl-tests log (data/raw/, tests/fixtures/logs/); a run cut short, a table without its
preamble and repeated rows are made here by cutting and repeating those logs' own lines — no number is invented."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from labkit import collectives, reference, schema
from labkit.allreduce import views
from labkit.logs import checks, parse_log
from labkit.tools import cli

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "data" / "raw"
FIX = ROOT / "tests" / "fixtures" / "logs"
#: 2 ranks, 8 B .. 1 GiB (maxBytes 1073741824), closing lines at 50-51; rows on lines 22-49.
RTX2080 = RAW / "nccl_all_reduce_perf__2x_RTX2080Ti_PCIe3_noP2P__anthonyhoo.txt"
#: Three all-reduce tables without Rank lines or a binary name: 8 ranks (1 node), 16 and 16 (2 nodes).
ISSUE290 = RAW / "nccl_all_reduce_perf__H100_1node_NVLS_and_2node_IB_NDR_default_vs_RING__nccltests_issue290.txt"
SUPERBENCH_ALLGATHER = FIX / "nccl_superbench_allgather.log"  # 8 Rank lines, collective never named


@pytest.fixture(autouse=True)
def user_data(tmp_path, monkeypatch):
    folder = tmp_path / "user-data"
    monkeypatch.setenv("LABKIT_DATA", str(folder))
    return folder


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _meta(folder: Path, name: str) -> dict:
    return json.loads((folder / f"{name}.meta.json").read_text())


# --------------------------------------------------------------------------- a run cut short
def test_a_run_killed_mid_sweep_imports_marked_incomplete_saying_what_is_missing(tmp_path, user_data, capsys):
    lines = _lines(RTX2080)
    assert lines[42].split()[0] == "16777216" and lines[49].startswith("# Out of bounds")
    cut = _write(tmp_path, "killed.log", lines[:43])  # the 16 MiB row is the last; no closing lines
    assert cli.main(["ref", "import-log", str(cut), "--name", "killed"]) == 0
    out = capsys.readouterr().out
    assert "imported killed: allreduce_sweep, 44 rows" in out
    assert "warning: incomplete: missing the sizes above 16 MiB: the log states maxBytes 1 GiB" in out
    meta = _meta(user_data, "killed")
    assert meta["completeness"]["status"] == "incomplete" and meta["completeness"]["last_size_bytes"] == 16 << 20
    assert any("Avg bus bandwidth" in m for m in meta["completeness"]["missing"])
    assert meta["warnings"][0].startswith("incomplete:")

    assert cli.main(["ref", "import-log", str(RTX2080), "--name", "whole"]) == 0
    assert "warning" not in capsys.readouterr().out
    assert _meta(user_data, "whole")["completeness"] == {
        "last_size_bytes": 1 << 30,
        "stated_max_bytes": 1 << 30,
        "expected_last_size_bytes": 1 << 30,
        "missing": [],
        "status": "complete",
    }


def test_only_the_closing_lines_missing_is_incomplete_too_and_a_lowered_maxbytes_counts():
    lines = _lines(RTX2080)
    (whole,) = parse_log("\n".join(lines[:49]))  # every size, no '# Out of bounds' / '# Avg bus bandwidth'
    assert whole.meta["completeness"]["status"] == "incomplete"
    assert whole.meta["completeness"]["missing"] == [
        "the closing '# Out of bounds values' line",
        "the closing '# Avg bus bandwidth' line",
    ]
    # nccl-tests' own line when memory is short (src/common.cu): the sweep then ends at the lowered maxBytes
    reduced = lines[:13] + ["# Reducing maxBytes to 16777216 due to memory limitation"] + lines[13:43] + lines[49:]
    (ds,) = parse_log("\n".join(reduced))
    assert ds.meta["parameters"]["maxBytes"] == "16777216" and ds.meta["completeness"]["status"] == "complete"


def test_rows_above_the_stated_maxbytes_are_a_warning(user_data):
    """CoreWeave's README pastes a '# nThread' line saying maxBytes 2147483648 over rows up to 8 GiB."""
    log = RAW / "nccl_all_reduce_perf__8node_64xH100_IB_SHARP__coreweave.txt"
    reference.import_log(log, "cw", op="all_reduce")
    warnings = reference.load("cw").meta["warnings"]
    assert "rows up to 8 GiB, above the maxBytes 2 GiB the log states" in " ".join(warnings)


def test_the_sweep_end_follows_nccl_tests_loop():
    assert checks.last_loop_size(8, 1 << 30, 2, "factor") == 1 << 30
    assert checks.last_loop_size(8, 10 << 30, 2, "factor") == 8 << 30  # -e 10G: the loop stops at 8 GiB
    assert checks.last_loop_size(1 << 20, 5 << 20, 1 << 20, "bytes") == 5 << 20
    assert checks.stated_sweep({"minBytes": "8", "maxBytes": "64", "step": "2(factor)"}) == (8, 64, 2, "factor")
    assert checks.stated_sweep({}) is None


# --------------------------------------------------------------------------- repeated sizes
def test_repeated_rows_are_refused_saying_how_many_sizes_and_what_to_do(tmp_path, user_data):
    lines = _lines(RTX2080)
    rows = lines[21:49]
    repeated = _write(tmp_path, "repeated.log", lines[:21] + [r for r in rows for _ in range(3)] + lines[49:])
    with pytest.raises(schema.DatasetError) as e:
        reference.import_log(repeated, "rep")
    msg = str(e.value)
    assert "28 sizes are printed more than once (56 repeated rows" in msg and "up to 3 times" in msg
    assert "refuses the table: split the file so each run keeps its header" in msg
    assert not user_data.exists() or not list(user_data.iterdir())


def test_a_run_pasted_twice_is_refused_as_a_copy(tmp_path, user_data):
    lines = _lines(RTX2080)
    twice = _write(tmp_path, "twice.log", lines + lines[11:])  # `cat run.log run.log`: header, rows, closing lines
    with pytest.raises(schema.DatasetError, match="lines 61-90 repeat the run at lines 20-49 digit for digit"):
        reference.import_log(twice, "twice")
    assert not user_data.exists() or not list(user_data.iterdir())


def test_legitimate_repeats_are_not_duplicates():
    """nccl-tests prints a size too small to split over the ranks as 0, several times; and -N repeats a whole sweep,
    which starts a new run (sizes go down), not a duplicate."""
    (ag,) = parse_log(SUPERBENCH_ALLGATHER)
    assert list(ag.frame["nbytes"][:10:2]) == [0] * 5 and ag.meta["repeated_sizes"]["sizes"] == 0
    lines = _lines(RTX2080)
    twice = parse_log("\n".join(lines[:49] + lines[21:51]))
    assert len(twice) == 2 and all(d.meta["repeated_sizes"]["sizes"] == 0 for d in twice)


# --------------------------------------------------------------------------- what the numbers fix
@pytest.mark.parametrize(
    "path,index,op,status,n",
    [
        (ISSUE290, 0, "all_reduce", "derived", 8),
        (ISSUE290, 1, "all_reduce", "derived", 16),
        (RTX2080, 0, "all_reduce", "derived", 2),
        (SUPERBENCH_ALLGATHER, 0, "all_gather", "derived", 8),
        (SUPERBENCH_ALLGATHER, 0, "all_reduce", "inconsistent", None),  # 0.875 is no all-reduce factor
        (FIX / "nccl_superbench_broadcast.log", 0, "broadcast", "not fixed", None),
        # 1,440 ranks (the log's last Rank line is 1439): 2 decimals cannot tell n from its neighbours
        (RAW / "nccl_all_reduce_perf__GB200_NVL72_1_2_20racks__coreweave.txt", 2, "all_reduce", "ambiguous", None),
    ],
)
def test_busbw_over_algbw_fixes_the_rank_count_within_the_printed_rounding(path, index, op, status, n):
    ds = parse_log(path, format="nccl-tests")[index]
    rc = checks.rank_count(op, ds.frame, collectives.bus_factor)
    assert (rc.status, rc.world_size) == (status, n), rc.describe()
    if status == "ambiguous":
        assert 1440 in rc.candidates and len(rc.candidates) > 1 and "ambiguous" in rc.describe()
    if ds.meta["rank_lines_complete"] and status == "derived":
        assert ds.meta["gpu_count"] == n  # the Rank lines agree with the numbers


def test_a_table_only_fragment_imports_with_the_rank_count_derived_and_the_rest_not_stated(tmp_path, user_data, capsys):
    assert cli.main(["ref", "import-log", str(ISSUE290), "--name", "i290", "--op", "all_reduce"]) == 0
    out = capsys.readouterr().out
    names = ["i290_all_reduce_1", "i290_all_reduce_2", "i290_all_reduce_3"]  # named after their collective
    for name, n in zip(names, (8, 16, 16)):
        assert f"imported {name}: allreduce_sweep" in out
        ds = reference.load(name)
        assert set(ds.frame["world_size"]) == {n} and ds.meta["gpu_count"] == n
        assert ds.meta["facts"]["world_size"].startswith(f"derived: busbw/algbw = {2 * (n - 1) / n:.4g}")
        assert ds.frame["nodes"].isna().all() and ds.meta["nodes"] == schema.NOT_STATED
        assert ds.meta["facts"]["nodes"] == schema.NOT_STATED
    assert "nodes: not stated in the log (record it with --fill nodes=N)" in out
    # the same table with nodes given
    assert cli.main(["ref", "import-log", str(ISSUE290), "--name", "j", "--op", "all_reduce", "--fill", "nodes=2"]) == 0
    assert set(reference.load("j_all_reduce_2").frame["nodes"]) == {2}


def test_a_fill_the_numbers_contradict_is_refused_naming_both(user_data):
    with pytest.raises(schema.DatasetError) as e:
        reference.import_log(ISSUE290, "x", op="all_reduce", fill={"world_size": 8})
    msg = str(e.value)
    assert "lines 27-38: --fill world_size=8 contradicts the numbers" in msg and "fixes 16 ranks for all_reduce" in msg
    with pytest.raises(schema.DatasetError, match="fixes 8 ranks for all_gather"):
        reference.import_log(SUPERBENCH_ALLGATHER, "x", op="all_gather", fill={"world_size": 16})
    with pytest.raises(schema.DatasetError, match="--op all_reduce contradicts the numbers"):
        reference.import_log(SUPERBENCH_ALLGATHER, "x", op="all_reduce")
    with pytest.raises(schema.DatasetError, match="the log states all_reduce; --op all_gather contradicts it"):
        reference.import_log(RTX2080, "x", op="all_gather")
    assert not user_data.exists() or not list(user_data.iterdir())


def test_every_missing_fact_is_listed_at_once_with_its_flag(user_data):
    with pytest.raises(schema.DatasetError) as e:
        reference.import_log(ISSUE290, "x")
    msg = str(e.value)
    assert msg.count("does not name its collective") == 1  # one message for the three tables
    for where in ("14-21 (busbw/algbw = 1.75 > 1", "27-38 (busbw/algbw = 1.875 > 1", "43-54 (busbw/algbw = 1.875"):
        assert where in msg
    assert "only all_reduce has a bus factor above 1, for 16 ranks" in msg
    assert "give it: --op all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall" in msg


def test_a_failed_auto_detection_suggests_format(tmp_path):
    junk = _write(tmp_path, "notes.txt", ["training loss 0.31 at step 400", "ok"])
    with pytest.raises(schema.DatasetError, match="name it: --format nccl-tests|nvbandwidth|bandwidthtest"):
        reference.import_log(junk, "x")
    with pytest.raises(schema.DatasetError, match="a folder, not a log file"):
        reference.import_log(tmp_path, "x")


def test_several_runs_are_named_after_their_collective(user_data):
    names, _ = reference.import_log(FIX / "nccl_ncclebpf_socket_thread_validation.md", "eb")
    assert names == [f"eb_all_reduce_{i}" for i in range(1, 10)] + [f"eb_all_gather_{i}" for i in range(1, 7)]


# --------------------------------------------------------------------------- a log given to a notebook
def test_a_notebook_checks_a_log_reference_first_and_reads_an_unnamed_one_as_its_collective(tmp_path):
    lines = _lines(RTX2080)
    fragment = _write(tmp_path, "mylog.log", lines[18:49])  # the table alone: no command, no Rank lines
    note = reference.log_reference_note(str(fragment), "allreduce_sweep")
    assert "assumed: the notebook shows it (all_reduce)" in note and "derived: busbw/algbw = 1 on" in note
    assert "incomplete" in note  # no closing lines: said in the first cell
    sets, msg = reference.select(str(fragment), "allreduce_sweep")
    assert msg is None and sets[0].meta["your_log"] == "mylog" and set(sets[0].frame["world_size"]) == {2}

    lines_drawn = views.reference_lines(sets)
    fig = views.references_figure(lines_drawn)
    drawn = [ln for ax in fig.axes for ln in ax.get_lines()]
    mine = [ln for ln in drawn if ln.get_label().startswith("your log: mylog")]
    assert len(mine) == 2  # nodes not stated: on the single-node and the multi-node side
    others = [ln for ln in drawn if not ln.get_label().startswith("your log")]
    assert others and not any(ln.get_color() == mine[0].get_color() for ln in others)
    assert not any(ln.get_label().startswith("recorded: ") and "mylog" in ln.get_label() for ln in drawn)

    reference.import_log(fragment, "mine", op="all_reduce")  # imported, then given by name: still the user's own
    assert reference.select("mine", "allreduce_sweep")[0][0].meta["your_log"] == "mine"
    assert "your_log" not in reference.select(None, "allreduce_sweep")[0][0].meta

    assert reference.log_reference_note(None, "allreduce_sweep") is None
    assert (
        reference.log_reference_note("nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290", "allreduce_sweep") is None
    )


def test_a_log_the_notebook_cannot_use_fails_in_the_first_cell_with_what_to_set(tmp_path):
    gather = _write(tmp_path, "cluster.log", _lines(SUPERBENCH_ALLGATHER))  # 0.875: not an all-reduce
    with pytest.raises(schema.DatasetError) as e:
        reference.log_reference_note(str(gather), "allreduce_sweep")
    assert "reference=" in str(e.value) and "holds no all_reduce table" in str(e.value)
    assert "the log holds lines 14-50: busbw/algbw = 0.875 < 1 fits all_gather" in str(e.value)
    assert "--op" not in str(e.value)
    with pytest.raises(schema.DatasetError, match="reference='no/such.log': no such file or folder"):
        reference.log_reference_note("no/such.log", "allreduce_sweep")
    junk = _write(tmp_path, "notes.txt", ["nothing", "here"])
    with pytest.raises(schema.DatasetError, match="reference=.*labkit ref import-log FILE --name NAME --format"):
        reference.log_reference_note(str(junk), "allreduce_sweep")


def test_rounding_bounds_are_half_a_printed_unit():
    assert math.isclose(checks._half_unit("46.80"), 0.005)
    assert math.isclose(checks._half_unit("2e-07"), 5e-08)
    assert math.isclose(checks._half_unit("12"), 0.5)


def test_notebook_05_checks_its_reference_in_the_first_cell_after_parameters_and_install():
    nb = json.loads((ROOT / "notebooks" / "05_ring_allreduce_by_hand.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    cells = [
        "".join(c["source"]) for c in code if not set(c["metadata"].get("tags", [])) & {"parameters", "colab-install"}
    ]
    at = next(i for i, src in enumerate(cells) if "log_reference_note(" in src)
    assert 'session.say(log_reference_note(reference, "allreduce_sweep"))' in cells[at]
    for before in cells[:at]:  # only imports run before it
        assert all(ln.startswith(("import ", "from ")) for ln in before.splitlines() if ln.strip()), before
