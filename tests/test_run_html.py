"""`labkit run --html`: notebook 01 through the command line, exported to HTML with its figures and no errors."""

from __future__ import annotations

import re

import nbformat
import pytest

from labkit.tools import cli

PNG_IMG = re.compile(r'<img[^>]+src="data:image/png;base64,[A-Za-z0-9+/=\s]{1000,}"')


@pytest.mark.notebook
def test_run_01_exports_html_with_figures(tmp_path, capsys, monkeypatch):
    # conftest sets MPLBACKEND=Agg for the test process; a kernel that inherits it draws nothing inline,
    # so run the notebook with the environment a user's shell has
    monkeypatch.delenv("MPLBACKEND", raising=False)
    rc = cli.main(["run", "01", "--mode", "reference", "--quick", "--html", "--out", str(tmp_path)])
    printed = capsys.readouterr()
    assert rc == 0, printed.out + printed.err
    html_files = list(tmp_path.glob("01_*.html"))
    assert len(html_files) == 1, f"no HTML export in {sorted(p.name for p in tmp_path.iterdir())}"
    html = html_files[0].read_text(encoding="utf-8")
    # the figures are rendered into the page itself (base64 PNG), not linked
    executed = nbformat.read(str(html_files[0].with_suffix(".ipynb")), as_version=4)
    n_png = sum("image/png" in o.get("data", {}) for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert n_png >= 3, f"the executed notebook holds only {n_png} PNG figures"
    assert len(PNG_IMG.findall(html)) == n_png
    # no cell failed: no error output in the notebook, no traceback in the page
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0]
    text = re.sub(r"<[^>]+>", "", html)
    assert "Traceback" not in text and "PapermillExecutionError" not in text
