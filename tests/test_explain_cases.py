"""`labkit explain` on layouts of real logs that test_explain.py does not cover.

Several nccl-tests jobs at once (nccl-tests#182, #213, #306): each process ran as rank 0 of a job of its own, so
each table measured one node's GPUs alone. The excerpts in tests/fixtures/explain are the threads' text as posted
(README there); the end-to-end log is arranged from the real lines of the #290 thread's one-node run.
"""

from pathlib import Path

import pytest

from labkit.tools.explain import explain, load_runs, rules
from labkit.tools.explain.runs import jobs_before

FIX = Path(__file__).parent / "fixtures"
POSTED_290 = FIX / "logs" / "nccl_issue290_srun_labels.md"
RAW = Path(__file__).resolve().parents[1] / "data" / "raw"
ALPS = RAW / "nccl_all_reduce_perf__CSCS_Alps_GH200_1to16nodes_Slingshot11__boeschf.txt"


def _one_node_block(path: Path, host: str) -> list[str]:
    """The lines of a log's one-node run on `host`, from its parameter line to its '# Avg bus bandwidth' line."""
    lines = path.read_text().splitlines()
    rank = next(i for i, ln in enumerate(lines) if ln.startswith("#  Rank  0") and f" {host} " in ln)
    start = max(i for i in range(rank) if lines[i].startswith("# nThread"))
    end = next(i for i in range(rank, len(lines)) if lines[i].startswith("# Avg bus bandwidth"))
    return lines[start : end + 1]


def _two_jobs_at_once(block: list[str], tables: int) -> str:
    """`block` as two jobs started at once print it (the layout of #182, #213 and #306): both parameter lines and
    '# Using devices' first, then each job's Rank lines and table. The real lines of one run, only rearranged; with
    tables=2 the second job's lines are the first's again (two jobs on one host, as mpirun -np 2 without MPI)."""
    head = block[: block.index("# Using devices") + 1]
    body = block[len(head) :]
    return "\n".join(head + head + body * tables) + "\n"


@pytest.mark.parametrize("name", ["182", "213", "306"])
def test_the_posted_threads_print_the_parameter_line_once_per_job(name):
    text = (FIX / "explain" / f"nccl_issue{name}_two_jobs_at_once_excerpt.txt").read_text()
    assert jobs_before(text.splitlines()) == 2


def test_one_job_prints_its_parameter_line_once_even_across_reruns():
    lines = POSTED_290.read_text().splitlines()
    assert jobs_before(lines) == 1  # three runs, each with its own header and Rank lines
    # a job that printed its Rank lines and then died (the failure line as nccl-tests#102 shows it), and its rerun:
    # one job each time, not two at once
    block = _one_node_block(POSTED_290, "node005")
    rerun = block[:12] + ["host3: Test NCCL failure common.cu:1125 'unhandled system error'"] + block
    assert jobs_before(rerun) == 1
    assert [r.jobs_at_once for r in load_runs(str(POSTED_290))] == [1, 1, 1]


def test_tables_of_jobs_started_at_once_are_each_one_node_measured_alone(tmp_path):
    log = tmp_path / "two_jobs.log"
    log.write_text(_two_jobs_at_once(_one_node_block(POSTED_290, "node005"), tables=2))
    results = explain(str(log), op="all_reduce", system="h100_ndr_8nic")
    assert len(results) == 2
    for r in results:  # the second table has no parameter line of its own: it belongs to the same two jobs
        assert r["verdict"] == "invalid" and r["expected_busbw_GBps"] is None and r["causes"] == []
        (why,) = r["invalid_reasons"]
        assert why.startswith("each node measured alone: 2 nccl-tests jobs ran at once")
        assert "node005's 8 GPU(s) by themselves, an intra-node figure, not the cluster's" in why
        assert "make MPI=1" in why and "nccl-tests#213" in why
    assert results[0]["measured_busbw_GBps"] == pytest.approx(473.60)  # the number is kept, as printed


def test_pieces_of_two_jobs_interleaved_tables_are_each_flagged(tmp_path):
    """#182's comment shows two jobs' rows interleaved in one table (8 ... 256, 8, 512, 16, 1024, ...). Arranged
    from the #290 one-node run: both jobs' Rank lines, then its rows as two jobs printing them at once would."""
    block = _one_node_block(POSTED_290, "node005")
    head = block[: block.index("# Using devices") + 1]
    ranks = [ln for ln in block if ln.startswith("#  Rank")]
    rows = [ln for ln in block if ln[:1] == " "]
    table_head = block[len(head) + len(ranks) : block.index(rows[0])]
    a, b = rows, rows  # the same job's rows stand for both jobs': only the arrangement is the test's
    mixed = a[:3] + [x for pair in zip(b[:3], a[3:]) for x in pair] + b[3:]
    log = tmp_path / "interleaved.log"
    log.write_text("\n".join(head + head + ranks + ranks + table_head + mixed) + "\n")
    runs = load_runs(str(log))
    assert len(runs) > 1 and all(r.jobs_at_once == 2 for r in runs)  # the reader splits where sizes start again
    reasons = [rules.jobs_alone(r, runs) for r in runs]
    assert all("an intra-node figure, not the cluster's" in why for why in reasons)
    assert "node005's 8 GPU(s) by themselves" in reasons[0]  # the piece under the Rank lines: 8 GPUs per job, not 16


def test_one_node_runs_each_printed_by_its_own_job_are_judged_as_one_node(tmp_path):
    """A log of one-node runs on different hosts, one after another (a per-node health check): every table has its
    own parameter line, so each is a valid one-node run, not jobs that ran alone by mistake."""
    log = tmp_path / "per_node.log"
    log.write_text("\n".join(_one_node_block(POSTED_290, "node005") + _one_node_block(ALPS, "nid005583")) + "\n")
    runs = load_runs(str(log))
    assert [(r.hosts, r.jobs_at_once) for r in runs] == [(("node005",), 1), (("nid005583",), 1)]
    assert all(rules.jobs_alone(r, runs) is None for r in runs)
    (r,) = explain(str(log), run=1, op="all_reduce", system="h100_ndr_8nic")
    assert r["verdict"] == "healthy" and r["nodes"] == 1


def test_a_dataset_with_an_empty_busbw_cell_is_judged_not_refused_with_an_internal_error():
    """nccl-tests#194's excerpt cut its 4 GiB in-place row after algbw: the dataset's busbw cell is empty (NaN). The
    rank-count check skips that row; it raised "invalid literal for int() with base 10: 'n'" (NaN has no last
    printed place)."""
    (r,) = explain("nccl_allreduce_2xh100_pcie_nvlink_bridge_issue194", pcie_only=True)
    assert r["world_size"] == 2 and r["verdict"] != "invalid"
    assert r["size_bytes"] == 4 * 2**30  # the cut row's out-of-place value still counts


def test_pcie_only_and_an_nvlink_bandwidth_together_are_refused():
    """--pcie-only says the GPUs have no NVLink, --nvlink-bandwidth how much they have: explain judged the run at
    PCIe and dropped the NVLink figure without a word."""
    with pytest.raises(ValueError, match="--pcie-only .*or --nvlink-bandwidth .*not both"):
        explain("nccl_allreduce_busbw_azure_ndh100v5", pcie_only=True, nvlink_GBps=100.0)
