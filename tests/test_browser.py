"""The workbook in a real browser: JupyterLab driven in Chromium through Playwright.

For every notebook in notebooks/*.ipynb: its student edition (`labkit student`: what a learner
opens; the instructor edition runs under papermill and nbconvert in test_nbNN.py and
test_executors.py) with the parameters cell set to reference mode, quick, is opened in JupyterLab, run with Run → Run All Cells,
and checked — every code cell executed, no error or stderr output, figures rendered as images, the
results JSON written by the last cell, every exercise "not attempted" (the answers are gone) —
then at least one live widget must respond: choosing from a
dropdown or moving a slider changes what its output area shows. A screenshot of each notebook (and
of the widget after it responded) goes to artifacts/browser/ (or $LABKIT_BROWSER_ARTIFACTS).

One JupyterLab server (127.0.0.1, token, own process group, started without LABKIT_HEADLESS so the
kernels show live widgets) and one Chromium page are shared by all notebooks of a file, a tab each. The
notebooks are opened one after another and each is started as soon as it is open, as a person working in
several tabs would: one runs while the next opens and while those before it are checked.
Nothing is left running: the fixtures stop the server's process group and its kernels, close the
browser, and fail if any JupyterLab, kernel or Chromium process of this test is still alive.

Skipped outside CI when no Chromium is found (set $LABKIT_CHROMIUM to use another binary);
with CI=true a missing browser or Playwright is a failure.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import browser_helpers as bh
import pytest

from labkit.check import NOT_ATTEMPTED
from labkit.tools import student
from labkit.tools.notebooks import notebooks_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted(notebooks_dir().glob("*.ipynb"))
#: This file runs the first half; test_browser_second_half.py the rest, with its own JupyterLab and
#: Chromium, so that two pytest-xdist workers share the longest test of the suite.
FIRST_HALF = NOTEBOOKS[: (len(NOTEBOOKS) + 1) // 2]
SECOND_HALF = NOTEBOOKS[len(FIRST_HALF) :]
PARAMETERS = {"mode": "reference", "quick": True}
# generous but bounded (a notebook takes 5-15 s here); raise them on a slow machine
RUN_TIMEOUT_S = float(os.environ.get("LABKIT_BROWSER_RUN_TIMEOUT", 180))  # Run All → every cell executed
WIDGET_TIMEOUT_S = float(os.environ.get("LABKIT_BROWSER_WIDGET_TIMEOUT", 30))  # a control moved → output redrawn
IN_CI = os.environ.get("CI", "").lower() == "true"
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("LABKIT_BROWSER_ARTIFACTS", ROOT / "artifacts" / "browser"))
OURS = re.compile(r"jupyter|ipykernel|chrom|playwright", re.I)
SUMMARY_PROPERTY = "labkit_summary"  # conftest prints these after the run


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the browser test must run in CI; .ci/run installs Debian's chromium)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> str:
    path = bh.find_browser()
    if path is None:
        _unavailable(
            f"no Chromium found (looked at ${bh.BROWSER_ENV}, {', '.join(bh.BROWSER_CANDIDATES)} "
            "and PATH; on Debian: apt-get install chromium)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the Python package 'playwright' is not installed (pip install -e '.[browser]')")
    return path


@pytest.fixture(scope="module")
def no_leftovers():
    """Torn down last: fails if any JupyterLab, kernel or Chromium process started by this test survived."""
    before = {p.pid for p in bh.descendants()}
    yield
    time.sleep(0.5)
    left = [p for p in bh.descendants() if p.pid not in before and OURS.search(" ".join(_cmdline(p)))]
    if left:
        desc = bh.describe(left)
        bh.kill_all(left)
        pytest.fail(f"processes left behind by the browser test (now killed): {desc}")


def _cmdline(p):
    try:
        return p.cmdline()
    except Exception:
        return []


@pytest.fixture(scope="module")
def lab(no_leftovers, chromium, tmp_path_factory):
    base = tmp_path_factory.mktemp("jupyterlab")
    server = bh.LabServer(root=base / "notebooks", state=base / "state")
    server.root.mkdir()
    try:
        yield server.start()
    finally:
        killed = server.stop()
        assert not killed, f"JupyterLab left processes behind that had to be killed: {killed}"


@pytest.fixture(scope="module")
def browser(no_leftovers, chromium, tmp_path_factory):
    """One Chromium with a fresh profile; yields a Playwright BrowserContext (`started` opens one page in it)."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    pw = sync_playwright().start()
    context = None
    try:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=chromium,
            headless=True,
            args=bh.CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            timeout=60_000,
        )
        context.set_default_timeout(30_000)
        yield context
    finally:
        try:
            if context is not None:
                context.close()
        finally:
            pw.stop()
            stray = [p for p in bh.descendants() if str(profile) in " ".join(_cmdline(p))]
            if stray:
                desc = bh.describe(stray)
                bh.kill_all(stray)
                pytest.fail(f"Chromium processes still running after close (now killed): {desc}")


@pytest.fixture(scope="module")
def student_copies(tmp_path_factory) -> dict[str, Path]:
    """The student edition of every notebook (the browser runs these: test_student relies on it)."""
    written = student.build(tmp_path_factory.mktemp("student"), NOTEBOOKS)
    return {p.stem: p for p in written}


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def test_parameters_rewrite_keeps_the_committed_notebook():
    """The helper rewrites the copy's parameters cell only; the source notebook stays as committed."""
    src = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# t"},
            {
                "cell_type": "code",
                "metadata": {"tags": ["parameters"]},
                "outputs": [],
                "execution_count": None,
                "source": [
                    "# a comment\n",
                    'mode = "auto"\n',
                    "quick = False\n",
                    "reference = None\n",
                    "results_path = None",
                ],
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    original = json.dumps(src)
    out = bh.rewrite_parameters(src, mode="reference", quick=True, results_path="/tmp/r.json", extra=3)
    assert json.dumps(src) == original
    ns = {}
    exec(out["cells"][1]["source"], ns)
    assert (ns["mode"], ns["quick"], ns["reference"], ns["results_path"], ns["extra"]) == (
        "reference",
        True,
        None,
        "/tmp/r.json",
        3,
    )
    assert "# a comment" in out["cells"][1]["source"]


#: open_notebook's bound on opening one notebook (page, JupyterLab, kernel idle)
OPEN_TIMEOUT_S = 90
#: a test's bound: the first one's set-up opens and starts every notebook of its file
TIMEOUT_S = int(len(FIRST_HALF) * OPEN_TIMEOUT_S + RUN_TIMEOUT_S + 4 * WIDGET_TIMEOUT_S + 120)


@dataclass
class Started:
    """One notebook opened in a tab of the file's page and started with Run → Run All Cells (or the error that
    stopped it)."""

    page: object
    results: Path
    js_errors: list  # the page's, shared by the file's notebooks
    tab: str | None = None
    kernel: str | None = None
    open_s: float = float("nan")  # opening: the tab, the kernel idle (the first: the page and JupyterLab too)
    clicked: float = float("nan")  # time.monotonic() when Run All Cells was clicked
    error: str | None = None


@pytest.fixture(scope="module")
def started(request, lab, browser, student_copies) -> dict[str, Started]:
    """The notebooks this file tests, opened in one page, a tab each, each started as soon as it is open: a notebook
    runs while the next one opens and while those before it are checked (one after another, in a page each, a file
    took twice as long). A notebook that could not be opened or started keeps the error for its own test."""
    wanted = [
        item.callspec.params["notebook"]
        for item in request.session.items
        if item.module is request.module and "notebook" in getattr(getattr(item, "callspec", None), "params", {})
    ]
    page, js_errors, opened = browser.new_page(), [], {}
    page.on("pageerror", lambda e: js_errors.append(str(e)))
    for notebook in wanted:
        results = lab.root / f"{notebook.stem}.results.json"
        copy = bh.prepare_notebook(student_copies[notebook.stem], lab.root, results_path=str(results), **PARAMETERS)
        s = opened[notebook.stem] = Started(page, results, js_errors)
        t0 = time.monotonic()
        try:
            if any(o.tab for o in opened.values()):
                bh.open_another(page, copy.name, timeout_ms=int(OPEN_TIMEOUT_S * 1000))
            else:
                bh.open_notebook(page, lab, copy.name, timeout_ms=int(OPEN_TIMEOUT_S * 1000))
            s.tab, s.kernel = bh.current_tab(page), bh.kernel_id(page)
            s.open_s = time.monotonic() - t0
            bh.run_all_cells(page)
            s.clicked = time.monotonic()
        except Exception as e:  # the notebook's test fails with it; the others go on
            s.error = f"{type(e).__name__}: {e}"
    yield opened
    page.close()


@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize("notebook", FIRST_HALF, ids=lambda p: p.stem)
def test_notebook_in_jupyterlab(notebook: Path, lab, started, artifacts, record_property):
    check_notebook_in_jupyterlab(notebook, lab, started[notebook.stem], artifacts, record_property)


def check_notebook_in_jupyterlab(notebook: Path, lab, started: Started, artifacts, record_property):
    """Wait for the started notebook's run to end, check outputs and widgets, take the screenshots."""
    if started.error:
        pytest.fail(f"{notebook.name}: could not open it in JupyterLab and click Run All Cells: {started.error}")
    page, results = started.page, started.results
    shot, widget_shot = artifacts / f"{notebook.stem}.png", artifacts / f"{notebook.stem}.widget.png"
    for old in (shot, widget_shot):
        old.unlink(missing_ok=True)
    failures, summary, stages = [], {}, {}
    t0 = time.monotonic()
    try:
        bh.show_tab(page, started.tab)
        run = bh.wait_until_executed(page, max(10.0, RUN_TIMEOUT_S - (t0 - started.clicked)))
        # seen here, after the notebooks before this one were checked: an upper bound on the run's length
        summary["run_s"] = time.monotonic() - started.clicked
        if run["stopped_early"]:
            failures.append(f"not every code cell ran; prompts: {run['prompts']}")
        failures += bh.problems(page)
        failures += bh.unrendered_widgets(page)
        figs = bh.figures(page)
        summary["figures"] = figs
        if figs["rendered"] < 1 or figs["rendered"] < figs["total"]:
            failures.append(f"figures: {figs['rendered']} of {figs['total']} images rendered (need ≥ 1, all)")
        failures += bh.blank_figures(page)
        if not results.exists():
            failures.append("the last cell did not write the results JSON (session.save())")
        else:
            summary_json = json.loads(results.read_text())
            bad = [k for k, v in summary_json.get("checks", {}).items() if v is False]
            if bad:
                failures.append(f"results JSON checks failed: {bad}")
            for name, info in summary_json.get("experiments", {}).items():
                if "exercise" in name:  # the student edition has no answers: nothing can be scored yet
                    scored = {k: v for k, v in info.items() if v in ("correct", "try again", NOT_ATTEMPTED)}
                    if set(scored.values()) - {NOT_ATTEMPTED}:
                        failures.append(f"{name}: exercises scored in the student edition: {scored}")
        stages["checks"] = time.monotonic() - t0
        widgets = bh.exercise_widgets(page, WIDGET_TIMEOUT_S)
        stages["widgets"] = time.monotonic() - t0
        summary["widgets"] = widgets
        responded = [w for w in widgets if w["changed"]]
        if not widgets:
            failures.append("no live widget (controls + output area) on the page")
        elif not responded:
            failures.append(f"no widget's output changed when its controls moved: {widgets}")
        else:
            bh.screenshot_widget(page, responded[0]["index"], widget_shot)
        for w in responded:
            failures += bh.widget_figure_problems(w)
        failures += [f"after moving widgets: {p}" for p in bh.problems(page)]
    finally:
        try:
            bh.screenshot_notebook(page, shot)
            stages["screenshot"] = time.monotonic() - t0
        except Exception as e:  # a screenshot must not hide the real failure
            failures.append(f"(screenshot failed: {e})")
        try:
            bh.close_tab(page, started.tab)
            if started.kernel:
                lab.shutdown_kernel(started.kernel)
        except Exception:
            pass
        w = summary.get("widgets") or []
        # printed at the end of the run by conftest (this test may run in a pytest-xdist worker)
        record_property(
            SUMMARY_PROPERTY,
            f"[browser] {notebook.stem}: opened in {started.open_s:.1f} s, run all done "
            f"≤ {summary.get('run_s', float('nan')):.1f} s after the click; then "
            f"{', '.join(f'{k} {v:.1f}' for k, v in stages.items())} s, "
            f"figures {summary.get('figures')}, widgets responded {sum(x['changed'] for x in w)}/{len(w)} "
            f"{[x['control'] for x in w if x['changed']]}; screenshot: {shot}"
            + (f", {widget_shot}" if widget_shot.exists() else ""),
        )
    if started.js_errors and failures:
        failures.append(f"JavaScript errors on the page (shared by this file's notebooks): {started.js_errors[:5]}")
    assert not failures, f"{notebook.name} in JupyterLab:\n- " + "\n- ".join(failures)
