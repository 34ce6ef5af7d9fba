"""Every `labkit` command refuses bad input the same way: exit 2, one line on stderr that names the flag or
file, no traceback, nothing written. The table runs in-process (argparse and the checks before any work);
a few real processes check what only a real process shows (a pipe closed early, the exit status)."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from labkit.tools.cli import build_parser, main
from labkit.units import PiB, parse_size

M = ["model", "--size", "1GiB", "--gpus", "8", "--bandwidth", "10"]
H = ["--algorithm", "hierarchical", "--gpus-per-node", "4", "--inter-bandwidth", "5"]
C = ["--nodes", "2", "--nic-bandwidth", "50", "--nics-per-node", "8"]
DS = "h100_vm_labkit_fidelity_points"  # a shipped dataset
TWO = ["bandwidthtest_a100_sxm4_40gb_cloud_vm", "bandwidthtest_pinned_pageable_a100_80gb_pcie_dell"]

# (arguments, what the message must name). {tmp}: an empty folder of the test's own; {file}: a file in it;
# {dir}: an empty folder in it; {full}: a folder holding a file.
CASES = [
    # labkit model: numbers, NaN and infinities, units, ranks, flags that must agree
    (M[:-1] + ["nan"], "--bandwidth"),
    (M[:-1] + ["inf"], "--bandwidth"),
    (M[:-1] + ["-inf"], "--bandwidth"),
    (M[:-1] + ["0"], "--bandwidth"),
    (M[:-1] + ["-1"], "--bandwidth"),
    (M[:-1] + ["fast"], "--bandwidth"),
    (M + ["--latency-us", "nan"], "--latency-us"),
    (M + ["--latency-us", "inf"], "--latency-us"),
    (M + ["--latency-us", "-5"], "--latency-us"),
    (["model", "--size", "1GiB", "--gpus", "0", "--bandwidth", "10"], "--gpus"),
    (["model", "--size", "1GiB", "--gpus", "-3", "--bandwidth", "10"], "--gpus"),
    (["model", "--size", "1GiB", "--gpus", "2.5", "--bandwidth", "10"], "--gpus"),
    (["model", "--size", "1GiB", "--gpus", "x", "--bandwidth", "10"], "--gpus"),
    (["model", "--size", "1GiB", "--gpus", "1", "--bandwidth", "10"], "--gpus 1: one GPU has no all-reduce"),
    (["model", "--size", "1GiB", "--gpus", "1", "--bandwidth", "10", "--nodes", "1"], "--gpus 1: one GPU has no"),
    (["model", "--size", "0", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "-1GiB", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "nan", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "inf", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "1XB", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "1.5", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "2000PiB", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--gpus", "8", "--bandwidth", "10"], "--size"),
    (["model", "--size", "1GiB", "--gpus", "8"], "--bandwidth"),
    (M + ["--algorithm", "hierarchical"], "--gpus-per-node"),
    (M + ["--algorithm", "hierarchical", "--gpus-per-node", "3", "--inter-bandwidth", "5"], "--gpus-per-node"),
    (M + ["--algorithm", "hierarchical", "--gpus-per-node", "0", "--inter-bandwidth", "5"], "--gpus-per-node"),
    (M + H[:-1] + ["nan"], "--inter-bandwidth"),
    (M + H + ["--inter-latency-us", "-1"], "--inter-latency-us"),
    (M + ["--algorithm", "fastest"], "--algorithm"),
    (M + ["--nodes", "0"], "--nodes"),
    (M + ["--nodes", "3"], "--nodes"),
    (M + ["--nodes", "2"], "--nic-bandwidth"),
    (M + C[:3] + ["nan", "--nics-per-node", "8"], "--nic-bandwidth"),
    (M + C[:-1] + ["0"], "--nics-per-node"),
    (M + C + ["--gpus-per-node", "3"], "--gpus-per-node"),
    (M + ["--nvls"], "--nvls"),
    # labkit ref: names, kinds, rows, paths (files for folders and folders for files)
    (["ref", "show", "no_such_dataset"], "no_such_dataset"),
    (["ref", "show"], "NAME"),
    (["ref", "show", DS, "--rows", "-3"], "--rows"),
    (["ref", "show", DS, "--rows", "many"], "--rows"),
    (["ref", "list", "--folder", "{tmp}/nosuch"], "nosuch"),
    (["ref", "list", "--folder", "{file}"], "afile.txt: is a file, not a folder"),
    (["ref", "list", "--kind", "teleport_sweep"], "--kind"),
    (["ref", "teleport"], "teleport"),
    (["ref", "import-log", "{dir}", "--name", "x"], "adir"),
    (["ref", "import-log", "{tmp}/missing.log", "--name", "x"], "missing.log"),
    (["ref", "import-log", "{file}"], "--name"),
    (["ref", "import-log", "{file}", "--name", "BAD-NAME"], "--name"),
    (["ref", "import-log", "{file}", "--name", "x"], "afile.txt"),
    (["ref", "import-log", "{file}", "--name", "x", "--format", "teleport"], "--format"),
    (["ref", "import-log", "{file}", "--name", "x", "--out", "{file}"], "--out"),
    (["ref", "import-log", "{file}", "--name", "x", "--fill", "nodes"], "--fill"),
    (["ref", "import", "{tmp}/nosuch", "--prefix", "x"], "nosuch"),
    (["ref", "import", "{dir}", "--prefix", "x"], "adir"),
    (["ref", "import", "{dir}"], "--prefix"),
    (["ref", "import", "{dir}", "--prefix", "x", "--dest", "{file}"], "--dest"),
    # labkit record: the folder it writes
    (["record", "--out", "{file}"], "afile.txt"),
    (["record", "--out", "/proc/labkit-cannot-write-here"], "/proc/labkit-cannot-write-here"),
    (["record", "--out", "{tmp}/p", "--only", "teleport"], "--only"),
    (["record", "--out", "{full}"], "no labkit profile"),
    (["record", "--out", "{full}", "--force"], "no labkit profile"),  # --force replaces a profile, nothing else
    (["record"], "--out"),
    # labkit run: notebooks, reference, mode, timeout, --out — all before a kernel starts
    (["run", "no_such_notebook"], "no_such_notebook"),
    (["run", "0"], "'0'"),
    (["run", "01", "--reference", "NO_SUCH_REFERENCE"], "--reference"),
    (["run", "01", "--reference", "{tmp}/nosuch/"], "--reference"),
    (["run", "01", "--mode", "fast"], "--mode"),
    (["run", "01", "--timeout", "0"], "--timeout"),
    (["run", "01", "--timeout", "nan"], "--timeout"),
    (["run", "01", "--out", "{file}"], "--out"),
    # labkit compare: missing folders, files that are not datasets, kinds, --plot
    (["compare", "{tmp}/nosuch", DS], "no such folder"),
    (["compare", "no_such_dataset", DS], "no_such_dataset"),
    (["compare", "{file}", DS], "afile.txt"),
    (["compare", "{dir}", DS], "adir"),
    (["compare", "nosuch.csv", DS], "nosuch.csv"),
    (["compare", *TWO, "--kind", "teleport_sweep"], "--kind"),
    (["compare", *TWO, "--plot", "{dir}"], "--plot"),
    (["compare", *TWO, "--plot", "{file}/x.png"], "--plot"),
    (["compare"], "profiles"),
    # labkit student / notebooks / site: output folders
    (["student", "--out", "{file}"], "--out"),
    (["student", "no_such_notebook", "--out", "{tmp}/st"], "no_such_notebook"),
    (["student"], "--out"),
    (["notebooks", "--out", "{file}"], "--out"),
    (["site", "--out", "{file}"], "--out"),
    (["site", "--out", "{tmp}/site", "--executed", "{tmp}/nosuch"], "--executed"),
    (["site", "--out", "{tmp}/site", "--timeout", "-1"], "--timeout"),
    # labkit bench: the flags the experiments share, refused before any process starts
    (["bench", "host", "--sizes", "0"], "--sizes"),
    (["bench", "host", "--sizes", "1TiB"], "--sizes"),  # benchmark buffers keep their 64 GiB cap
    (["bench", "host", "--sizes", "nan"], "--sizes"),
    (["bench", "host", "--sizes", "inf"], "--sizes"),
    (["bench", "host", "--sizes", ","], "--sizes"),
    (["bench", "host", "--repeats", "0"], "--repeats"),
    (["bench", "host", "--repeats", "-1"], "--repeats"),
    (["bench", "copy", "--device", "cuda:7"], "--device"),
    (["bench", "copy", "--repeats", "0"], "--repeats"),
    (["bench", "copy", "--direction", "h2d,sideways"], "--direction"),
    (["bench", "copy", "--memory", "nothing"], "--memory"),
    (["bench", "overlap", "--ratios", "nan"], "--ratios"),
    (["bench", "overlap", "--ratios", "1,-1"], "--ratios"),
    (["bench", "overlap", "--size", "1PiB"], "--size"),
    (["bench", "allreduce", "--ranks", "0"], "--ranks"),
    (["bench", "allreduce", "--ranks", "100000"], "100000 ranks"),
    (["bench", "allreduce", "--timeout", "nan"], "--timeout"),
    (["bench", "allreduce", "--timeout", "-1"], "--timeout"),
    (["bench", "allreduce", "--straggler", "x"], "--straggler"),
    (["bench", "allreduce", "--straggler", "1:nan"], "--straggler"),
    (["bench", "allreduce", "--straggler", "-1:0.5"], "--straggler"),
    (["bench", "allreduce", "--fail-rank", "-1"], "--fail-rank"),
    (["bench", "collectives", "-b", "0"], "--min-bytes"),
    (["bench", "collectives", "-e", "inf"], "--max-bytes"),
    (["bench", "collectives", "-f", "1"], "--step-factor"),
    (["bench", "collectives", "-n", "0"], "--iters"),
    (["bench", "collectives", "-w", "-1"], "--warmup-iters"),
    (["bench", "collectives", "-r", "-1"], "--root"),
    (["bench", "collectives", "--timeout", "inf"], "--timeout"),
    (["bench", "ladder", "--repeats", "0"], "--repeats"),
    (["bench", "ladder", "--timeout", "nan"], "--timeout"),
    (["bench", "soak", "--runs", "0"], "--runs"),
    (["bench", "soak", "--launches", "-1"], "--launches"),
    (["bench", "soak", "--size", "0"], "--size"),
    (["bench", "fidelity", "--size", "0"], "--size"),
    (["bench", "p2p", "--size", "0"], "--size"),
    (["bench", "p2p", "--latency-size", "nan"], "--latency-size"),
    (["bench", "teleport"], "teleport"),
    # labkit explain: the log, the hardware flags (checked as argparse reads them, before the log is read)
    (["explain"], "LOG"),
    (["explain", "{tmp}/nosuch.log"], "nosuch.log"),
    (["explain", "{dir}"], "adir"),
    (["explain", "{file}", "--nodes", "0"], "--nodes"),
    (["explain", "{file}", "--nic-bandwidth", "nan"], "--nic-bandwidth"),
    (["explain", "{file}", "--nvlink-bandwidth", "inf"], "--nvlink-bandwidth"),
    (["explain", "{file}", "--run", "0"], "--run"),
    # the command itself
    (["teleport"], "teleport"),
    (["doctor", "--verbose"], "--verbose"),
]

#: what a message must never show: a traceback, errno's brackets, a hidden temporary name, keyword arguments
NEVER = ("Traceback", "[Errno", ".partial-", "world_size", "latency_s", "_GBps", "gpus_per_node", "e-06")


@pytest.fixture
def place(tmp_path, monkeypatch):
    """The test's own folder, with a file, an empty folder and a full one; it is also the working directory
    and the per-user data folder, so anything a command wrote would show up in it."""
    (tmp_path / "afile.txt").write_text("hi\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "userdata"))
    return tmp_path


def _fill(args, tmp):
    where = {"{tmp}": str(tmp), "{file}": str(tmp / "afile.txt"), "{dir}": str(tmp / "adir")}
    where["{full}"] = str(tmp / "full")
    out = []
    for a in args:
        for k, v in where.items():
            a = a.replace(k, v)
        out.append(a)
    return out


def _tree(root):
    return sorted((str(p.relative_to(root)), p.is_dir()) for p in root.rglob("*"))


def test_the_table_covers_every_command_with_enough_cases():
    assert len(CASES) >= 80
    in_table = {args[0] for args, _ in CASES}
    (subcommands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subcommands.choices) <= in_table  # every command has bad inputs in the table


@pytest.mark.parametrize("args,names", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_one_line_naming_the_flag_or_file(args, names, place, capsys):
    before = _tree(place)
    code = main(_fill(args, place))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("labkit"), err
    assert names in lines[0], lines[0]
    assert not any(bad in err + out for bad in NEVER), lines[0]
    assert _tree(place) == before, "a refused command left something behind"


def test_unknown_names_get_the_three_closest_not_every_name(capsys):
    assert main(["ref", "show", "h100_vm_labkit_pin_cots"]) == 2
    err = capsys.readouterr().err
    assert "did you mean: h100_vm_labkit_pin_cost" in err
    hint = err.split("did you mean:")[1].split("?")[0]
    assert len(hint.split(",")) == 3
    assert main(["run", "01_pcie_latency_crve"]) == 2
    assert "did you mean: 01_pcie_latency_curve" in capsys.readouterr().err
    for args in (["ref", "show", "nvidia"], ["run", "01", "--reference", "nvidia"]):  # nothing close: no guess
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "did you mean" not in err and "see `labkit ref list" in err, err


def test_the_calculator_models_any_size_while_buffers_keep_their_cap(capsys):
    # a 70B model's bf16 gradients: 140 GB, above the 64 GiB benchmark-buffer cap
    assert main(["model", "--size", "140GB", "--gpus", "8", "--bandwidth", "32", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["nbytes"] == 140 * 10**9
    assert rec["seconds"] == pytest.approx(2 * 7 / 8 * 140e9 / 32e9)
    assert main(["model", "--size", "1PiB", "--gpus", "8", "--bandwidth", "32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nbytes"] == PiB
    with pytest.raises(ValueError, match="above the limit of 64 GiB"):
        parse_size("140GB")


def _labkit_piped(shell_tail: str, *args, tmp_path):
    """`python -m labkit ARGS 2>ERR | TAIL` in bash with pipefail: (labkit's exit status, its stderr)."""
    err = tmp_path / "stderr.txt"
    cmd = " ".join([sys.executable, "-m", "labkit", *args, f"2>{err}", "|", shell_tail])
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    return r.returncode, err.read_text()


@pytest.mark.parametrize("args", [["ref", "list"], ["compare", *TWO]], ids=["ref list", "compare"])
def test_output_into_a_pipe_closed_early_ends_quietly(args, tmp_path):
    # head -n 0 closes the pipe before labkit writes: every write meets a closed pipe (EPIPE)
    code, err = _labkit_piped("head -n 0", *args, tmp_path=tmp_path)
    assert err == "", err  # no traceback, no "Exception ignored ... BrokenPipeError"
    assert code == 141  # as a process killed by SIGPIPE reports it (128 + 13), `yes | head` alike


def test_a_real_process_exits_2_with_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "labkit", "model", "--size", "1GiB", "--gpus", "16", "--gpus-per-node", "3"]
        + ["--bandwidth", "10", "--algorithm", "hierarchical", "--inter-bandwidth", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LABKIT_DATA": str(tmp_path)},
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "labkit model: error: --gpus (16) is not a multiple of --gpus-per-node (3)"
