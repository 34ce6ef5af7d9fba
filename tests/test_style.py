"""The code stays as ruff lints and formats it (configuration: [tool.ruff] in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"])
def test_ruff_is_clean(args):
    r = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"ruff {' '.join(args)} (run it to see or fix):\n{r.stdout[-4000:]}{r.stderr[-2000:]}"
