"""The student edition: copies of the notebooks with the solutions taken out (`labkit student --out DIR`).

The convention (CONTRIBUTING.md, "Solutions and the student edition"):
- markdown: a `<details>` block whose `<summary>` says "Answer" or "Solution" becomes one line,
  `REMOVED_ANSWER`; a markdown cell tagged `solution` becomes that line as a whole;
- a code cell tagged `solution` becomes a placeholder that sets the names the cell assigned to
  `None` (found with `ast`), so the self-checks below it report "not attempted";
- a cell tagged `remove-student` is dropped.
Everything else is kept as it is — the `parameters` cell, cell ids and metadata — and outputs are
stripped. Each copy is written atomically; all notebooks are converted before any is written, so a
notebook that breaks the convention stops the build with nothing half-written.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from pathlib import Path

from ..fileio import atomic_write_text
from .notebooks import available, find_notebook

SOLUTION_TAG = "solution"
REMOVE_TAG = "remove-student"
PARAMETERS_TAG = "parameters"
REMOVED_ANSWER = "*(answer removed in the student edition — discuss it, then check the instructor edition)*"
#: words in a <summary> that mark a block as an answer (case-insensitive)
ANSWER_WORDS = ("answer", "solution")

_OPEN = re.compile(r"<details\b[^>]*>", re.IGNORECASE)
_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)
_SUMMARY = re.compile(r"^\s*<summary\b[^>]*>(.*?)</summary\s*>", re.IGNORECASE | re.DOTALL)


class StudentEditionError(ValueError):
    """A notebook breaks the solution convention; the message names the notebook and the cell."""


@dataclasses.dataclass(frozen=True)
class Removed:
    """One piece of solution text taken out of a notebook (for reports and leak tests)."""

    cell: int  # index of the cell in the instructor notebook
    what: str  # "details", "solution cell", "remove-student cell"
    text: str


# --------------------------------------------------------------------------- markdown
def _details_spans(text: str, where: str) -> list[tuple[int, int, int]]:
    """(start, end, depth) of every <details>…</details> block, outermost first; unbalanced tags raise."""
    tokens = sorted(
        [(m.start(), m.end(), +1) for m in _OPEN.finditer(text)]
        + [(m.start(), m.end(), -1) for m in _CLOSE.finditer(text)]
    )
    spans, stack = [], []
    for start, end, step in tokens:
        if step > 0:
            stack.append(start)
        elif not stack:
            raise StudentEditionError(f"{where}: </details> without a matching <details>")
        else:
            spans.append((stack.pop(), end, len(stack)))
    if stack:
        raise StudentEditionError(f"{where}: <details> without a matching </details> — the answer would leak")
    return sorted(spans, key=lambda s: (s[2], s[0]))


def _is_answer(block: str) -> bool:
    m = _SUMMARY.match(block[_OPEN.match(block).end() :])
    return bool(m) and any(w in m.group(1).lower() for w in ANSWER_WORDS)


def strip_answers(text: str, where: str = "markdown") -> tuple[str, list[str]]:
    """Replace each answer <details> block (the outermost one, where they nest) with REMOVED_ANSWER."""
    removed, cut = [], []
    for start, end, _ in _details_spans(text, where):
        if any(a <= start and end <= b for a, b in cut):
            continue  # inside a block already removed
        if _is_answer(text[start:end]):
            cut.append((start, end))
    for start, end in sorted(cut, reverse=True):
        removed.append(text[start:end])
        text = text[:start] + REMOVED_ANSWER + text[end:]
    return text, removed[::-1]


# --------------------------------------------------------------------------- code
def assigned_names(source: str, where: str = "code cell") -> list[str]:
    """Names a cell binds at top level (assignments, defs, loop and with targets), in order; imports excluded."""
    # IPython syntax (%magic, !shell) is not Python: blank it out, it binds nothing
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError as e:
        raise StudentEditionError(
            f"{where}: the solution cell is not valid Python ({e.msg}, line {e.lineno})"
        ) from None
    names: list[str] = []

    def targets(node):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, ast.Starred):
            targets(node.value)
        # attribute and subscript targets (x.a = …, x[i] = …) bind no new name

    def visit(stmts):
        for node in stmts:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets(node.target)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target)
                visit(node.body + node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
                visit(node.body)
            elif isinstance(node, (ast.If, ast.While)):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.NamedExpr):
                targets(node.value.target)

    visit(tree.body)
    return list(dict.fromkeys(names))


def _imports(source: str) -> list[str]:
    """Top-level import statements of a cell, verbatim (they reveal nothing and later cells may need them)."""
    try:
        tree = ast.parse(
            "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        )
    except SyntaxError:
        return []
    return [ast.get_source_segment(source, n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def placeholder(source: str, where: str = "code cell") -> str:
    """The student's version of a solution cell: the same names, set to None."""
    names = assigned_names(source, where)
    lines = [
        "# Your turn: the solution was removed in the student edition.",
        "# Replace each None with your answer or your code; the self-checks below say",
        '# "not attempted" while a value is None.',
    ]
    lines += _imports(source)
    lines += [f"{n} = None" for n in names]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- notebooks
def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def student_notebook(nb, name: str = "notebook"):
    """(student copy, [Removed]) for an nbformat notebook; the input is not modified."""
    out = copy.deepcopy(nb)
    cells, removed = [], []
    for i, cell in enumerate(out.cells):
        tags = _tags(cell)
        where = f"{name}, cell {i}"
        if PARAMETERS_TAG in tags and (SOLUTION_TAG in tags or REMOVE_TAG in tags):
            raise StudentEditionError(
                f"{where}: the parameters cell cannot also be tagged "
                f"{SOLUTION_TAG!r} or {REMOVE_TAG!r} (papermill needs it)"
            )
        if REMOVE_TAG in tags:
            removed.append(Removed(i, "remove-student cell", cell.source))
            continue
        if cell.cell_type == "markdown":
            if SOLUTION_TAG in tags:
                removed.append(Removed(i, "solution cell", cell.source))
                cell.source = REMOVED_ANSWER
            else:
                cell.source, blocks = strip_answers(cell.source, where)
                removed += [Removed(i, "details", b) for b in blocks]
        elif cell.cell_type == "code":
            if SOLUTION_TAG in tags:
                removed.append(Removed(i, "solution cell", cell.source))
                cell.source = placeholder(cell.source, where)
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    out.cells = cells
    return out, removed


def _atomic_write_notebook(nb, path: Path) -> None:
    import nbformat

    atomic_write_text(path, nbformat.writes(nb) + "\n")  # as nbformat.write: a final newline


def build(out_dir, notebooks=None) -> list[Path]:
    """Write student copies of `notebooks` (names or paths; default: every notebook) into out_dir."""
    paths = [find_notebook(str(n)) for n in notebooks] if notebooks else available()
    if not paths:
        raise FileNotFoundError("no notebooks to convert")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} is a file, not a folder: give --out a folder for the student copies")
    import nbformat  # after the checks above: its import takes a second or two

    if any(Path(p).resolve().parent == out_dir.resolve() for p in paths):
        raise FileExistsError(f"{out_dir} holds the instructor notebooks; write the student edition elsewhere")
    converted = []
    for p in paths:  # convert all first: a broken notebook stops the build before anything is written
        nb = nbformat.read(str(p), as_version=4)
        student, _ = student_notebook(nb, Path(p).name)
        nbformat.validate(student)
        converted.append((Path(p).name, student))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, student in converted:
        _atomic_write_notebook(student, out_dir / filename)
        written.append(out_dir / filename)
    return written
