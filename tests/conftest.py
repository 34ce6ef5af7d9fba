"""Shared fixtures: notebook execution in reference mode, GPU detection.

No LABKIT_HEADLESS here: the notebooks' kernels must find out by themselves that no front end listens
(labkit.widgets.frontend_listening), as they do under any executor a user runs."""

from __future__ import annotations

import json
import os
import time

import pytest

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
    """Execute a notebook with the `papermill` command in a clean environment (tests/executors.py); return its
    results JSON. Fails the test on any cell error, and on a run that does not end (a hang)."""
    from executors import papermill_cli

    from labkit.tools.notebooks import find_notebook

    def _run(name: str, mode: str = "reference", quick: bool = True, reference=None, **extra):
        results = tmp_path / f"{name}.results.json"
        params = {
            "mode": mode,
            "quick": quick,
            "reference": None if reference is None else str(reference),
            "results_path": str(results),
            **extra,
        }
        t0 = time.perf_counter()
        executed = papermill_cli(find_notebook(name), tmp_path, params)
        assert results.exists(), f"{name} wrote no results JSON"
        data = json.loads(results.read_text())
        data["_executed"] = str(executed)
        data["_seconds"] = time.perf_counter() - t0
        return data

    return _run
