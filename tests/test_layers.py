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

#: A reader holds a file in their head up to about 400 lines of compact code (500 as ruff formats it); these are
#: still longer (only shrinks).
MAX_LINES = 500
#: reference: the catalogue, the per-user folder, profiles and tool-log import share one validation path.
KNOWN_LONG = {"labkit.reference"}


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
    long = {name for name, path in mm.modules().items() if len(path.read_text().splitlines()) > MAX_LINES}
    assert long <= KNOWN_LONG, f"over {MAX_LINES} lines: {sorted(long - KNOWN_LONG)}"
    assert KNOWN_LONG <= long, f"now short enough, remove from KNOWN_LONG: {sorted(KNOWN_LONG - long)}"


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
