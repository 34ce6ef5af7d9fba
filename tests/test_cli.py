"""The `labkit` command line: doctor, ref, model, bench, run — and clear errors for bad input."""

import json
import subprocess
import sys

import pytest

from labkit.tools.cli import main


def labkit(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "labkit.tools.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_doctor_reports_in_plain_language(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "labkit" in out and ("CUDA" in out)
    assert main(["doctor", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert {"torch", "gpus", "numa_nodes", "date", "labkit", "command"} <= set(env)


def test_ref_list_and_show(capsys):
    assert main(["ref", "list", "--kind", "p2p_matrix"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) >= 5 and all("p2p_matrix" in r for r in rows)
    name = rows[0].split()[0]
    assert main(["ref", "show", name, "--rows", "3"]) == 0
    out = capsys.readouterr().out
    assert "source" in out and "caveats" in out


def test_ref_show_rows_prints_byte_counts_as_integers_even_with_blanks(capsys):
    # the spec row of this dataset has no size, so pandas reads the nbytes column as float
    assert main(["ref", "show", "h100_vm_labkit_fidelity_points", "--rows", "13"]) == 0
    out = capsys.readouterr().out
    assert " 268435456 " in out and " 1073741824 " in out and "<NA>" in out
    assert "268435456.0" not in out and "1073741824.0" not in out


def test_model_reproduces_the_corrected_textbook_number(capsys):
    assert main(["model", "--size", "14GB", "--gpus", "8", "--bandwidth", "32", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["seconds"] == pytest.approx(0.765625)


def test_bench_host_json_records():
    r = labkit("bench", "host", "--sizes", "4KiB,1MiB", "--repeats", "3", "--json")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [x["nbytes"] for x in recs] == [4096, 1 << 20]
    assert all(x["bandwidth_GBps"] > 0 and x["bandwidth_direction"] == "unidirectional" for x in recs)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["bench", "host", "--sizes", "0"], "at least 1 byte"),
        (["bench", "host", "--sizes=-4KiB"], "cannot read size"),
        (["bench", "host", "--sizes", "1TiB"], "above the limit"),
        (["ref", "show", "no_such_dataset"], "no dataset named"),
        (["model", "--size", "1GiB", "--gpus", "0", "--bandwidth", "10"], "--gpus must be positive"),
        (["run", "01", "--mode", "fast"], "invalid choice"),
    ],
)
def test_bad_input_gets_a_clear_error(args, needle):
    r = labkit(*args)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "flag,value",
    [("--nodes", "0"), ("--gpus-per-node", "2.5"), ("--nic-bandwidth", "nan"), ("--nics-per-node", "x")],
)
def test_model_and_explain_refuse_a_bad_cluster_flag_in_the_same_words(flag, value, capsys):
    errors = []
    for command in (["model", "--size", "1GiB", "--gpus", "8", "--bandwidth", "10"], ["explain", "run.log"]):
        assert main([*command, flag, value]) == 2
        err = capsys.readouterr().err
        errors.append(err.split(": error: ", 1)[1].split(" (see `")[0])
    assert errors[0] == errors[1] and errors[0].startswith(f"{flag} must be"), errors


@pytest.mark.parametrize("bench,ranks", [("allreduce", "10000"), ("soak", "10000"), ("allreduce", "0"), ("soak", "-1")])
def test_a_bad_rank_count_is_refused_before_anything_starts(bench, ranks, capsys):
    import time

    from labkit.processes import descendants  # ranks left running; multiprocessing helpers excluded

    def _children():
        return descendants(helpers=False)

    before = _children()
    t0 = time.monotonic()
    assert main(["bench", bench, "--ranks", ranks, "--timeout" if bench == "allreduce" else "--runs", "5"]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 5  # no rank was started (starting one takes seconds)
    assert _children() - before == set()
    assert ("MAX_RANKS = 64" if ranks == "10000" else "--ranks must be positive") in err, err
    assert "Traceback" not in err


def test_labkit_bench_allreduce_with_10000_ranks_exits_2_with_the_limit():
    r = labkit("bench", "allreduce", "--ranks", "10000")
    assert r.returncode == 2 and "10000 ranks" in r.stderr and "MAX_RANKS = 64" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_copy_bench_without_gpu_says_what_is_missing():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = labkit("bench", "copy", "--sizes", "1MiB")
    assert r.returncode == 2 and "no CUDA device" in r.stderr and "Traceback" not in r.stderr


def test_data_files_are_parsed_as_csv_and_json_only():
    """No pickle, eval or exec on anything read from disk. (labkit.launch and labkit.processes pickle return
    values between launch's own parent and child processes, as torch.multiprocessing does; they read no files.)"""
    import re
    from pathlib import Path

    import labkit

    pat = re.compile(r"(pickle\.loads?\(|\beval\(|\bexec\(|torch\.load\(|yaml\.load\(|read_pickle|allow_pickle=True)")
    offenders = [
        f"{p.name}:{i + 1}"
        for p in Path(labkit.__file__).parent.rglob("*.py")
        if p.name not in ("launch.py", "processes.py")
        for i, line in enumerate(p.read_text().splitlines())
        if pat.search(line) and not line.lstrip().startswith("#") and "literal_eval" not in line
    ]
    assert not offenders, offenders


def test_jupyterlab_script_binds_to_localhost_with_a_token():
    from pathlib import Path

    script = (Path(__file__).resolve().parents[1] / "scripts" / "lab.sh").read_text()
    assert "--ServerApp.ip=127.0.0.1" in script
    assert "token=''" not in script and 'token=""' not in script and "--no-browser --ServerApp.token" not in script
