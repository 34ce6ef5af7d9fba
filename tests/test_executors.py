"""Every notebook runs as committed under executors a user would pick, with no labkit variable set.

The reference-mode tests (test_nbNN.py, through conftest's `run_nb`) execute each notebook with the
`papermill` command line; this file executes each one again with `jupyter nbconvert --execute`. Both
run in a clean environment with a time bound (tests/executors.py): before labkit.widgets detected the
missing front end, notebooks 01, 04 and 06 hung for ever under plain papermill (jupyter/nbclient#312).
"""

import json
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest
from executors import nbconvert_execute

from labkit.notebooks import NOTEBOOKS, find_notebook

pytestmark = pytest.mark.notebook


def test_every_notebook_runs_under_nbconvert_without_labkit_variables(tmp_path):
    def run(name):
        results = tmp_path / f"{name}.results.json"
        executed = nbconvert_execute(
            find_notebook(name), tmp_path / name, {"mode": "reference", "quick": True, "results_path": str(results)}
        )
        return name, executed, results

    with ThreadPoolExecutor(max_workers=2) as pool:  # two kernels at a time: two cores
        runs = list(pool.map(run, NOTEBOOKS))
    for name, executed, results in runs:
        assert results.exists(), f"{name} under nbconvert wrote no results JSON"
        summary = json.loads(results.read_text())
        assert summary["all_checks_passed"], f"{name} under nbconvert: {summary['checks']}"
        nb = nbformat.read(str(executed), as_version=4)
        errors = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        # the widgets saw no front end: static views, no ipywidgets models left in the notebook
        views = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        ]
        assert not views, f"{name}: {len(views)} live widget views under a batch executor"
