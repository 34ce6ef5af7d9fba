"""Every notebook runs as committed under executors a user would pick, with no labkit variable set —
and the rendered site built from those runs loads in a browser with its figures.

The reference-mode tests (test_nbNN.py, through conftest's `run_nb`) execute each notebook with the
`papermill` command line; this file executes each one again with `jupyter nbconvert --execute`. Both
run in a clean environment with a time bound (tests/executors.py): before labkit.widgets detected the
missing front end, notebooks 01, 04 and 06 hung for ever under plain papermill (jupyter/nbclient#312).
The same executed copies then become the static site (`labkit.site`, what `labkit site` publishes),
so the site is checked without executing anything twice.
"""

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import browser_helpers as bh
import nbformat
import pytest
from executors import nbconvert_execute

from labkit import reference, site
from labkit.notebooks import NOTEBOOKS, find_notebook

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


def test_the_site_has_every_notebook_with_its_sections_and_figures(executed, tmp_path):
    root, runs = executed
    pages = site.build_site(tmp_path / "site", executed_dir=root / "executed", progress=lambda *_: None)
    assert [p.notebook for p in pages] == list(NOTEBOOKS)
    manifest = json.loads((tmp_path / "site" / "site.json").read_text())
    assert [p["notebook"] for p in manifest["pages"]] == list(NOTEBOOKS)
    index = (tmp_path / "site" / "index.html").read_text()
    for p in pages:
        nb = nbformat.read(str(root / "executed" / f"{p.notebook}.ipynb"), as_version=4)
        images = sum(
            "image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
        )
        assert p.figures == images > 0, f"{p.notebook}: {p.figures} figures on the page, {images} in the notebook"
        assert len(p.sections) >= 5 and p.title, p
        assert f'href="{p.file}"' in index
        for anchor, _ in p.sections:  # the table of contents links to anchors that exist
            assert f'href="{p.file}#{anchor}"' in index
            assert f'id="{anchor}"' in (tmp_path / "site" / p.file).read_text()


def test_every_site_page_loads_in_chromium_with_its_figures(executed, tmp_path):
    browser = bh.find_browser()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no Chromium in CI (.ci/run installs Debian's chromium)")
        pytest.skip("no Chromium here (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    root, _ = executed
    out = tmp_path / "site"
    pages = site.build_site(out, executed_dir=root / "executed", progress=lambda *_: None)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=browser, headless=True, args=bh.CHROMIUM_ARGS)
        try:
            page = b.new_page()
            page.route("http*://**", lambda route: route.abort())  # offline: CDN scripts (MathJax) fail fast
            page.goto((out / "index.html").as_uri())
            # the site's own pages (the notebooks' intros quoted in the index may link to outside .html pages)
            links = page.eval_on_selector_all(
                "ol.path a[href$='.html']:not([href*='://'])", "els => els.map(e => e.getAttribute('href'))"
            )
            assert links == [p.file for p in pages]
            for p in pages:
                page.goto((out / p.file).as_uri(), wait_until="load")
                shown = page.eval_on_selector_all(
                    "img[src^='data:image']", "els => els.filter(e => e.complete && e.naturalWidth > 100).length"
                )
                assert shown == p.figures > 0, f"{p.file}: {shown} of {p.figures} figures drawn"
                assert page.locator("nav.labkit-nav a[href='index.html']").count() == 1
        finally:
            b.close()


def test_a_raw_nccl_tests_log_given_as_reference_is_drawn_by_notebook_05(executed):
    """reference= a log file: notebook 05 reads it with labkit.logs and shows it first among the recorded sweeps."""
    r = _results(executed, "05_ring_allreduce_by_hand")
    assert r["reference"] == str(RAW_LOG)
    assert "nccl_all_reduce_perf__2x_rtx2080ti_pcie3_nop2p__anthonyhoo" in r["datasets"], r["datasets"]
    assert r["all_checks_passed"], {k: v for k, v in r["checks"].items() if not v}
