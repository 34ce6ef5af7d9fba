"""Every notebook runs as committed under executors a user would pick, with no labkit variable set —
and what the site renders of those runs hides the machinery and keeps every figure.

The reference-mode tests (test_nbNN.py, through conftest's `run_nb`) execute each notebook with the
`papermill` command line; this file executes each one again with `jupyter nbconvert --execute`. Both
run in a clean environment with a time bound (tests/executors.py): before labkit.widgets detected the
missing front end, notebooks 01, 04 and 06 hung for ever under plain papermill (jupyter/nbclient#312).
The same executed copies are what the site renders (`labkit.tools.site.prepare`, what `labkit site` publishes),
so the pages' content is checked without executing anything twice.
"""

import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest
from executors import nbconvert_execute

from labkit import reference
from labkit.tools.notebooks import NOTEBOOKS, find_notebook
from labkit.tools.site import prepare as site_prepare

pytestmark = pytest.mark.notebook


#: The nbconvert runs also try what `reference=` accepts besides the shipped catalogue (the papermill runs
#: in test_nbNN.py use the default): a notebook costs ~10 s of CPU, so one run checks both.
RAW_LOG = reference.data_dir() / "raw" / "nccl_all_reduce_perf__2x_RTX2080Ti_PCIe3_noP2P__anthonyhoo.txt"
PROFILE = "classroom_node"  # a copy of a real recorded profile folder, as an instructor hands it out
REFERENCES = {
    "01_pcie_latency_curve": lambda root: str(root / PROFILE),
    "02_pinned_vs_pageable": lambda root: "h100_vm_labkit_nonblocking_pitfall",  # a point set, no pin-cost run
    # a raw nccl-tests log, read by labkit.logs as the notebook runs (issue 17: bring your own measurements)
    "05_ring_allreduce_by_hand": lambda root: str(RAW_LOG),
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The six notebooks executed by nbconvert (reference mode, quick), two kernels at a time."""
    root = tmp_path_factory.mktemp("nbconvert")
    shutil.copytree(reference.profile_path("h100_pcie5_vm_20261123"), root / PROFILE)

    def run(name):
        results = root / f"{name}.results.json"
        params = {"mode": "reference", "quick": True, "results_path": str(results)}
        if name in REFERENCES:
            params["reference"] = REFERENCES[name](root)
        executed = nbconvert_execute(find_notebook(name), root / "executed", params)
        return name, executed, results

    with ThreadPoolExecutor(max_workers=2) as pool:  # two cores
        return root, list(pool.map(run, NOTEBOOKS))


def _results(executed, name: str) -> dict:
    root, runs = executed
    return json.loads(next(r for n, _, r in runs if n == name).read_text())


def test_a_recorded_profile_folder_is_replayed_by_a_notebook(executed):
    """An instructor's `labkit record` folder, given as reference=, is what notebook 01 shows first."""
    r = _results(executed, "01_pcie_latency_curve")
    assert r["reference"] == str(executed[0] / PROFILE)
    assert r["datasets"][0] == "gpu_copy_sweep"  # the profile's sweep, ahead of the shipped ones
    assert r["all_checks_passed"], r["checks"]


def test_nb02_without_a_recorded_pin_cost_measures_the_host_part_here(executed):
    """reference= naming a point dataset that holds no pin-cost run: pinning's host half is measured on
    this CPU and labelled as a lower bound, the copy times come from a recorded sweep."""
    r = _results(executed, "02_pinned_vs_pageable")
    pin = r["experiments"]["pin_cost"]
    assert pin["mode"] == "live" and pin["pin"].startswith("measured here: host part") and "lower bound" in pin["pin"]
    assert pin["copies"].startswith("recorded:")
    assert r["all_checks_passed"], r["checks"]


def test_every_notebook_runs_under_nbconvert_without_labkit_variables(executed):
    _, runs = executed
    for name, path, results in runs:
        assert results.exists(), f"{name} under nbconvert wrote no results JSON"
        summary = json.loads(results.read_text())
        assert summary["all_checks_passed"], f"{name} under nbconvert: {summary['checks']}"
        nb = nbformat.read(str(path), as_version=4)
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert not errors, f"{name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        # the widgets saw no front end: static views, no ipywidgets models left in the notebook
        views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert not views, f"{name}: {len(views)} live widget views under a batch executor"


def test_the_site_copies_hide_the_machinery_and_keep_every_figure(executed):
    """What the site renders of each run (labkit.tools.site.prepare): parameters, papermill's injected cell
    (the build machine's results_path) and the Colab install cell hidden, titles numbered 1-6, every
    figure kept, no path of this machine (these runs replay a profile and a log from a temporary folder).
    The Sphinx site itself is read in Chromium by tests/test_site_browser.py, in CI after the suite."""
    root, runs = executed
    roots = site_prepare.build_roots(root)
    for i, (name, path, _) in enumerate(runs, 1):
        nb = nbformat.read(str(path), as_version=4)
        rc = site_prepare.reader_copy(nb, colab_url="colab", download=f"notebooks/{name}.ipynb", roots=roots)
        assert site_prepare.title_of(rc).startswith(f"{i} · "), site_prepare.title_of(rc)
        shown = [c for c in rc.cells if "remove-cell" not in c.metadata.get("tags", [])]
        for c in rc.cells:
            if set(c.metadata.get("tags", [])) & {"parameters", "injected-parameters", "colab-install"}:
                assert c not in shown, f"{name}: {c.metadata['tags']} cell shown"
        figures = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        kept = [
            o for c in shown if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})
        ]
        assert len(kept) == len(figures) > 0, f"{name}: {len(kept)} of {len(figures)} figures kept"
        text = nbformat.writes(nbformat.v4.new_notebook(cells=shown))
        for folder, _ in roots:
            assert folder not in text, f"{name}: {folder} shown"
        assert "results_path =" not in text and "session.check(" not in text, name


def test_a_raw_nccl_tests_log_given_as_reference_is_drawn_by_notebook_05(executed):
    """reference= a log file: notebook 05 reads it with labkit.logs and shows it first among the recorded sweeps."""
    r = _results(executed, "05_ring_allreduce_by_hand")
    assert r["reference"] == str(RAW_LOG)
    assert "nccl_all_reduce_perf__2x_rtx2080ti_pcie3_nop2p__anthonyhoo" in r["datasets"], r["datasets"]
    assert r["all_checks_passed"], {k: v for k, v in r["checks"].items() if not v}
