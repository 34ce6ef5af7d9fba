"""Notebooks are committed clean: no outputs, a `parameters` cell with the mode contract, a kernelspec."""

import ast
import json
import re

import pytest

from labkit.tools.notebooks import NOTEBOOKS, notebooks_dir

NB_DIR = notebooks_dir()
PATHS = sorted(NB_DIR.glob("*.ipynb"))


def test_all_six_notebooks_exist():
    have = {p.stem for p in PATHS}
    assert set(NOTEBOOKS) <= have, f"missing: {sorted(set(NOTEBOOKS) - have)}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterised(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for c in code:
        assert not c.get("outputs"), f"{path.name}: a cell has outputs"
        assert not c.get("execution_count"), f"{path.name}: a cell has an execution count"
    params = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    assert code.index(params[0]) == 0, f"{path.name}: the parameters cell must be the first code cell"
    tree = ast.parse("".join(params[0]["source"]))
    names = {}
    for node in tree.body:
        assert isinstance(node, ast.Assign), f"{path.name}: the parameters cell holds plain assignments only"
        names[node.targets[0].id] = ast.literal_eval(node.value)
    assert {"mode", "quick", "reference", "results_path"} <= set(names)
    assert names["mode"] == "auto"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_notebook_has_the_teaching_sections(path):
    text = "\n".join(
        "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"
    ).lower()
    for section in ("predict", "exercise", "interview", "your own cluster", "sources"):
        assert section in text, f"{path.name}: no {section!r} section"
    assert "<details>" in text, f"{path.name}: interview answers should be collapsible"


#: A code cell longer than this is machinery that belongs in the package (docs/style.md, point 7).
MAX_CODE_CELL_LINES = 25
#: An `if` (statement or expression) whose condition is a mode: Session.show makes that decision instead.
_MODE_BRANCH = re.compile(r"\bif\b[^#\n]*(\b\w*_mode\b|\bmode\b|\"live\"|\"reference\")")


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_code_cells_are_short(path):
    long = [
        (i, len("".join(c["source"]).splitlines()))
        for i, c in enumerate(_code_cells(path))
        if len("".join(c["source"]).splitlines()) > MAX_CODE_CELL_LINES
    ]
    assert not long, f"{path.name}: code cells over {MAX_CODE_CELL_LINES} lines (index, lines): {long}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_no_code_cell_branches_on_the_mode(path):
    """What an experiment shows (measured here, recorded, or a fallback) is decided by session.show."""
    found = [
        line.strip()
        for c in _code_cells(path)
        for line in "".join(c["source"]).splitlines()
        if _MODE_BRANCH.search(line)
    ]
    assert not found, f"{path.name}: if/else over modes in code cells: {found}"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_every_figure_is_checked_the_same_way(path):
    """Figures go through session.figure (the results' figures_labelled check) — directly, or through
    session.present(result), which hands a result's figure() to it — and widgets' through on_figure."""
    code = "\n".join("".join(c["source"]) for c in _code_cells(path))
    assert "session.figure(" in code or "session.present(" in code, (
        f"{path.name}: no figure goes through session.figure"
    )
    assert "figure_problems(" not in code, f"{path.name}: checks figures its own way (use session.figure)"
    calls = code.count("widgets.interactive(")
    assert code.count("on_figure=session.figure") == calls, f"{path.name}: a widget's figures are not checked"
