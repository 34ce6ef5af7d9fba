"""labkit.logs as a whole: which tool a text is, clear errors naming the line, the model agreeing
with labkit.reference, digits surviving a write and a load, and the package staying core."""

from __future__ import annotations

import ast
import random
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from derive_helpers import as_text

from labkit import reference, schema
from labkit.logs import FORMATS, LogFormatError, detect_format, detect_formats, parse_log
from labkit.logs._model import REQUIRED_COLUMNS
from labkit.logs._text import shift_decimal, unwrap

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
PACKAGE = Path(__file__).resolve().parents[1] / "labkit" / "logs"
TOOL_OF = {
    "nccl": "nccl-tests",
    "paste_nccl": "nccl-tests",
    "malformed_nccl": "nccl-tests",
    "nvbandwidth": "nvbandwidth",
    "malformed_nvbandwidth": "nvbandwidth",
    "bandwidthtest": "bandwidthtest",
    "malformed_bandwidthtest": "bandwidthtest",
    "p2p": "p2pbandwidthlatencytest",
    "malformed_p2p": "p2pbandwidthlatencytest",
}
TEXT_FIXTURES = [
    p for p in sorted(LOGS.iterdir()) if p.suffix != ".gz" and p.name not in ("README.md", "malformed_empty.txt")
]


def _tool(path: Path) -> str:
    return next(TOOL_OF[k] for k in sorted(TOOL_OF, key=len, reverse=True) if path.name.startswith(k + "_"))


@pytest.mark.parametrize("path", TEXT_FIXTURES, ids=lambda p: p.name[:40])
def test_detect_format_names_the_tool(path):
    assert detect_format(path.read_text()) == _tool(path)


def test_a_file_with_two_tools_gives_both_in_order():
    text = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "raw"
        / "nccl_all_reduce_perf_and_p2p__4xRTX5090_PCIeGen5_noP2P__nccltests_issue287.txt"
    ).read_text()
    assert detect_formats(text) == ["nccl-tests", "p2pbandwidthlatencytest"]
    parsed = parse_log(text)
    assert [d.tool for d in parsed] == ["nccl-tests", "p2pbandwidthlatencytest"]
    assert [d.kind for d in parse_log(text, format="p2p")] == ["p2p_matrix"]


@pytest.mark.parametrize(
    "fixture,line,words",
    [
        ("malformed_empty.txt", 1, "empty input"),
        ("malformed_binary_gzip_of_nccl_log.gz", 1, "binary data"),
    ],
)
def test_unreadable_files_raise_one_clear_error(fixture, line, words):
    with pytest.raises(LogFormatError) as e:
        parse_log(LOGS / fixture)
    assert e.value.line == line and words in str(e.value) and fixture in str(e.value)


def test_text_of_no_known_tool_names_its_first_line():
    with pytest.raises(
        LogFormatError,
        match=r"line 3: no nccl-tests, nvbandwidth, bandwidthTest or "
        r"p2pBandwidthLatencyTest output found \(first line: 'hello'\)",
    ):
        parse_log("\n\nhello\nworld\n")


def test_asking_for_the_wrong_tool_is_an_error_not_an_empty_result():
    with pytest.raises(LogFormatError, match="without a complete result table"):
        parse_log(LOGS / "nccl_pkb_2node_k80.txt", format="nvbandwidth")
    with pytest.raises(ValueError, match="unknown log format 'iperf'"):
        parse_log(LOGS / "nccl_pkb_2node_k80.txt", format="iperf")
    assert set(FORMATS) == {"nccl-tests", "nvbandwidth", "bandwidthtest", "p2pbandwidthlatencytest"}


def test_model_required_columns_agree_with_reference_kinds():
    for kind, required in REQUIRED_COLUMNS.items():
        assert schema.KINDS[kind][0] == required, kind


@pytest.mark.parametrize(
    "fixture,fill",
    [
        ("nccl_ncclebpf_socket_thread_validation.md", {}),  # config = the NCCL_* variables of its command
        ("nccl_superbench_broadcast.log", {"op": "broadcast", "config": "default"}),
        ("nvbandwidth_xe9780_7xb300_v0.10.log", {}),
        ("bandwidthtest_jdh4_a100pcie_range.md", {}),
        ("p2p_wohlbier_titanrtx_v100_reads.md", {}),
    ],
)
def test_write_and_load_keep_every_printed_digit(tmp_path, fixture, fill):
    """The importer's path in phase 2: parse, fill what the log lacks, write, load."""
    ds = parse_log(LOGS / fixture)[0].filled(**fill)
    assert ds.missing == ()
    meta = ds.dataset_meta(
        system="test rig",
        interconnect="as logged",
        date="2026",
        source=f"fixture {fixture}",
        source_file=fixture,
        quality="B",
    )
    empty = [k for k in ("gpu", "gpu_count", "nodes") if meta[k] in ("", None)]
    assert empty == ([] if "nvbandwidth" not in fixture else ["gpu"])  # this nvbandwidth log lists no device
    meta.update({k: "not stated in the log" for k in empty})
    reference.write_dataset(tmp_path, "imported", ds.frame, meta)
    loaded = reference.load("imported", tmp_path)
    text = pd.read_csv(tmp_path / "imported.csv", dtype=str, keep_default_na=False)
    assert text.equals(as_text(ds.frame)), "the CSV must hold the printed digits"
    assert loaded.meta["schema_version"] == schema.SCHEMA_VERSION and loaded.kind == ds.kind


def test_filled_never_overwrites_what_the_log_printed():
    ds = parse_log(LOGS / "nccl_pkb_2node_k80.txt")[0]
    assert set(ds.filled(world_size=2).frame["world_size"]) == {2}
    with pytest.raises(ValueError, match="printed as \\['2'\\]"):
        ds.filled(world_size=16)


def test_nothing_is_guessed_for_what_a_log_does_not_state():
    ds = parse_log(LOGS / "nccl_superbench_allgather.log")[0]
    assert ds.meta["nccl_version"] is None and ds.meta["command"] is None and ds.meta["env"] == {}
    assert ds.frame["config"].isna().all() and ds.frame["op"].isna().all()
    assert ds.dataset_meta()["kind"] == "" and ds.dataset_meta()["software"] == "not recorded"  # data/README's words


@pytest.mark.parametrize(
    "raw,text",
    [
        ("[1,0]<stdout>:#       size    count", "#       size    count"),
        (" 0:      8388608  2097152", "8388608  2097152"),
        ("> > [1,3]<stderr>: NCCL WARN x", "NCCL WARN x"),
        ("   32000000>>--->---25.7", "32000000\t25.7"),
        ("\x1b[4mGPU0\x1b[0m  X", "GPU0  X"),
        ("12:34:56 timestamp", "12:34:56 timestamp"),
        ("memcpy CE CPU(row) <-> GPU(column)", "memcpy CE CPU(row) <-> GPU(column)"),
    ],
)
def test_unwrap_takes_off_wrappers_and_nothing_else(raw, text):
    assert unwrap(raw)[0] == text


def test_shift_decimal_moves_the_point_exactly():
    rng = random.Random(17)
    for _ in range(500):
        digits = f"{rng.randint(0, 10**7)}.{rng.randint(0, 999):0{rng.randint(1, 3)}d}"
        places = rng.choice([-6, -3, 3])
        assert Decimal(shift_decimal(digits, places)) == Decimal(digits).scaleb(places)


def test_parsing_is_unchanged_by_launcher_prefixes_on_every_line():
    """Property: any fixture reads the same after `srun --label` or `mpirun --tag-output` prefixes."""
    for path in (
        LOGS / "nccl_superbench_reduce.log",
        LOGS / "bandwidthtest_jdh4_a100pcie_range.md",
        LOGS / "nvbandwidth_issue50_6xa6000_v0.8.md",
    ):
        plain = parse_log(path)
        for prefix in ("0: ", "[1,0]<stdout>:", "> "):
            wrapped = parse_log("\n".join(prefix + line for line in path.read_text().splitlines()))
            assert [as_text(d.frame).values.tolist() for d in wrapped] == [
                as_text(d.frame).values.tolist() for d in plain
            ], (path.name, prefix)


def test_the_package_is_core_it_imports_no_other_labkit_module():
    allowed = {"labkit.units"}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("labkit"):
                assert node.module in allowed, f"{path.name} imports {node.module}"
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                pytest.fail(f"{path.name} imports from outside labkit.logs")
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("labkit") and a.name not in allowed for a in node.names)
        # ~400 lines of code; ruff format's one-item-per-line literals add about a tenth
        assert len(path.read_text().splitlines()) <= 500, f"{path.name} is longer than ~500 lines"
