"""Installs as a user would make them, each in a fresh virtual environment: from a built wheel, from a git
URL, by the Binder recipe, and with the lowest ipywidgets/ipykernel labkit supports (what Colab ships).

These take minutes (each builds a venv and installs JupyterLab's stack from the package index), so they
are not part of the README's test command; CI runs them after it (`.ci/run`: `pytest -m install`).
torch is taken as `torch==2.13.0`, the CPU build on the CI/dev machines' disk; on Binder the same place is
filled by the PyTorch CPU index, which these machines cannot reach.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TORCH = os.environ.get("LABKIT_TORCH_SPEC", "torch==2.13.0")
# The lowest versions labkit declares (pyproject.toml): Colab's preinstalled ipywidgets is 7.7.x.
LOWEST = ["ipywidgets==7.7.1", "ipykernel==6.5.0"]
STEP_TIMEOUT_S = 900

pytestmark = [pytest.mark.install, pytest.mark.slow]


def _run(cmd, cwd=None, env=None, timeout=STEP_TIMEOUT_S) -> str:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return r.stdout


class Venv:
    def __init__(self, path: Path):
        self.path = path
        _run([sys.executable, "-m", "venv", path])
        self.python = path / "bin" / "python"
        self.pip("install", "-q", "--upgrade", "pip")

    def pip(self, *args) -> str:
        return _run([self.python, "-m", "pip", *args])

    def env(self, **extra) -> dict:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LABKIT_", "PYTEST", "VIRTUAL_ENV", "PYTHONPATH", "JUPYTER"))
        }
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        return {**env, **extra}

    def run(self, *cmd, cwd=None, **env) -> str:
        return _run(cmd, cwd=cwd, env=self.env(**env))


def _check_installed(venv: Venv, tmp: Path, data_home: Path) -> None:
    """The command, the data, the notebooks, python -m labkit, and one notebook executed headless."""
    tmp.mkdir(parents=True, exist_ok=True)
    out = venv.run("labkit", "--version", cwd=tmp)
    assert out.startswith("labkit "), out
    assert venv.run(venv.python, "-m", "labkit", "--version", cwd=tmp) == out
    where = venv.run(
        venv.python,
        "-c",
        "import labkit, labkit.reference as r; print(labkit.__file__);"
        "print(len(r.list_datasets())); print(r.data_dir())",
        cwd=tmp,
    ).split()
    assert where[0].startswith(str(venv.path)), f"imported {where[0]}, not the installed copy"
    assert int(where[1]) >= 50 and where[2].startswith(str(venv.path))
    nbs = tmp / "my-notebooks"
    venv.run("labkit", "notebooks", "--out", nbs, cwd=tmp)
    assert len(list(nbs.glob("*.ipynb"))) == 6
    venv.run(
        "labkit",
        "run",
        "--mode",
        "reference",
        "--quick",
        "--out",
        tmp / "run",
        "05",
        cwd=tmp,
        LABKIT_DATA=str(data_home),
    )
    results = json.loads((tmp / "run" / "05_ring_allreduce_by_hand.results.json").read_text())
    assert results["all_checks_passed"], results["checks"]


def test_wheel_and_git_url_installs_give_a_working_labkit(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, ROOT])
    (wheel,) = dist.glob("labkit_workbook-*.whl")
    venv = Venv(tmp_path / "venv")
    venv.pip("install", "-q", TORCH)
    venv.pip("install", "-q", f"{wheel}[run]")
    _check_installed(venv, tmp_path / "wheel", tmp_path / "data-home")

    # the same from a git URL (a clone of this checkout's HEAD: what `pip install git+https://…` fetches)
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", ROOT, clone])
    venv.pip("uninstall", "-y", "-q", "labkit-workbook")
    venv.pip("install", "-q", f"labkit-workbook[run] @ git+file://{clone}")
    _check_installed(venv, tmp_path / "git", tmp_path / "data-home")


def test_binder_recipe_builds_and_runs_a_notebook(tmp_path):
    venv = Venv(tmp_path / "venv")
    # binder/requirements.txt: only torch, from the CPU index (here: the CPU build on disk)
    reqs = [ln.split("#")[0].strip() for ln in (ROOT / "binder" / "requirements.txt").read_text().splitlines()]
    assert "--index-url https://download.pytorch.org/whl/cpu" in reqs
    assert [r for r in reqs if r and not r.startswith("--")] == ["torch>=2.1,<3"]
    venv.pip("install", "-q", TORCH)
    clone = tmp_path / "repo"
    _run(["git", "clone", "-q", ROOT, clone])
    venv.run("bash", clone / "binder" / "postBuild", cwd=clone)
    torch_build = venv.run(venv.python, "-c", "import torch; print(torch.__version__, torch.version.cuda)")
    assert torch_build.split()[1] == "None", f"a CUDA build of torch came in: {torch_build}"
    assert "jupyterlab" in venv.pip("list")
    # Binder runs the notebooks in JupyterLab; its own nbconvert (a JupyterLab dependency) executes one here
    venv.run(
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        "--ExecutePreprocessor.timeout=600",
        "--output-dir",
        tmp_path,
        clone / "notebooks" / "01_pcie_latency_curve.ipynb",
        cwd=clone / "notebooks",
    )
    assert (tmp_path / "01_pcie_latency_curve.ipynb").stat().st_size > 0


def test_lowest_supported_widget_and_kernel_versions(tmp_path):
    """Colab preinstalls ipywidgets 7.7: labkit's widgets, its headless detection and a notebook work there."""
    venv = Venv(tmp_path / "venv")
    venv.pip("install", "-q", TORCH)
    venv.pip("install", "-q", f"{ROOT}[run]", *LOWEST)
    got = venv.run(
        venv.python, "-c", "import ipywidgets, ipykernel; print(ipywidgets.__version__, ipykernel.__version__)"
    )
    assert got.split() == [v.split("==")[1] for v in LOWEST], got
    shutil.copytree(ROOT / "tests", tmp_path / "tests")
    venv.pip("install", "-q", "pytest")
    venv.run(
        venv.python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        tmp_path / "tests" / "test_widgets.py",
        cwd=tmp_path,
        MPLBACKEND="Agg",
    )
    for nb in ("01_pcie_latency_curve", "04_p2p_matrix"):  # two of the notebooks with widgets
        venv.run(
            "papermill",
            ROOT / "notebooks" / f"{nb}.ipynb",
            tmp_path / f"{nb}.ipynb",
            "-p",
            "mode",
            "reference",
            "-p",
            "quick",
            "True",
            "--kernel",
            "python3",
            "--execution-timeout",
            "600",
            cwd=ROOT / "notebooks",
        )
