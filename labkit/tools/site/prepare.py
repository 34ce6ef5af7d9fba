"""The site's copy of an executed notebook: what a reader sees, made from what ran.

Nothing here touches the notebooks in `notebooks/` or changes an output's numbers. On a copy of each
executed notebook it
- tags `remove-cell` on cells a reader does not need: the `parameters` cell, papermill's
  `injected-parameters` cell (it holds the build machine's `results_path`), the `colab-install` cell,
  and code cells that only keep the results file (`session.check/note/number/shown/save`, printing the
  saved summary); in the other code cells such top-level bookkeeping statements are left out of the
  code shown (their output, if any, stays);
- numbers the title the same way everywhere: "# 01 · The PCIe latency curve" → "# 1 · The PCIe latency curve";
- adds, under the title, "Open in Colab" and "Download the notebook" links;
- replaces build-machine folders in outputs (the checkout, the virtual environment, the build and temporary
  folders) by what they stand for, so no page shows where it was built.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import sys
import tempfile
from pathlib import Path

#: cell tags that mark a cell as machinery (set in the notebooks, or by papermill)
HIDDEN_TAGS = ("parameters", "injected-parameters", "colab-install")
#: `session.<method>(…)` calls that only feed the results file the tests read
BOOKKEEPING = frozenset({"check", "note", "number", "shown", "save"})
_TITLE_RE = re.compile(r"^#\s+0*(\d+)\s*[·.:-]\s*(.+)$", re.M)


def is_bookkeeping(stmt: ast.stmt, saved: set[str]) -> bool:
    """True for `session.check(…)`-style calls, `summary = session.save()` (adding `summary` to `saved`),
    and statements that use a saved summary or `results_path` (printing where the results went) —
    not the `Session(…, results_path)` that the notebook's experiments go through."""
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "session":
            if f.attr == "save" and isinstance(stmt, ast.Assign):
                saved.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
                return True
            discarded = isinstance(stmt, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id == "_" for t in stmt.targets
            )
            return (isinstance(stmt, ast.Expr) or discarded) and f.attr in BOOKKEEPING
        if isinstance(f, ast.Name) and f.id == "Session":
            return False
    if isinstance(stmt, (ast.For, ast.If)):  # a loop or branch that only records
        block = stmt.body + stmt.orelse
        return all(is_bookkeeping(s, saved) for s in block)
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    attrs = {
        (n.value.id, n.attr) for n in ast.walk(stmt) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }
    return bool(names & (saved | {"results_path"})) or ("session", "checks") in attrs


def shown_source(source: str, has_result: bool = False, saved: set[str] | None = None) -> tuple[str | None, bool]:
    """The code a reader sees: `source` less its top-level bookkeeping statements (None if nothing is left),
    and whether what is left is silent (only assignments and imports: any printed output came from the
    statements left out).

    A cell that is not plain Python (magics) is shown as it is. When the cell displayed a result
    (`has_result`), its last statement stays whatever it is.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, False
    body = tree.body
    saved = set() if saved is None else saved
    drop = [s for s in body if is_bookkeeping(s, saved) and not (has_result and s is body[-1])]
    drop += _nested(s for s in body if s not in drop)
    if not drop:
        return source, False
    kept_stmts = [s for s in body if s not in drop]
    silent = all(isinstance(s, _SILENT) for s in kept_stmts)
    lines = source.splitlines()
    gone = set()
    for s in drop:
        gone.update(range(s.lineno - 1, s.end_lineno))
        # a comment block right above a dropped statement describes it: leave it out too
        i = s.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#") and i not in gone:
            gone.add(i)
            i -= 1
    kept = [ln for i, ln in enumerate(lines) if i not in gone]
    if not kept_stmts:
        return None, True
    return "\n".join(kept).strip("\n"), silent


_SILENT = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import, ast.ImportFrom)


def _nested(statements) -> list[ast.stmt]:
    """Bookkeeping statements inside blocks (`if`, `for`, `with`, `try`) that keep another statement."""
    drop = []
    for stmt in statements:
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(stmt, field, None)
            if not isinstance(block, list) or not block:
                continue
            if field == "handlers":
                drop += _nested(block)
                continue
            here = [s for s in block if is_bookkeeping(s, set())]
            if len(here) < len(block):
                drop += here
            drop += _nested(s for s in block if s not in here)
    return drop


def numbered_title(source: str) -> str:
    """ "# 01 · Title" → "# 1 · Title" (the first heading only)."""
    return _TITLE_RE.sub(lambda m: f"# {int(m.group(1))} · {m.group(2).strip()}", source, count=1)


def title_of(nb) -> str:
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    m = _TITLE_RE.search(numbered_title(first.source)) if first else None
    return f"{int(m.group(1))} · {m.group(2).strip()}" if m else ""


def links_html(colab_url: str, download: str) -> str:
    return (
        '<p class="labkit-links">'
        f'<a class="labkit-colab" href="{colab_url}">Open in Colab</a> '
        f'<a class="labkit-download" href="{download}" download>Download the notebook (.ipynb)</a></p>'
    )


def build_roots(*extra) -> list[tuple[str, str]]:
    """(folder, what it stands for) pairs to take out of outputs, longest first."""
    checkout = Path(__file__).resolve().parents[3]  # labkit/tools/site/prepare.py → the checkout (or site-packages)
    roots = [(str(Path(p).resolve()), "") for p in extra if p]
    roots += [(str(checkout), ""), (sys.prefix, "<venv>"), (os.path.realpath(sys.prefix), "<venv>")]
    roots += [(os.path.realpath(tempfile.gettempdir()), "<tmp>"), (tempfile.gettempdir(), "<tmp>")]
    roots.append((str(Path.home()), "~"))
    seen, out = set(), []
    for root, name in sorted(roots, key=lambda r: -len(r[0])):
        if root not in seen and len(root) > 1:
            seen.add(root)
            out.append((root, name))
    return out


def scrub(text: str, roots) -> str:
    for root, name in roots:
        if root in text:
            text = re.sub(re.escape(root) + r"/?", (name + "/") if name else "", text)
    return text


def _scrub_output(out, roots) -> None:
    if "text" in out:
        out["text"] = scrub(out["text"], roots)
    if "traceback" in out:
        out["traceback"] = [scrub(t, roots) for t in out["traceback"]]
    for mime, value in out.get("data", {}).items():
        if mime.startswith("text/") or mime in ("application/javascript",):
            out["data"][mime] = scrub(value, roots) if isinstance(value, str) else [scrub(v, roots) for v in value]


def reader_copy(nb, *, colab_url: str, download: str, roots=()) -> object:
    """A copy of executed notebook `nb` prepared for the site (see the module docstring)."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # widget state would make the page load a widget manager from a CDN
    first_md = True
    saved: set[str] = set()  # names that hold session.save()'s summary
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "markdown" and first_md:
            first_md = False
            src = numbered_title(cell.source)
            lines = src.splitlines()
            at = next((i for i, ln in enumerate(lines) if ln.startswith("# ")), -1)
            lines.insert(at + 1, "\n" + links_html(colab_url, download) + "\n")
            cell.source = "\n".join(lines)
        if cell.cell_type != "code":
            continue
        hidden = any(t in tags for t in HIDDEN_TAGS)
        if not hidden:
            if _ends_in_bookkeeping(cell.source, saved):  # its displayed value is the check's True
                cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "execute_result"]
            outputs = cell.get("outputs", [])
            has_result = any(o.get("output_type") == "execute_result" for o in outputs)
            shown, silent = shown_source(cell.source, has_result, saved)
            shows = any(o.get("output_type") in ("display_data", "execute_result") for o in outputs)
            if shown is None or (silent and not shows and outputs):
                # only bookkeeping, or what is left printed nothing: a figure it drew stays, without code
                if shows:
                    tags.append("remove-input")
                else:
                    hidden = True
            else:
                cell.source = shown
        if hidden and "remove-cell" not in tags:
            tags.append("remove-cell")
        cell.metadata["tags"] = tags
        for out in cell.get("outputs", []):
            _scrub_output(out, roots)
    return nb


def _ends_in_bookkeeping(source: str, saved: set[str]) -> bool:
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return bool(body) and is_bookkeeping(body[-1], set(saved))
