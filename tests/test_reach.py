"""Where the workbook runs: the Colab install cell, the README's badges, `labkit notebooks`, the package files.

All of them follow the repository URL in pyproject.toml ([project.urls].Repository), so publishing the
repository somewhere else is one edit there plus the cells and badges these tests point at.
"""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labkit.tools import cli, notebooks

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = (ROOT / "pyproject.toml").read_text()  # read with re: tomllib is not in Python 3.10
REPO = re.search(r'^Repository = "([^"]+)"', PYPROJECT, re.M).group(1)
REPO_PATH = REPO.removeprefix("https://github.com/")
DIST = re.search(r'^name = "([^"]+)"', PYPROJECT, re.M).group(1)
TORCH_RANGE = re.search(r'^\s*"(torch[^"]*)"', PYPROJECT, re.M).group(1)


def _install_cell(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return code, next(c for c in code if "colab-install" in c.metadata.get("tags", []))


@pytest.mark.parametrize("path", notebooks.available(), ids=lambda p: p.stem)
def test_every_notebook_installs_labkit_on_colab_right_after_its_parameters(path):
    code, cell = _install_cell(path)
    assert code.index(cell) == 1, "the install cell must run before labkit is imported"
    assert f"{DIST} @ git+{REPO}" in cell.source
    first = _install_cell(notebooks.available()[0])[1].source
    assert cell.source == first, "every notebook's install cell is the same"


def _run_cell(source, monkeypatch, on_colab: bool):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(source, "install-cell", "exec"), {})
    return calls


def test_the_install_cell_is_a_no_op_off_colab_and_pip_installs_on_colab(monkeypatch):
    source = _install_cell(notebooks.available()[0])[1].source
    assert _run_cell(source, monkeypatch, on_colab=False) == []
    ((cmd, kw),) = _run_cell(source, monkeypatch, on_colab=True)
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"] and cmd[-1] == f"{DIST} @ git+{REPO}"
    assert kw.get("check") is True, "a failed install must stop the notebook, not fail later on import"


def test_readme_has_a_colab_badge_per_notebook_and_a_binder_badge():
    readme = (ROOT / "README.md").read_text()
    for path in notebooks.available():
        url = f"https://colab.research.google.com/github/{REPO_PATH}/blob/main/notebooks/{path.name}"
        assert url in readme, f"no Colab badge for {path.name}"
    assert f"https://mybinder.org/v2/gh/{REPO_PATH}/main?urlpath=lab/tree/notebooks" in readme
    # `pip install labkit` appears only in the warning against the unrelated PyPI package
    wrong = [ln for ln in readme.splitlines() if re.search(r"pip install labkit(?![-\w])", ln)]
    assert wrong and all("something else" in ln for ln in wrong), wrong
    # the two fresh-clone commands stay first
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    assert "scripts/lab.sh" in first_block and "scripts/test.sh" in first_block


def test_binder_and_conda_take_the_cpu_build_of_torch():
    reqs = (ROOT / "binder" / "requirements.txt").read_text()
    assert "--index-url https://download.pytorch.org/whl/cpu" in reqs
    assert TORCH_RANGE in reqs, "binder's torch line must be pyproject's range"
    env = (ROOT / "environment.yml").read_text()
    assert "download.pytorch.org/whl/cpu" in env and "+cpu" in env
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


def test_package_files_name_their_licences():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    notice = (ROOT / "NOTICE").read_text()
    shipped = {p.name.removesuffix(".meta.json") for p in (ROOT / "data").glob("*.meta.json")}
    own = {n for n in shipped if n.startswith("h100_vm_labkit_")}
    missing = sorted(n for n in shipped - own if n not in notice)
    assert not missing, f"datasets without a NOTICE entry: {missing}"


def test_labkit_notebooks_copies_the_six_and_never_overwrites_silently(tmp_path, capsys):
    assert cli.main(["notebooks", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == sorted(p.name for p in notebooks.available())
    (tmp_path / "01_pcie_latency_curve.ipynb").write_text("my work")
    assert cli.main(["notebooks", "--out", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "01_pcie_latency_curve.ipynb").read_text() == "my work"
    assert cli.main(["notebooks", "--out", str(tmp_path), "--force"]) == 0


def test_running_notebooks_without_the_run_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "papermill", None)  # as if not installed
    with pytest.raises(RuntimeError, match=r"labkit-workbook\[run\]"):
        notebooks.require_executor()


def test_python_dash_m_labkit_is_the_command():
    out = subprocess.run([sys.executable, "-m", "labkit", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("labkit ")
