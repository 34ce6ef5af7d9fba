"""The package's layers, read from the source (scripts/module_map.py): core ← topics ← tools, no cycles.

Core modules import only core; a topic imports core and the topics scripts/module_map.TOPIC_EDGES allows;
tools import anything. Function-local imports count as much as module-level ones. labkit's own modules
are imported at the top of a file; heavy third-party ones (torch, NVML, widgets, matplotlib, pandas, ...)
inside the functions that need them, so `import labkit.<anything>` stays quick and works without them.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import module_map as mm  # noqa: E402

#: A reader holds a file in their head up to about 400 lines of compact code (500 as ruff formats it), and a
#: function up to about a screen (80 lines). No allow-list: a longer one is split by concept.
MAX_LINES = 500
MAX_FUNCTION_LINES = 80


@pytest.fixture(scope="module")
def imports():
    return mm.imports()


def test_every_module_has_a_layer_and_a_one_line_docstring():
    import ast

    for name, path in mm.modules().items():
        mm.layer_of(name)  # raises for a module in no layer
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc and doc.splitlines()[0].strip(), f"{name}: no docstring (one line saying what it holds)"


def test_layers_are_respected(imports):
    assert mm.violations(imports) == []


def test_no_import_cycles(imports):
    assert mm.cycles(mm.import_graph(imports)) == []


def test_topic_edges_form_no_cycle():
    graph = {f"labkit.{t}": {f"labkit.{u}" for u in mm.TOPIC_EDGES.get(t, ())} for t in mm.TOPICS}
    assert mm.cycles(graph) == []


def test_own_modules_are_imported_at_the_top(imports):
    where = sorted(f"{i.module}:{i.line} {i.target}" for i in mm.local_own_imports(imports))
    assert not where, "labkit modules imported inside functions (import them at the top):\n" + "\n".join(where)


def test_heavy_third_party_imports_are_lazy(imports):
    assert not mm.heavy_top_level(imports)


def test_modules_stay_small():
    long = {name: n for name, path in mm.modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines (split by concept): {long}"


def test_functions_stay_short():
    import ast

    long = [
        f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for name, path in mm.modules().items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(long)


def test_contributing_layout_is_the_tree():
    held = mm.contributing_layout()
    assert held is not None, f"CONTRIBUTING.md has no generated layout ({mm.LAYOUT_BEGIN!r} ... {mm.LAYOUT_END!r})"
    listed, tree = mm.layout_names(held), mm.layout_names(mm.layout_markdown())
    assert listed == tree, (
        "CONTRIBUTING.md's layout is not the tree (run `python scripts/module_map.py --write-contributing`): "
        f"not listed {sorted(set(tree) - set(listed))}, listed but gone {sorted(set(listed) - set(tree))}"
    )


def test_package_docstrings_that_list_modules_list_them_all():
    """A subpackage whose docstring lists its modules ('- `name`: ...') names every one of them."""
    import ast
    import re

    drifted = {}
    for init in sorted(mm.PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        mods = sorted(p.stem for p in init.parent.glob("*.py") if not p.stem.startswith("_"))
        if not any(re.search(rf"^- `{m}`", doc, re.M) for m in mods):
            continue  # the docstring describes the package as a whole
        missing = [m for m in mods if not re.search(rf"\b{m}\b", doc)]
        if missing:
            drifted[str(init.parent.relative_to(mm.ROOT))] = missing
    assert not drifted, f"package docstrings that leave modules out: {drifted}"


def test_importing_every_module_loads_no_heavy_library():
    names = list(mm.modules())
    code = (
        "import importlib, sys\n"
        f"for n in {names!r}:\n    importlib.import_module(n)\n"
        f"print(sorted(m for m in {list(mm.HEAVY)!r} if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", f"importing labkit's modules loaded {r.stdout.strip()}"
