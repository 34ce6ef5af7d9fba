"""Every command README.md and docs/*.md show is run by a test, or says why it cannot be run here.

The commands are read from the documents themselves (fenced blocks and `inline code` that starts like a
command), so a new command in the docs fails this test until it is entered in COMMANDS below, and an entry
whose command left the docs fails too. Each entry is one of:

- RUN: a `labkit` command executed here, in a scratch folder with its own data folder (placeholders such as
  NAME or PROFILE replaced by real names); it must exit 0;
- PARSED + where: too slow for the README's suite or needing hardware: labkit's own parser must accept it as
  written (every subcommand and flag exists), and `where` names the test or CI step that runs it for real;
- ELSEWHERE + where: not a labkit command (a script, pip, sbatch): `where` runs it;
- NOT_RUN + why: needs what no test machine has (a GPU, two GPU machines, conda), or is shown as a warning;
- NAME: a command named in the prose (`labkit record`), not a command line: the subcommand must exist;
- TRANSCRIPT: a `$ command` block followed by its output: run from the repository root, and what it prints
  must be the lines shown (exit status 2 where the output is an error).

A `where` is (file, text): the file must exist and contain the text, so the reference cannot go stale silently.
docs/gpu-runs/ is a record of what was run on a GPU machine, not instructions: it is not read.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.tools import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: What a shown command starts with (after optional VAR=value settings).
START = re.compile(
    r"^(?:[A-Z_]+=\S+ )*(labkit [a-z-]|bash scripts/|pip install|conda |python3? |torchrun |sbatch|pytest |srun "
    r"|make |all_reduce_perf|nvbandwidth|bandwidthTest|p2pBandwidthLatencyTest)"
)

PROFILE = ROOT / "data" / "profiles" / "h100_pcie5_vm_20261123"
ISSUE290_LOG = (
    ROOT
    / "data"
    / "raw"
    / "nccl_all_reduce_perf__H100_1node_NVLS_and_2node_IB_NDR_default_vs_RING__nccltests_issue290.txt"
)
NCCL_LOG = ROOT / "tests" / "fixtures" / "logs" / "nccl_pkb_2node_k80.txt"
#: Placeholder → what the test puts there (files are copied into the scratch folder under the shown name).
PLACEHOLDERS = {
    "NAME": "h100_vm_labkit_fidelity_points",
    "PROFILE": str(PROFILE),
}
FILES = {  # shown file name → the real file copied there
    "all_reduce_perf.log": NCCL_LOG,
    "all_reduce_perf_2node.log": NCCL_LOG,
    "LOG": ISSUE290_LOG,
    "profiles/a": PROFILE,
    "profiles/b": PROFILE,
}
#: `labkit ref import PROFILE --prefix NAME`: NAME there is a prefix, not a dataset
RUN_AS = {
    "labkit ref import PROFILE --prefix NAME": ["ref", "import", str(PROFILE), "--prefix", "mynode"],
    "labkit explain LOG --system h100_ndr_8nic": [
        "explain",
        "LOG",
        "--system",
        "h100_ndr_8nic",
        "--run",
        "3",
        "--op",
        "all_reduce",
        "--nodes",
        "2",
        "--algorithm",
        "RING",
    ],  # fmt: skip  (the README's comment under the command gives these facts)
}

RUN, PARSED, ELSEWHERE, NOT_RUN, NAME, TRANSCRIPT = "run", "parsed", "elsewhere", "not run", "name", "transcript"
CI = (".ci/run", "bash scripts/test.sh")
SCRIPTS_TEST = ("tests/test_scripts.py", "def test_lab_sh_installs_once")
SLURM_TEST = ("tests/test_slurm.py", '"sbatch", "--wait"')

COMMANDS: dict[str, tuple] = {
    # --- scripts/lab.sh and scripts/test.sh: run with pip/jupyter shims; the suite itself by CI -----------
    "bash scripts/lab.sh": (ELSEWHERE, SCRIPTS_TEST),
    "bash scripts/lab.sh --port 9999 --no-browser": (ELSEWHERE, ("tests/test_scripts.py", '"--port", "9999"')),
    "LABKIT_TORCH_INDEX=https://download.pytorch.org/whl/cpu bash scripts/lab.sh": (
        ELSEWHERE,
        ("tests/test_scripts.py", "LABKIT_TORCH_INDEX=index"),
    ),
    "bash scripts/test.sh": (ELSEWHERE, CI),
    "LABKIT_TORCH_SPEC='torch==2.13.0' bash scripts/test.sh": (ELSEWHERE, (".ci/run", 'LABKIT_TORCH_SPEC="${')),
    "bash scripts/test.sh -k nb05": (ELSEWHERE, ("tests/test_scripts.py", '"test.sh", "-k", "nb05"')),
    "python3 -m venv": (ELSEWHERE, ("tests/test_scripts.py", "python3 -m venv .venv")),
    "pip install -e .": (ELSEWHERE, ("tests/test_scripts.py", "pip install -q -e .[lab,run]")),
    "bash scripts/gpu_check.sh OUT_DIR": (NOT_RUN, "needs an NVIDIA GPU (it runs pytest -m gpu and the GPU benches)"),
    "pytest -m gpu": (NOT_RUN, "needs an NVIDIA GPU"),
    "pytest -m install": (ELSEWHERE, (".ci/run", "pytest -q -m install")),
    # the website: CI installs the extra and builds it; the browser test serves it with the same http.server
    "pip install -e '.[site]'": (ELSEWHERE, (".ci/run", "pip install -q -e '.[site]'")),
    "python -m http.server -d site": (ELSEWHERE, ("tests/site_checks.py", "http.server.SimpleHTTPRequestHandler")),
    # --- installs ------------------------------------------------------------------------------------------
    'pip install "labkit-workbook @ git+https://github.com/labkit-workbook/labkit"': (
        ELSEWHERE,
        ("tests/test_reach.py", "test_the_install_cell_is_a_no_op_off_colab_and_pip_installs_on_colab"),
    ),
    'pip install "labkit-workbook[lab,run] @ git+https://github.com/labkit-workbook/labkit"': (
        ELSEWHERE,
        ("tests/test_install.py", "git+"),
    ),
    "pip install labkit": (NOT_RUN, "shown as the warning: it installs an unrelated PyPI project"),
    # the measuring tools themselves, on the user's GPUs
    "all_reduce_perf -b 8 -e 8G -f 2 -g 1": (NOT_RUN, "nccl-tests on GPUs; its published logs are tests/fixtures/logs"),
    "all_reduce_perf": (NOT_RUN, "nccl-tests on GPUs"),
    "nvbandwidth": (NOT_RUN, "needs NVIDIA GPUs; its published outputs are tests/fixtures/logs"),
    "nvbandwidth --json": (NOT_RUN, "needs NVIDIA GPUs"),
    "bandwidthTest": (NOT_RUN, "cuda-samples on a GPU; its published outputs are tests/fixtures/logs"),
    "p2pBandwidthLatencyTest": (NOT_RUN, "cuda-samples on two or more GPUs"),
    "make MPI=1": (NOT_RUN, "builds nccl-tests with MPI (CUDA and MPI needed)"),
    "conda env create -f environment.yml": (
        NOT_RUN,
        "needs conda (not on the test machines); its CPU index and +cpu pin are checked by tests/test_reach.py",
    ),
    # --- the cluster ---------------------------------------------------------------------------------------
    "sbatch": (ELSEWHERE, SLURM_TEST),
    "sbatch --wait": (ELSEWHERE, SLURM_TEST),
    "sbatch labkit-collectives.sbatch": (ELSEWHERE, SLURM_TEST),
    "srun --cpus-per-task": (ELSEWHERE, SLURM_TEST),
    "torchrun --nnodes 2 --nproc-per-node 8 --node-rank 0 --rdzv-backend c10d --rdzv-endpoint node0:29500 "
    "--rdzv-id colls1 -m labkit bench collectives --collective all -b 8 -e 8G -f 2": (
        NOT_RUN,
        "needs two machines with 8 GPUs; tests/test_collectives_torchrun.py runs the same torchrun line with two "
        "agents on one machine (gloo, small sizes)",
    ),
    'python -c "from labkit import reference; print(reference.user_data_dir())"': (RUN, None),
    # --- labkit: run here ----------------------------------------------------------------------------------
    "labkit doctor": (RUN, None),
    "labkit ref list": (RUN, None),
    "labkit ref show NAME": (RUN, None),
    "labkit ref profiles": (RUN, None),
    "labkit ref import PROFILE --prefix NAME": (RUN, None),
    "labkit ref import-log all_reduce_perf.log --name ourcluster_2node": (RUN, None),
    'labkit ref import-log all_reduce_perf_2node.log --name ourcluster_2node --system "2x DGX H100, 8x NDR per '
    'node" --source "our cluster, 2026-11-20"': (RUN, None),
    "labkit model --size 14GB --gpus 8 --bandwidth 450": (RUN, None),
    "labkit model --size 8GiB --gpus 16 --nodes 2 --bandwidth 450 --nic-bandwidth 50 --nics-per-node 8 --json": (
        RUN,
        None,
    ),
    "labkit explain --list-systems": (RUN, None),
    # `$ command` blocks with their output: run, and the output compared line by line (TRANSCRIPTS below)
    "labkit explain data/raw/nccl_all_reduce_perf__H100_1node_NVLS_and_2node_IB_NDR_default_vs_RING__nccltests_issue290.txt "
    "--run 3 --op all_reduce --nodes 2 --algorithm RING --system h100_ndr_8nic": (TRANSCRIPT, None),
    "labkit explain data/raw/nccl_all_reduce_perf__2node_16xA100_p4d_EFA400__awsefaeks.txt --op all_reduce "
    "--nic-bandwidth 12.5 --nics-per-node 4": (TRANSCRIPT, None),
    "labkit explain data/raw/nccl_all_reduce_perf__2node_16xA100_p4d_EFA400__awsefaeks.txt --op all_reduce --nodes 4 "
    "--nic-bandwidth 12.5 --nics-per-node 4": (TRANSCRIPT, None),
    "labkit explain LOG --system h100_ndr_8nic": (RUN, None),
    "labkit explain nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290 --system h100_ndr_8nic": (RUN, None),
    # 20 s each here on a busy 2-core machine: run, with the same flags, by their own tests
    "labkit compare profiles/a profiles/b --plot cmp.png": (
        PARSED,
        ("tests/test_compare.py", '"compare", *two_profiles, "--json", "--plot"'),
    ),
    "labkit student --out student/": (PARSED, ("tests/test_student.py", 'cli.main(["student", "--out"')),
    "labkit notebooks --out my-notebooks/": (RUN, None),
    # --- labkit: parsed here, run where named --------------------------------------------------------------
    "labkit bench copy --json": (NOT_RUN, "needs an NVIDIA GPU (without one it says so and exits 2)"),
    "labkit bench fidelity --json": (NOT_RUN, "needs an NVIDIA GPU"),
    "labkit bench allreduce --backend gloo --ranks 4 --sizes 4MiB,64MiB --impl ring,library --json": (
        PARSED,
        ("tests/test_cli.py", '"allreduce"'),  # 33 s with 4 ranks on 2 cores: the test uses smaller sizes
    ),
    "labkit bench collectives --ranks 4": (PARSED, ("tests/test_collectives_torchrun.py", "collectives")),
    "labkit bench collectives --collective all --ranks 4": (
        PARSED,
        ("tests/test_collectives_torchrun.py", '"--collective", "all"'),
    ),
    "labkit bench soak": (PARSED, ("tests/test_soak.py", "soak")),
    "labkit record --out profiles/mynode": (PARSED, ("tests/test_record.py", "record")),  # 81 s on 2 cores
    "labkit record --out profiles/ournode": (PARSED, ("tests/test_record.py", "record")),
    "labkit run --mode reference --quick --html": (PARSED, ("tests/test_run_html.py", "html")),
    "labkit site --out site/": (PARSED, (".ci/run", "labkit site --out")),
    "labkit ref import-log FILE --name NAME": (PARSED, ("tests/test_import_log.py", '"import-log"')),
    # names of commands in the prose, not command lines: the subcommand must exist (`--help` exits 0)
    "labkit explain": (NAME, None),
    "labkit explain LOG": (NAME, None),
    "labkit bench": (NAME, None),
    "labkit record": (NAME, None),
    "labkit bench collectives": (NAME, None),
    "labkit bench allreduce": (NAME, None),
    "labkit bench fidelity": (NAME, None),
    "labkit ref import-log": (NAME, None),
}


def shown_commands() -> dict[str, list[str]]:
    """{command as shown: [documents showing it]} from fenced blocks and inline code of README.md and docs/*.md."""
    found: dict[str, list[str]] = {}

    def add(cmd: str, where: str) -> None:
        cmd = re.sub(r"\s+", " ", cmd).strip().removeprefix("$ ")  # a shell prompt before a command
        if START.match(cmd) and ": error:" not in cmd:  # an error message quoted in the docs is output
            found.setdefault(cmd, []).append(where)

    for path in DOCS:
        name = str(path.relative_to(ROOT))
        text = path.read_text()
        for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if lang == "python" or body.startswith("#!"):
                continue  # code and scripts: DOC_BLOCKS below
            for line in body.replace("\\\n", " ").splitlines():
                line = re.sub(r"(^|\s)#.*$", "", line)
                for part in line.split(" | "):  # the README lists alternatives on one line with " | "
                    add(part, name)
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for code in re.findall(r"`([^`]+)`", prose):
            add(code, name)
    return found


#: Fenced blocks that are scripts or Python, by document and first line: where each is run.
DOC_BLOCKS = {
    ("docs/measure-your-cluster.md", "#!/bin/bash"): SLURM_TEST,
    ("docs/measure-your-cluster.md", "from labkit.logs import parse_log"): (
        "tests/test_collectives_torchrun.py",
        "parse_log(",
    ),
    ("docs/bring-your-own-logs.md", 'reference = "logs/all_reduce_perf_2node.log"'): (
        "tests/test_import_log.py",
        "reference=",
    ),
}


def _check_where(where) -> None:
    path, text = where
    assert (ROOT / path).exists(), f"{path} does not exist"
    assert text in (ROOT / path).read_text(), f"{path} does not contain {text!r}"


def test_every_shown_command_is_listed_and_every_listed_command_is_shown():
    shown = shown_commands()
    unlisted = {c: w for c, w in shown.items() if c not in COMMANDS}
    assert not unlisted, f"commands in the docs that no test runs: add them to COMMANDS: {unlisted}"
    stale = sorted(set(COMMANDS) - set(shown))
    assert not stale, f"COMMANDS entries no document shows any more: {stale}"


def test_every_script_and_code_block_is_run_somewhere():
    blocks = []
    for path in DOCS:
        name = str(path.relative_to(ROOT))
        for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), re.S | re.M):
            if lang == "python" or body.startswith("#!"):
                blocks.append((name, body.splitlines()[0].split("   #")[0].strip()))
    assert sorted(blocks) == sorted(DOC_BLOCKS), "a script or Python block was added or removed: update DOC_BLOCKS"
    for where in DOC_BLOCKS.values():
        _check_where(where)


@pytest.mark.parametrize("cmd", sorted(c for c, (kind, _) in COMMANDS.items() if kind in (PARSED, ELSEWHERE)))
def test_commands_run_elsewhere_name_a_place_that_runs_them(cmd):
    kind, where = COMMANDS[cmd]
    _check_where(where)
    if kind == PARSED:
        cli.build_parser().parse_args(_argv(cmd))  # argparse exits 2 on an unknown subcommand or flag


def test_labkit_commands_not_run_here_are_still_accepted_by_the_parser():
    for cmd, (kind, why) in COMMANDS.items():
        assert kind != NOT_RUN or why, cmd
        if kind == NOT_RUN and cmd.startswith("labkit "):
            cli.build_parser().parse_args(_argv(cmd))


@pytest.mark.parametrize("cmd", sorted(c for c, (kind, _) in COMMANDS.items() if kind == NAME))
def test_commands_named_in_the_prose_exist(cmd, capsys):
    argv = [
        a for a in _argv(cmd) if a.isascii() and a.islower() or a.startswith("-")
    ]  # `labkit explain LOG`: LOG is prose
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args([*argv, "--help"])
    assert e.value.code == 0, cmd


def _argv(cmd: str) -> list[str]:
    import shlex

    return shlex.split(cmd)[1:]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "data"))
    for shown, real in FILES.items():
        dest = tmp_path / shown
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if real.is_dir() else shutil.copy)(real, dest)
    return tmp_path


@pytest.mark.parametrize("cmd", sorted(c for c, (kind, _) in COMMANDS.items() if kind == RUN))
def test_shown_commands_run(cmd, scratch, capsys):
    if cmd.startswith("python "):
        argv = _argv(cmd)
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and str(scratch / "data") in r.stdout, r.stderr
        return
    argv = RUN_AS.get(cmd) or [PLACEHOLDERS.get(a, a) for a in _argv(cmd)]
    code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, f"{cmd} exited {code}:\n{out.out[-2000:]}\n{out.err[-2000:]}"
    for shown in README_OUTPUT.get(cmd, ()):
        assert shown in out.out, f"the README says `{cmd}` prints {shown!r}; it printed:\n{out.out}"


def _readme_output(cmd: str) -> list[str]:
    """The README's "actual output:" comment lines under a command, each cut at its '...'."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(
        (i for i, ln in enumerate(lines) if ln.startswith(cmd + " ")), len(lines)
    )  # gone: the stale check says so
    out, started = [], False
    for ln in lines[start + 1 :]:
        if not ln.startswith("#"):
            break
        if started:
            out.append(ln.lstrip("# ").split("...")[0].rstrip())
        started = started or "actual output:" in ln
    return out


#: Commands whose output the README quotes in comments under them.
README_OUTPUT = {
    "labkit explain LOG --system h100_ndr_8nic": _readme_output("labkit explain LOG --system h100_ndr_8nic")
}


def transcripts() -> list[tuple[str, str, list[str]]]:
    """(document, command, output lines) of every fenced block that starts with `$ `."""
    out = []
    for path in DOCS:
        for _, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), re.S | re.M):
            if body.startswith("$ "):
                lines = body.splitlines()
                n = 1
                while lines[n - 1].endswith("\\"):
                    n += 1
                cmd = re.sub(r"\s+", " ", " ".join(ln.rstrip("\\") for ln in lines[:n])).removeprefix("$ ").strip()
                out.append((str(path.relative_to(ROOT)), cmd, lines[n:]))
    return out


def test_every_transcript_is_a_listed_command():
    assert sorted(c for _, c, _ in transcripts()) == sorted(c for c, (k, _) in COMMANDS.items() if k == TRANSCRIPT)


@pytest.mark.parametrize("doc,cmd,shown", transcripts(), ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "")
def test_transcripts_print_what_the_docs_show(doc, cmd, shown, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = cli.main(_argv(cmd))
    out = capsys.readouterr()
    printed = (out.out + out.err).rstrip("\n").splitlines()
    assert code == (2 if any(": error:" in ln for ln in shown) else 0), f"{cmd}: exit {code}"
    assert [ln.rstrip() for ln in printed] == [ln.rstrip() for ln in shown], f"{doc}: `{cmd}` prints otherwise"


#: A path into the repository as the docs write it (optionally `::test_name`).
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:tests|data|docs|scripts|labkit|notebooks|binder|\.ci)/[\w./-]*[\w/])(?:::(\w+))?"
)


def test_every_repository_path_the_docs_name_exists():
    missing = []
    for doc in [*DOCS, ROOT / "binder" / "README.md"]:
        for m in REPO_PATH.finditer(doc.read_text()):
            path, func = m.group(1), m.group(2)
            candidates = [ROOT / path, doc.parent / path, ROOT / (path.rsplit(".", 1)[0] + ".py")]  # module.NAME
            found = next((p for p in candidates if p.exists()), None)
            if found is None:
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
            elif func and f"def {func}(" not in found.read_text():
                missing.append(f"{doc.relative_to(ROOT)}: {path}::{func}")
    assert not missing, f"paths the docs name that do not exist: {missing}"
