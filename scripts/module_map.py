"""The module map of labkit: files, lines, layers, imports between labkit's modules, and import cycles.

    python scripts/module_map.py            # the map, one line per module, then the totals
    python scripts/module_map.py --json     # the same as JSON
    python scripts/module_map.py --markdown # CONTRIBUTING.md's layout section, generated from the tree
    python scripts/module_map.py --write-contributing   # ... written into CONTRIBUTING.md

Everything is read from the source with `ast` (nothing is imported), so it works on a broken tree too.
tests/test_layers.py uses `import_graph()` and `layer_of()` to enforce the layers described in
docs/design.md ("Layout"): core modules import only core; topics import core (and the topics listed in
TOPIC_EDGES); tools import anything; no import cycles; labkit's own modules are imported at the top of
a file, heavy third-party ones (HEAVY) inside the functions that need them.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "labkit"

#: The layer of a module is read from its path:
#:   core   labkit/<module>.py, and the packages in CORE_PACKAGES (the log parsers);
#:   topic  any other subpackage labkit/<topic>/ (one per thing a notebook reads);
#:   tool   labkit/tools/ (the command line and what it drives: modules and subpackages);
#:   package  labkit/__init__.py and labkit/__main__.py (the entry point: `python -m labkit` runs the tools' cli).
CORE_PACKAGES = ("logs",)
TOOLS_PACKAGE = "tools"


def _units(kind: str, root: Path = PACKAGE) -> tuple[str, ...]:
    """The names of labkit's core modules or topics, read from the tree."""
    flat = {p.stem for p in root.glob("*.py") if not p.stem.startswith("__")}
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    if kind == "core":
        return tuple(sorted(flat | (packages & set(CORE_PACKAGES))))
    if kind == "topic":
        return tuple(sorted(packages - set(CORE_PACKAGES) - {TOOLS_PACKAGE}))
    tools = {p.stem for p in (root / TOOLS_PACKAGE).glob("*.py") if not p.stem.startswith("__")}
    tools |= {p.name for p in (root / TOOLS_PACKAGE).iterdir() if (p / "__init__.py").exists()}
    return tuple(sorted(tools))


CORE = _units("core")
TOPICS = _units("topic")
TOOLS = _units("tool")
#: Topic → topics it may import (a DAG: checked for cycles too). Everything else two topics share is core.
TOPIC_EDGES = {
    "copies": ("overlap",),  # notebook 02's non_blocking pitfall on a CPU runs on overlap's host stream
    "hierarchy": ("copies", "cluster"),  # the ladder's levels are copy sweeps; Part 2's model is the cluster model
}
#: Third-party modules too slow or too optional for the top of a file: imported where they are used.
HEAVY = (
    "torch",
    "pynvml",
    "ipywidgets",
    "matplotlib",
    "IPython",
    "papermill",
    "nbconvert",
    "nbformat",
    "nbclient",
    "psutil",
    "scipy",
    "pandas",
    "tqdm",
    "playwright",
)


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement's target, as seen from `module`."""

    module: str  # the importing module, e.g. "labkit.copies.sweeps"
    target: str  # "labkit.timing", or a third-party top-level name ("torch")
    line: int
    local: bool  # inside a function (executed when called), not at import time


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """labkit's modules by dotted name (packages under their own name)."""
    return {module_name(p): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom, known: dict) -> list[str]:
    """Absolute names an ImportFrom refers to: a submodule where the name is one, else the module itself."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{prefix}.{alias.name}"
        out.append(sub if sub in known else prefix)
    return out


def imports(known: dict[str, Path] | None = None) -> list[Import]:
    """Every import in labkit, labkit's own resolved to modules, third-party ones to their top-level name."""
    known = known if known is not None else modules()
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"

        def visit(node, local):
            for child in ast.iter_child_nodes(node):
                inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        target = alias.name if alias.name.split(".")[0] == "labkit" else alias.name.split(".")[0]
                        while target.startswith("labkit.") and target not in known:
                            target = target.rsplit(".", 1)[0]
                        out.append(Import(name, target, child.lineno, local))
                elif isinstance(child, ast.ImportFrom):
                    if child.module == "__future__":
                        continue
                    if child.level or (child.module or "").split(".")[0] == "labkit":
                        for target in dict.fromkeys(_resolve(name, is_package, child, known)):
                            out.append(Import(name, target, child.lineno, local))
                    else:
                        out.append(Import(name, child.module.split(".")[0], child.lineno, local))
                visit(child, inner)

        visit(tree, False)
    return out


def own(imp: Import) -> bool:
    return imp.target == "labkit" or imp.target.startswith("labkit.")


def import_graph(imps: list[Import]) -> dict[str, set[str]]:
    """labkit module → labkit modules it imports (module level and function-local alike; self-imports dropped)."""
    graph: dict[str, set[str]] = {}
    for imp in imps:
        graph.setdefault(imp.module, set())
        if own(imp) and imp.target != imp.module and imp.target != "labkit":
            graph[imp.module].add(imp.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted; the import cycles."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def layer_of(module: str) -> tuple[str, str]:
    """(layer, unit) from the module's path: layer is core, topic, tool or package; unit is the core module,
    topic or tool (see CORE_PACKAGES above)."""
    parts = module.split(".")
    if parts in (["labkit"], ["labkit", "__main__"]):
        return "package", parts[-1]
    head = parts[1]
    if head == TOOLS_PACKAGE:
        return "tool", parts[2] if len(parts) > 2 else TOOLS_PACKAGE
    if head in CORE:
        return "core", head
    if head in TOPICS:
        return "topic", head
    raise KeyError(f"{module}: not in labkit/<module>.py, a subpackage or labkit/tools/ — no layer")


def violations(imps: list[Import]) -> list[str]:
    """Layer rules broken, one sentence each ('a -> b: why')."""
    out = []
    for imp in imps:
        if not own(imp) or imp.target == imp.module:
            continue
        (src_layer, src), (dst_layer, dst) = layer_of(imp.module), layer_of(imp.target)
        where = f"{imp.module} -> {imp.target}"
        if src_layer == "core" and dst_layer not in ("core", "package"):
            out.append(f"{where}: core imports a {dst_layer}")
        elif src_layer == "topic" and dst_layer == "tool":
            out.append(f"{where}: a topic imports a tool")
        elif src_layer == "topic" and dst_layer == "topic" and src != dst and dst not in TOPIC_EDGES.get(src, ()):
            out.append(f"{where}: topic {src} imports topic {dst} (not in TOPIC_EDGES)")
    return sorted(set(out))


def local_own_imports(imps: list[Import]) -> list[Import]:
    """Imports of labkit's own modules inside functions (they belong at the top of the file)."""
    return [i for i in imps if i.local and own(i)]


def heavy_top_level(imps: list[Import]) -> list[Import]:
    """Heavy third-party imports at the top of a file (they make `import labkit...` slow or fragile)."""
    return [i for i in imps if not i.local and i.target in HEAVY]


def summary(root: Path = PACKAGE) -> dict:
    known = modules(root)
    imps = imports(known)
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in known.items()}
    biggest = max(lines, key=lines.get)
    return {
        "files": len(known),
        "lines": sum(lines.values()),
        "largest": [biggest, lines[biggest]],
        "files_over_400_lines": sorted(n for n, c in lines.items() if c > 400),
        "cycles": cycles(import_graph(imps)),
        "function_local_imports": sum(1 for i in imps if i.local),
        "function_local_own_imports": len(local_own_imports(imps)),
        "heavy_top_level_imports": [f"{i.module}:{i.line} {i.target}" for i in heavy_top_level(imps)],
        "layer_violations": violations(imps),
        "modules": {n: {"lines": lines[n], "layer": _layer_text(n)} for n in known},
    }


def _layer_text(module: str) -> str:
    try:
        layer, unit = layer_of(module)
    except KeyError:
        return "?"
    return layer if layer == "package" else f"{layer}:{unit}"


#: CONTRIBUTING.md's layout section sits between these lines; tests/test_layers.py checks it is layout_markdown().
LAYOUT_BEGIN = "<!-- layout: generated by `python scripts/module_map.py --markdown`; do not edit by hand -->"
LAYOUT_END = "<!-- end of the generated layout -->"
WIDTH = 118


def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _entry(name: str, text: str, indent: int = 4, column: int = 20) -> list[str]:
    """`name` in a column, then `text` wrapped at WIDTH under itself."""
    lines, line = [], " " * indent + name.ljust(column - indent - 1)
    for word in text.split():
        if len(line) + 1 + len(word) > WIDTH and line.strip():
            lines.append(line)
            line = " " * (column - 1)
        line += " " + word
    return lines + [line]


def _wrapped(label: str, names: list[str], column: int = 20) -> list[str]:
    lines, line = [], " " * column + label
    for n in names:
        word = n + ("," if n != names[-1] else "")
        if len(line) + 1 + len(word) > WIDTH:
            lines.append(line)
            line = " " * (column + 2) + word
        else:
            line += " " + word
    return lines + [line]


def layout_markdown(root: Path = PACKAGE) -> str:
    """The layout of labkit, one line per core module, topic and tool, each with its docstring's first line."""
    core, topics, tools = _units("core", root), _units("topic", root), _units("tool", root)
    out = [LAYOUT_BEGIN, "```", "labkit/", "  core: labkit/<module>.py and the log parsers' package (import only core)"]
    for name in core:
        path = root / f"{name}.py" if (root / f"{name}.py").exists() else root / name / "__init__.py"
        out += _entry(name + ("/" if path.name == "__init__.py" else ""), _summary(path))
    out.append("  topics: one subpackage per notebook (import core, and the topics in module_map.TOPIC_EDGES)")
    for name in topics:
        out += _entry(name + "/", _summary(root / name / "__init__.py"))
        out += _wrapped("modules:", sorted(p.stem for p in (root / name).glob("*.py") if not p.stem.startswith("__")))
    out.append(f"  tools: labkit/{TOOLS_PACKAGE}/ (import anything)")
    for name in tools:
        path = root / TOOLS_PACKAGE / f"{name}.py"
        if path.exists():
            out += _entry(name, _summary(path))
        else:
            out += _entry(name + "/", _summary(root / TOOLS_PACKAGE / name / "__init__.py"))
    return "\n".join(out + ["```", LAYOUT_END])


def contributing_layout(path: Path = ROOT / "CONTRIBUTING.md") -> str | None:
    """The generated layout as CONTRIBUTING.md holds it now, or None without the two marker lines."""
    text = path.read_text(encoding="utf-8")
    if LAYOUT_BEGIN not in text or LAYOUT_END not in text:
        return None
    return text[text.index(LAYOUT_BEGIN) : text.index(LAYOUT_END) + len(LAYOUT_END)]


def write_contributing(path: Path = ROOT / "CONTRIBUTING.md") -> None:
    """Replace CONTRIBUTING.md's generated layout with layout_markdown()."""
    text, old = path.read_text(encoding="utf-8"), contributing_layout(path)
    if old is None:
        raise SystemExit(f"{path}: no generated layout (the lines {LAYOUT_BEGIN!r} ... {LAYOUT_END!r})")
    path.write_text(text.replace(old, layout_markdown()), encoding="utf-8")


def layout_names(block: str) -> list[str]:
    """The names a layout block lists (layers, modules, topics' modules), without their descriptions."""
    names, in_modules = [], False
    for line in block.splitlines():
        if line.strip().startswith("modules:") or (in_modules and line.startswith(" " * 22)):
            names += [n.strip(",") for n in line.replace("modules:", "").split()]
            in_modules = True
            continue
        in_modules = False
        if line.startswith("    ") and line[4] != " ":
            names.append(line.split()[0])
        elif line.startswith("  ") and line[2] != " ":
            names.append(line.strip())
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", action="store_true", help="CONTRIBUTING.md's layout section")
    p.add_argument("--write-contributing", action="store_true", help="put that section into CONTRIBUTING.md")
    args = p.parse_args(argv)
    if args.markdown:
        print(layout_markdown())
        return 0
    if args.write_contributing:
        write_contributing()
        return 0
    s = summary()
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    for name, m in s["modules"].items():
        print(f"{m['lines']:6d}  {m['layer']:18s} {name}")
    print(
        f"\n{s['files']} files, {s['lines']} lines; largest {s['largest'][0]} ({s['largest'][1]} lines); "
        f"over 400 lines: {', '.join(s['files_over_400_lines']) or 'none'}"
    )
    print(f"import cycles: {len(s['cycles'])}" + "".join(f"\n  {' <-> '.join(c)}" for c in s["cycles"]))
    print(
        f"function-local imports: {s['function_local_imports']}, of labkit's own modules: "
        f"{s['function_local_own_imports']}"
    )
    print(f"heavy third-party imports at the top of a file: {len(s['heavy_top_level_imports'])}")
    print(f"layer violations: {len(s['layer_violations'])}" + "".join(f"\n  {v}" for v in s["layer_violations"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
