"""Notebooks are committed clean: no outputs, a `parameters` cell with the mode contract, a kernelspec."""

import ast
import json
from pathlib import Path

import pytest

from labkit.notebooks import NOTEBOOKS, notebooks_dir

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
    text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown").lower()
    for section in ("predict", "exercise", "interview", "your own cluster", "sources"):
        assert section in text, f"{path.name}: no {section!r} section"
    assert "<details>" in text, f"{path.name}: interview answers should be collapsible"
