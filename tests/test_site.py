"""The site's reader copy of a notebook (labkit.tools.site.prepare) and the Sphinx project around it — cheap checks.

The full site (six notebooks executed, rendered by Sphinx, opened in Chromium with the network closed) is
tests/test_site_browser.py, which CI runs after the suite; tests/test_executors.py checks the reader
copies of the six notebooks it executes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from labkit.tools import site
from labkit.tools.cli import main
from labkit.tools.site import prepare
from labkit.tools.site import sphinx as site_sphinx

ROOT = Path(__file__).resolve().parents[1]


def _notebook(build_dir: Path):
    params = new_code_cell('mode = "auto"\nresults_path = None')
    params.metadata["tags"] = ["parameters"]
    injected = new_code_cell(
        f'# Parameters\nmode = "reference"\nresults_path = "{build_dir}/_executed/x.results.json"\n'
    )
    injected.metadata["tags"] = ["injected-parameters"]
    install = new_code_cell("import sys\nif 'google.colab' in sys.modules:\n    pass")
    install.metadata["tags"] = ["colab-install"]
    lesson = new_code_cell(
        'session = Session("01_x", mode, quick, reference, results_path)\n'
        "fits = fit(curves)\n"
        "# recorded for the tests\n"
        'session.note("fit", n=len(fits))\n'
        'session.check("fits_exist", len(fits) > 0)\n'
        "summary = fits.describe()  # a lesson's own `summary`, not the saved one\n"
        "display(summary)",
        outputs=[new_output("display_data", data={"text/plain": "table"})],
    )
    checks_only = new_code_cell(
        'over = [c for c in curves if c.over]\nsession.check("within_spec", not over)\nprint(session.checks, over)',
        outputs=[new_output("stream", name="stdout", text="{'within_spec': True} []\n")],
    )
    figure_then_check = new_code_cell(
        'session.check("drawn", True)\nsession.figure(fig)',
        outputs=[new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})],
    )
    last_check = new_code_cell(
        'claim = count(curves)\nsession.check("claim_fails", claim == 0)',
        outputs=[new_output("execute_result", data={"text/plain": "True"}, execution_count=1)],
    )
    traceback = new_code_cell(
        "run()",
        outputs=[new_output("stream", name="stdout", text=f'File "{ROOT}/labkit/launch.py", line 5\n')],
    )
    save = new_code_cell(
        'summary = session.save()\nprint("checks:", summary["checks"], results_path)',
        outputs=[new_output("stream", name="stdout", text=f"checks: {{}} {build_dir}/_executed/x.results.json\n")],
    )
    title = new_markdown_cell("# 01 · The PCIe latency curve\n\nEvery copy pays twice.\n\n$$t = \\alpha + n/\\beta$$")
    nb = new_notebook(
        cells=[title, params, injected, install, lesson, checks_only, figure_then_check, last_check, traceback, save]
    )
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nb


@pytest.fixture
def reader(tmp_path):
    build = tmp_path / "site"
    nb = _notebook(build)
    colab = site_sphinx.colab_url(site_sphinx.repository(), "01_x")
    return (
        nb,
        prepare.reader_copy(nb, colab_url=colab, download="notebooks/01_x.ipynb", roots=prepare.build_roots(build)),
        build,
    )


def _tags(cell) -> list:
    return cell.metadata.get("tags", [])


def test_machinery_cells_are_hidden_and_the_lesson_stays(reader):
    nb, rc, _ = reader
    assert [("remove-cell" in _tags(c)) for c in rc.cells] == [
        False,
        True,
        True,
        True,
        False,
        True,
        False,
        False,
        False,
        True,
    ]
    lesson = rc.cells[4].source
    # the Session the notebook's experiments go through stays; what only feeds the results file goes
    assert 'session = Session("01_x"' in lesson and "fits = fit(curves)" in lesson
    assert "session.note" not in lesson and "session.check" not in lesson and "recorded for the tests" not in lesson
    assert "summary = fits.describe()" in lesson and "display(summary)" in lesson
    assert rc.cells[4].outputs == nb.cells[4].outputs  # outputs are never touched (only paths in them)
    # a cell that drew a figure keeps the figure (and loses the bookkeeping line) — never a hidden figure
    assert rc.cells[6].source == "session.figure(fig)" and rc.cells[6].outputs == nb.cells[6].outputs
    # a check as a cell's last line: gone, and so is the True it displayed
    assert rc.cells[7].source == "claim = count(curves)" and rc.cells[7].outputs == []
    assert nb.cells[1].metadata["tags"] == ["parameters"]  # the executed notebook itself is unchanged
    assert "widgets" not in rc.metadata and "widgets" in nb.metadata  # no widget manager from a CDN


def test_title_numbered_and_links_to_colab_and_the_notebook(reader):
    _, rc, _ = reader
    first = rc.cells[0].source
    assert first.startswith("# 1 · The PCIe latency curve\n") and prepare.title_of(rc) == "1 · The PCIe latency curve"
    assert 'class="labkit-colab" href="https://colab.research.google.com/github/' in first
    assert 'href="notebooks/01_x.ipynb" download' in first
    assert "$$t = \\alpha + n/\\beta$$" in first  # math is left to the site's MathJax


@pytest.mark.parametrize(
    "title, numbered",
    [("# 01 · The PCIe latency curve", "# 1 · The PCIe latency curve"), ("# 5 · Ring", "# 5 · Ring"), ("# No", "# No")],
)
def test_numbered_title(title, numbered):
    assert prepare.numbered_title(title + "\n\ntext") == numbered + "\n\ntext"


def test_no_build_machine_path_is_left_in_what_a_reader_sees(reader):
    _, rc, build = reader
    shown = [c for c in rc.cells if "remove-cell" not in _tags(c)]
    text = nbformat.writes(nbformat.v4.new_notebook(cells=shown))
    for root in (str(build), str(ROOT), sys.prefix):
        assert root not in text
    # the checkout's path is taken off, the file still named
    assert rc.cells[8].outputs[0]["text"] == 'File "labkit/launch.py", line 5\n'


def test_colab_url_follows_the_repository_in_pyproject():
    repo = re.search(r'^Repository = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert site_sphinx.repository() == repo
    path = repo.removeprefix("https://github.com/")
    assert site_sphinx.colab_url(repo, "01_pcie_latency_curve") == (
        f"https://colab.research.google.com/github/{path}/blob/main/notebooks/01_pcie_latency_curve.ipynb"
    )


def test_conf_renders_without_executing_and_with_mathjax_from_the_site(tmp_path):
    conf = {}
    exec(site_sphinx.CONF.format(project="p", version="1", title="t", repository="r"), conf)
    assert conf["nb_execution_mode"] == "off" and conf["html_theme"] == "sphinx_book_theme"
    assert "://" not in conf["mathjax_path"], "MathJax must be served from the site, not a CDN"
    assert conf["nb_ipywidgets_js"] == {}
    index = site_sphinx.index_md(["01_x"], {"01_x": "1 · X"}, {"01_x": ("Summary.", ("one", "two"))}, "https://r")
    assert "- **[1 · X](01_x.ipynb)**" in index and "   - two" in index and ":hidden:" in index


def test_conf_mathjax_path_names_files_that_ship():
    pytest.importorskip("jupyter_server_mathjax", reason="the site extra is not installed (CI installs it)")
    conf = {}
    exec(site_sphinx.CONF.format(project="p", version="1", title="t", repository="r"), conf)
    script, _, query = conf["mathjax_path"].partition("?config=")
    assert script.startswith("mathjax/")
    static = site_sphinx.mathjax_dir()
    assert (static / script.removeprefix("mathjax/")).is_file()
    assert (static / "config" / f"{query}.js").is_file()
    assert (static / "fonts" / "HTML-CSS" / conf["mathjax2_config"]["HTML-CSS"]["webFont"]).is_dir()


def test_site_without_the_extra_names_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as if not installed
    with pytest.raises(RuntimeError, match=r"myst-nb.*labkit-workbook\[site\]"):
        site.require_tools()
    assert main(["site", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "labkit site:" in err and "[site]" in err
    assert not (tmp_path / "s" / "_executed").exists()  # nothing was executed first


def test_objectives_are_read_numbered_or_bulleted():
    numbered = (
        "# 1 · X\n\nWhy it matters.\n\n**You will be able to**\n1. measure a;\n2. fit b\n   over two lines.\n\nMore."
    )
    bulleted = "# 5 · Y\n\nWhy.\n\n**You will be able to**\n- explain a;\n- write b.\n\nThe rest."
    for text, expected in ((numbered, ("measure a;", "fit b over two lines.")), (bulleted, ("explain a;", "write b."))):
        summary, objectives = site._intro(new_notebook(cells=[new_markdown_cell(text)]))
        assert objectives == expected and summary.startswith("Why")
