"""The course website as a reader opens it: Chromium, the network closed to everything but the site.

Every page loads with its figures drawn, MathJax (served by the site) has typeset every formula — no raw
`$$` or `\\frac` on screen —, search finds "busbw", the sidebar holds the learning path "1 · …" to "6 · …"
and each page's sections, each page links to Colab and to its notebook, and no page shows a path of the
machine that built it.

Building the site executes six notebooks, so this is not part of the README's test command: CI builds
the site (`labkit site --out artifacts/site`) after the suite and runs this file on it
(`LABKIT_SITE_DIR=artifacts/site pytest -m site tests/test_site_browser.py`). Without LABKIT_SITE_DIR
the test builds a site of its own from quick reference-mode runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import browser_helpers as bh
import nbformat
import pytest
import site_checks

from labkit.tools import site
from labkit.tools.notebooks import NOTEBOOKS
from labkit.tools.site import prepare
from labkit.tools.site import sphinx as site_sphinx

pytestmark = [pytest.mark.site, pytest.mark.slow]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(site folder, its pages): LABKIT_SITE_DIR's site as CI built it, or one built here."""
    folder = os.environ.get("LABKIT_SITE_DIR")
    if folder:
        out = Path(folder).resolve()
        manifest = json.loads((out / "site.json").read_text())
        pages = [
            site.Page(**{**p, "objectives": tuple(p["objectives"]), "sections": tuple(map(tuple, p["sections"]))})
            for p in manifest["pages"]
        ]
        return out, pages
    out = tmp_path_factory.mktemp("site") / "site"
    return out, site.build_site(out, quick=True, progress=lambda *_: None)


def test_every_notebook_is_a_page_with_its_figures(built):
    out, pages = built
    assert [p.notebook for p in pages] == list(NOTEBOOKS)
    for i, p in enumerate(pages, 1):
        assert p.title.startswith(f"{i} · "), p.title
        assert len(p.sections) >= 5, p
        executed = out / "_executed" / f"{p.notebook}.ipynb"
        if executed.exists():  # every figure the reference-mode run drew is on the page
            nb = nbformat.read(str(executed), as_version=4)
            images = sum(
                "image/png" in o.get("data", {})
                for c in nb.cells
                if c.cell_type == "code"
                for o in c.get("outputs", [])
            )
            assert p.figures == images > 0, f"{p.notebook}: {p.figures} figures on the page, {images} in the notebook"


def test_the_site_reads_offline_in_chromium(built):
    browser = bh.find_browser()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no Chromium in CI (.ci/run installs Debian's chromium)")
        pytest.skip("no Chromium here (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    out, pages = built
    # a folder of this machine, or the injected parameters cell (results_path = "…/_executed/…")
    forbidden = [root for root, _ in prepare.build_roots(out)] + ["results_path =", "_executed/", "injected-parameters"]
    colab = {p.notebook: site_sphinx.colab_url(site_sphinx.repository(), p.notebook) for p in pages}
    with site_checks.serve(out) as origin, sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=browser, headless=True, args=bh.CHROMIUM_ARGS)
        try:
            page = b.new_page(viewport={"width": 1280, "height": 900})
            problems = site_checks.site_problems(page, origin, pages, forbidden, colab)
        finally:
            b.close()
    assert not problems, "\n".join(problems)


def test_every_link_inside_the_site_leads_to_a_file_of_the_site(built):
    """A notebook's Markdown may link to another notebook or a file of the repository: on the site such a
    link must resolve to a page or a file that was published with it."""
    out, _ = built
    dead = []
    for page in sorted(out.glob("*.html")):
        for href in re.findall(r'href="([^"#?]+)', page.read_text(encoding="utf-8")):
            if "://" in href or href.startswith(("mailto:", "javascript:")):
                continue
            if not (page.parent / href).exists():
                dead.append(f"{page.name}: {href}")
    assert not dead, dead
