"""Shared fixtures: notebook execution in reference mode, GPU detection, headless widgets."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LABKIT_HEADLESS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


def _cuda_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    n = _cuda_count()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none visible to torch)")
    skip_multi = pytest.mark.skip(reason=f"needs two or more CUDA GPUs (this machine has {n})")
    for item in items:
        if "gpu" in item.keywords and n < 1:
            item.add_marker(skip_gpu)
        if "multigpu" in item.keywords and n < 2:
            item.add_marker(skip_multi)


def pytest_terminal_summary(terminalreporter):
    """Print what tests recorded under "labkit_summary" (record_property): a test's measured summary line
    reaches the end of the output even from a pytest-xdist worker, where print() goes nowhere."""
    lines = []
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            if getattr(report, "when", "call") == "call":
                lines += [v for k, v in getattr(report, "user_properties", []) if k == "labkit_summary"]
    if lines:
        terminalreporter.section("labkit summaries")
        for line in sorted(lines):
            terminalreporter.write_line(line)


@pytest.fixture
def run_nb(tmp_path):
    """Execute a notebook with papermill; return its results JSON (fails the test on any cell error)."""
    from labkit.notebooks import find_notebook, run_notebook

    def _run(name: str, mode: str = "reference", quick: bool = True, reference=None, **extra):
        r = run_notebook(find_notebook(name), tmp_path, mode=mode, quick=quick, reference=reference,
                         timeout=600, extra_parameters=extra or None)
        assert r["ok"], f"{name} failed: {r['error']} (executed copy: {r['output']})"
        assert r["results"], f"{name} wrote no results JSON"
        with open(r["results"]) as f:
            data = json.load(f)
        data["_executed"] = r["output"]
        data["_seconds"] = r["seconds"]
        return data

    return _run
