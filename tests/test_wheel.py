"""A wheel (non-editable) install finds the reference data and the notebooks."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_install_finds_data_and_notebooks(tmp_path):
    wheels = tmp_path / "wheels"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = wheels.glob("labkit_workbook-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("labkit/_data/") and n.endswith(".meta.json") for n in names)
    assert any(n.startswith("labkit/_notebooks/") and n.endswith(".ipynb") for n in names)
    assert "labkit/cluster/presets.csv" in names  # the presets table is package data
    site = tmp_path / "site"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    code = (
        "import labkit, labkit.reference as r, labkit.tools.notebooks as nb;"
        "print(labkit.__file__); print(len(r.list_datasets())); print(r.data_dir()); print(len(nb.available()));"
        "[r.load(n) for n in r.list_datasets()]"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    where, count, data, nbs = r.stdout.split()
    assert where.startswith(str(site)), "imported the source tree instead of the wheel"
    assert data.startswith(str(site)) and int(count) >= 10 and int(nbs) >= 1
