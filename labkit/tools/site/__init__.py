"""`labkit site`: the workbook as a course website — Sphinx with myst-nb and the book theme.

`build_site(out)` executes each notebook in reference mode (replayed recorded systems, plus the cheap
CPU experiments measured on the building machine, labelled so in every figure) unless `executed_dir`
holds executed copies, prepares a reader's copy of each (`labkit.tools.site.prepare`: machinery cells
hidden by tags, titles numbered "1 · …", Colab and download links, no build-machine paths), and
renders them with Sphinx: myst-nb reads the notebooks with `nb_execution_mode = "off"` (the outputs
are those of the reference-mode run), sphinx-book-theme gives the sidebar with the learning path and
each page's sections, Sphinx's own search index gives offline full-text search, and MathJax is served
from the site itself (`labkit.tools.site.sphinx`). `site.json` lists the pages, their sections and figure
counts (tests read it).

Why Sphinx + myst-nb + sphinx-book-theme (compared 2026-11-25, every candidate installed or read here):
- it installs from PyPI alone (`pip install 'labkit-workbook[site]'`), builds with no network, and its
  parts are the Executable Books project's maintained stack (myst-nb 1.4, sphinx-book-theme 1.4, 2026);
- jupyter-book 2 (mystmd) needs Node.js and downloads its site theme from api.mystmd.org on the first
  build (mystmd issue #1451: no offline build) — outside the package registries;
- quarto-cli on PyPI is an sdist whose setup.py downloads the Quarto binary from GitHub releases;
- mkdocs-jupyter + mkdocs-material would work offline, but MkDocs itself has had no release since 1.6.1
  (2024-08) and its math would still need a local MathJax wired in by hand.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
import shutil
from pathlib import Path

from ... import __version__
from ..notebooks import CELL_TIMEOUT_S, available, find_notebook, run_notebook
from . import prepare
from . import sphinx as sphinx_site

#: the extra that installs what the site needs
EXTRA = "site"
_SECTION_RE = re.compile(r'<section id="([^"]+)">\s*<h2>(.*?)<a class="headerlink"', re.S)
_TITLE_RE = re.compile(r"<title>(.*?)</title>", re.S)
_FIGURE_RE = re.compile(r'<img [^>]*src="_images/')
_TAG_RE = re.compile(r"<[^>]+>")


@dataclasses.dataclass(frozen=True)
class Page:
    """One notebook's page: file name, title, one-paragraph summary, sections (anchor, text), figures."""

    notebook: str
    file: str
    title: str
    summary: str
    objectives: tuple[str, ...]
    sections: tuple[tuple[str, str], ...]
    figures: int
    executed_seconds: float | None


def require_tools() -> None:
    """Raise RuntimeError naming the extra to install when Sphinx, myst-nb, the theme or MathJax are missing."""
    missing = []
    for module, package in (
        ("sphinx", "sphinx"),
        ("myst_nb", "myst-nb"),
        ("sphinx_book_theme", "sphinx-book-theme"),
        ("jupyter_server_mathjax", "jupyter-server-mathjax"),
    ):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise RuntimeError(
            f"building the site needs {', '.join(missing)}, not installed: install the site extra, "
            f"pip install 'labkit-workbook[{EXTRA}]' (or pip install -e '.[{EXTRA}]' in a checkout)"
        )


def _intro(nb) -> tuple[str, tuple[str, ...]]:
    """First paragraph and the objectives (the list, numbered or bulleted, that follows "You will be able
    to") from the notebook's first markdown cell."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    lines = (first.source if first else "").splitlines()
    paragraphs = [p.strip() for p in "\n".join(ln for ln in lines if not ln.startswith("#")).split("\n\n")]
    summary = next((" ".join(p.split()) for p in paragraphs if p and not p.startswith(("**", "$$", "1.", "<"))), "")
    start = next((i + 1 for i, ln in enumerate(lines) if "you will be able to" in ln.lower()), 0)
    items: list[str] = []
    for ln in lines[start:]:
        item = re.match(r"^(?:\d+\.|[-*])\s+(.*)", ln)
        if item:
            items.append(item.group(1).strip())
        elif items and ln.strip() and ln[:1].isspace():
            items[-1] += " " + ln.strip()
        elif items:
            break
    return summary, tuple(items)


def _plain(fragment: str) -> str:
    import html

    return html.unescape(_TAG_RE.sub("", fragment)).strip()


def page_of(name: str, out: Path, nb, seconds: float | None) -> Page:
    """What the built page `out/<name>.html` holds: its title, sections and figures."""
    body = (out / f"{name}.html").read_text(encoding="utf-8")
    m = _TITLE_RE.search(body)
    title = _plain(m.group(1)).split(" — ")[0] if m else name
    sections = tuple((anchor, _plain(text)) for anchor, text in _SECTION_RE.findall(body))
    summary, objectives = _intro(nb)
    return Page(name, f"{name}.html", title, summary, objectives, sections, len(_FIGURE_RE.findall(body)), seconds)


def _execute(out: Path, names, executed_dir, quick, timeout, progress) -> dict[str, tuple[Path, float | None]]:
    executed: dict[str, tuple[Path, float | None]] = {}
    if executed_dir is not None:
        for name in names:
            path = Path(executed_dir) / f"{name}.ipynb"
            if not path.exists():
                raise FileNotFoundError(
                    f"{path}: no executed copy of {name} (run the notebooks first, "
                    "or build without --executed to execute them)"
                )
            executed[name] = (path, None)
        return executed
    failed = []
    for path in available():
        progress(f"executing {path.stem} (reference mode{', quick' if quick else ''}) …")
        r = run_notebook(path, out / "_executed", mode="reference", quick=quick, timeout=timeout)
        if not r["ok"]:
            failed.append(f"{path.stem}: {r['error']}")
        executed[path.stem] = (Path(r["output"]), r["seconds"])
    if failed:
        raise RuntimeError("the site was not built; these notebooks failed:\n  " + "\n  ".join(failed))
    return executed


def build_site(
    out_dir, *, executed_dir=None, quick: bool = False, timeout: float = CELL_TIMEOUT_S, progress=print
) -> list[Page]:
    """Write the site into `out_dir`; execute the notebooks unless `executed_dir` holds executed copies.

    Raises RuntimeError naming the extra when the site tools are missing, naming every
    notebook that failed to execute (the site is then not written) or the Sphinx error.
    """
    import tempfile

    import nbformat

    require_tools()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    names = [p.stem for p in available()]
    executed = _execute(out, names, executed_dir, quick, timeout, progress)
    roots = prepare.build_roots(out, executed_dir)
    repo = sphinx_site.repository()
    notebooks = {}
    with tempfile.TemporaryDirectory(prefix="labkit-site-") as tmp:
        src = Path(tmp)
        (src / "_extra" / "notebooks").mkdir(parents=True)
        for name in names:
            nb = nbformat.read(str(executed[name][0]), as_version=4)
            notebooks[name] = nb
            reader = prepare.reader_copy(
                nb, colab_url=sphinx_site.colab_url(repo, name), download=f"notebooks/{name}.ipynb", roots=roots
            )
            nbformat.write(reader, str(src / f"{name}.ipynb"))
            # the download is the notebook as committed: no outputs, ready to run
            shutil.copyfile(find_notebook(name), src / "_extra" / "notebooks" / f"{name}.ipynb")
        summaries = {n: _intro(nb) for n, nb in notebooks.items()}
        titles = {n: prepare.title_of(nb) or n for n, nb in notebooks.items()}
        sphinx_site.write_sources(src, names, titles, summaries, repo)
        progress(f"rendering {len(names)} pages with Sphinx …")
        sphinx_site.run_sphinx(src, out)
    pages = [page_of(n, out, notebooks[n], executed[n][1]) for n in names]
    for p in pages:
        progress(f"wrote {p.file} ({p.figures} figures)")
    built = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (out / "site.json").write_text(
        json.dumps({"built": built, "labkit": __version__, "pages": [dataclasses.asdict(p) for p in pages]}, indent=2)
        + "\n"
    )
    return pages
