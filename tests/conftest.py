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


#: Test files holding tests with these marks are collected first, in this order: the browser files (a minute
#: or more each), the notebook executions (15-90 s), other slow tests. Under `--dist loadfile` the longest
#: files then start at once and the many short ones fill the end of the run; xdist's own order (most tests
#: first) started the browser and notebook files last, so that they finished alone on a half-idle machine.
LONGEST_FIRST = ("browser", "notebook", "slow")


def pytest_configure(config):
    """Under --dist loadfile/loadscope keep the collection order (pytest-xdist ≥ 3.8 sorts files by their number
    of tests unless told `--no-loadscope-reorder`), unless `--loadscope-reorder` was asked for."""
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope") and hasattr(config.option, "loadscopereorder"):
        if "--loadscope-reorder" not in config.invocation_params.args:
            config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    n = _cuda_count()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none visible to torch)")
    skip_multi = pytest.mark.skip(reason=f"needs two or more CUDA GPUs (this machine has {n})")
    for item in items:
        if "gpu" in item.keywords and n < 1:
            item.add_marker(skip_gpu)
        if "multigpu" in item.keywords and n < 2:
            item.add_marker(skip_multi)
    _longest_files_first(items)


def _longest_files_first(items) -> None:
    """Sort `items` by their file's rank in LONGEST_FIRST (its highest-ranked mark); stable, so each file's tests
    stay together and in order, and files of the same rank keep their order."""
    rank = {}
    for item in items:
        mine = next((i for i, m in enumerate(LONGEST_FIRST) if item.get_closest_marker(m)), len(LONGEST_FIRST))
        rank[item.path] = min(rank.get(item.path, mine), mine)
    items.sort(key=lambda item: rank[item.path])


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
