"""scripts/lab.sh and scripts/test.sh: install once, then start offline; arguments reach JupyterLab / pytest; root.

Each test copies the two scripts, scripts/venv.sh and pyproject.toml into a folder of its own whose .venv holds
shims: `python` logs every call and, with FAIL_PIP=1, fails any `python -m pip` (as pip fails offline);
`jupyter` logs its arguments. The real .venv is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIM = """#!/bin/sh
echo "$(basename "$0") $*" >> "$CALLS"
if [ "$1 $2" = "-m pip" ] && [ "${FAIL_PIP:-0}" = 1 ]; then echo "pip: no network" >&2; exit 1; fi
exit 0
"""
IS_ROOT = os.geteuid() == 0


def _make_repo(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    for name in ("lab.sh", "test.sh", "venv.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "notebooks").mkdir()
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name in ("python", "jupyter", "jupyter-lab", "pytest"):
        (bin_ / name).write_text(SHIM)
        (bin_ / name).chmod(0o755)
    return tmp_path


@pytest.fixture
def repo(tmp_path):
    return _make_repo(tmp_path)


def run(repo, script, *args, user=None, **env):
    calls = repo / "calls.log"
    calls.write_text("")
    calls.chmod(0o666)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LABKIT_")}
    full_env.update(CALLS=str(calls), **env)
    cmd = ["bash", str(repo / "scripts" / script), *args]
    if user is not None:  # root runs it as another user: setpriv from util-linux
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=60)
    return r, calls.read_text().splitlines()


def pip_calls(calls):
    return [c for c in calls if c.startswith("python -m pip")]


def test_lab_sh_installs_once_then_starts_offline_and_passes_its_arguments_to_jupyterlab(repo):
    r, calls = run(repo, "lab.sh", "--port", "9999", "--no-browser")
    assert r.returncode == 0, r.stderr
    assert "python -m pip install -q -e .[lab,run]" in calls, calls
    assert "needs the network" in r.stderr
    # installed: a second start calls no pip at all, so pip failing (no network) does not matter
    r, calls = run(repo, "lab.sh", "--port", "9999", "--no-browser", FAIL_PIP="1")
    assert r.returncode == 0, r.stderr
    assert pip_calls(calls) == [], calls
    (jupyter,) = [c for c in calls if c.startswith("jupyter ")]
    assert jupyter.startswith("jupyter lab --ServerApp.ip=127.0.0.1 --notebook-dir=notebooks --port 9999 --no-browser")


def test_lab_sh_reinstalls_when_pyproject_changes_or_when_asked(repo):
    assert run(repo, "lab.sh")[0].returncode == 0
    assert pip_calls(run(repo, "lab.sh")[1]) == []
    with (repo / "pyproject.toml").open("a") as f:
        f.write("\n# changed\n")
    assert pip_calls(run(repo, "lab.sh")[1]), "pyproject.toml changed: it must reinstall"
    assert pip_calls(run(repo, "lab.sh")[1]) == []
    assert pip_calls(run(repo, "lab.sh", LABKIT_REINSTALL="1")[1])
    r, calls = run(repo, "lab.sh", "--reinstall", "--no-browser")
    assert pip_calls(calls) and "--reinstall" not in [c for c in calls if c.startswith("jupyter ")][0]
    # a failed install says so and starts nothing; the next start tries again
    r, calls = run(repo, "lab.sh", "--reinstall", FAIL_PIP="1")
    assert r.returncode != 0 and not [c for c in calls if c.startswith("jupyter ")]
    r, calls = run(repo, "lab.sh", FAIL_PIP="1")
    assert r.returncode != 0 and pip_calls(calls), "after a failed install the stamp must not claim success"


def test_the_torch_build_comes_first_from_the_spec_or_the_index_and_changes_the_stamp(repo):
    r, calls = run(repo, "lab.sh", LABKIT_TORCH_SPEC="torch==2.13.0")
    assert pip_calls(calls)[:2] == ["python -m pip install -q torch==2.13.0", "python -m pip install -q -e .[lab,run]"]
    index = "https://download.pytorch.org/whl/cpu"
    r, calls = run(repo, "lab.sh", LABKIT_TORCH_INDEX=index)  # another torch choice: installs again
    assert pip_calls(calls)[0] == f"python -m pip install -q --index-url {index} torch>=2.1,<3", calls
    r, calls = run(repo, "lab.sh", LABKIT_TORCH_INDEX=index, LABKIT_TORCH_SPEC="torch==2.13.0+cpu")
    assert pip_calls(calls)[0] == f"python -m pip install -q --index-url {index} torch==2.13.0+cpu", calls
    assert pip_calls(run(repo, "lab.sh", LABKIT_TORCH_INDEX=index, LABKIT_TORCH_SPEC="torch==2.13.0+cpu")[1]) == []


def _jupyter_args(calls):
    return [c for c in calls if c.startswith("jupyter ")][0].split()


@pytest.mark.skipif(not IS_ROOT, reason="runs lab.sh as root")
def test_lab_sh_as_root_adds_allow_root_and_says_why(repo):
    r, calls = run(repo, "lab.sh")
    assert "--allow-root" in _jupyter_args(calls)
    assert "running as root" in r.stderr and "--allow-root" in r.stderr
    r, calls = run(repo, "lab.sh", "--allow-root")  # given once by the user: not twice
    assert _jupyter_args(calls).count("--allow-root") == 1


@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_lab_sh_as_a_user_adds_nothing():
    base = Path(tempfile.mkdtemp(prefix="labkit-lab-sh-"))  # pytest's tmp_path is private to root
    try:
        os.chmod(base, 0o755)
        repo = _make_repo(base)
        os.chmod(repo / ".venv", 0o777)  # the install stamp is written by that user
        r, calls = run(repo, "lab.sh", user=65534)
    finally:
        shutil.rmtree(base)
    assert r.returncode == 0, r.stderr
    assert "--allow-root" not in _jupyter_args(calls) and "root" not in r.stderr


def test_test_sh_installs_once_then_runs_offline_and_passes_its_arguments_to_pytest(repo):
    r, calls = run(repo, "test.sh", "-k", "nb05")
    assert r.returncode == 0, r.stderr
    assert "python -m pip install -q -e .[test,lab,browser]" in calls
    r, calls = run(repo, "test.sh", "-k", "nb05", FAIL_PIP="1", LABKIT_TEST_WORKERS="0")
    assert r.returncode == 0, r.stderr
    assert pip_calls(calls) == [] and calls[-1] == "python -m pytest -q -k nb05"
    r, calls = run(repo, "test.sh", FAIL_PIP="1", LABKIT_TEST_WORKERS="3")
    assert calls[-1] == "python -m pytest -q -n 3 --dist loadfile"


def test_a_fresh_clone_creates_the_venv(repo, tmp_path):
    """No .venv yet (CI's fresh clone): the scripts create it with $PYTHON -m venv, then install."""
    shutil.rmtree(repo / ".venv")
    fake = tmp_path / "fakepython"
    fake.write_text(
        '#!/bin/sh\necho "python3 $*" >> "$CALLS"\n'
        'if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$SHIM_SRC" "$3/bin/python"; '
        'cp "$SHIM_SRC" "$3/bin/pytest"; fi\n'
    )
    fake.chmod(0o755)
    shim = tmp_path / "shim"
    shim.write_text(SHIM)
    shim.chmod(0o755)
    r, calls = run(repo, "test.sh", PYTHON=str(fake), SHIM_SRC=str(shim), LABKIT_TEST_WORKERS="0")
    assert r.returncode == 0, r.stderr
    assert calls[0] == "python3 -m venv .venv"
    assert calls[1] == "python -m pip install -q --upgrade pip"
    assert "python -m pip install -q -e .[test,lab,browser]" in calls


@pytest.mark.install
@pytest.mark.slow
def test_lab_sh_for_real_installs_once_then_starts_with_the_package_index_unreachable(tmp_path):
    """A clone of HEAD, a real .venv: the first start installs (CI's torch, the package index); the second
    starts JupyterLab (`--version`) with pip pointed at an address where nothing listens."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABKIT_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env["LABKIT_TORCH_SPEC"] = os.environ.get("LABKIT_TORCH_SPEC", "torch==2.13.0")
    first = subprocess.run(
        ["bash", "scripts/lab.sh", "--version"], cwd=clone, env=env, capture_output=True, text=True, timeout=1200
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert "installing into .venv" in first.stderr and re.match(r"\d+\.\d+", first.stdout.strip()), first.stdout
    offline = {**env, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0"}
    second = subprocess.run(
        ["bash", "scripts/lab.sh", "--version"], cwd=clone, env=offline, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout == first.stdout and "installing" not in second.stderr
    assert ("running as root" in second.stderr) == IS_ROOT
