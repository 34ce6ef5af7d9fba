"""`labkit site`: the workbook as a static website — every notebook executed, exported to HTML, indexed.

Why plain nbconvert and not a site generator: the pages are the notebooks exactly as the test
suite executes them (papermill + nbconvert are already labkit's executor stack), a build needs no
Node toolchain (jupyter-book 2 / mystmd) and no theme to keep in step with a generator that has
had no release since 2024 (mkdocs 1.6, under mkdocs-jupyter). What a generator would add — an
index with the learning path and a table of contents — is written here in a few dozen lines.

`build_site(out)` executes each notebook in reference mode (replayed recorded systems, plus the
cheap CPU experiments measured on the building machine, labelled so in every figure), exports
each to one self-contained HTML page (figures embedded as PNG), and writes `index.html`: the
learning path 01 → 06 with each notebook's objectives and a table of contents of its sections.
`site.json` lists the pages, their sections and figure counts (tests read it). Math is typeset by
MathJax from a CDN, as nbconvert's template does; offline, formulas show as LaTeX source.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import html
import json
import re
from pathlib import Path

from . import __version__
from .notebooks import available, run_notebook

#: nbconvert template: JupyterLab's look, figures embedded as data: URIs (one file per page).
TEMPLATE = "lab"
_HEADING_RE = re.compile(r'<h([12]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
_TAG_RE = re.compile(r"<[^>]+>")
_IMG_RE = re.compile(r'<img [^>]*src="data:image/(?:png|jpeg|svg\+xml)')


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


def _plain(fragment: str) -> str:
    text = _TAG_RE.sub("", fragment).replace("¶", "")
    return html.unescape(text).strip()


def _intro(nb) -> tuple[str, str, tuple[str, ...]]:
    """Title, first paragraph and numbered objectives from the notebook's first markdown cell."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    lines = (first.source if first else "").splitlines()
    title = next((ln.lstrip("# ").strip() for ln in lines if ln.startswith("# ")), "")
    paragraphs = [p.strip() for p in "\n".join(ln for ln in lines if not ln.startswith("#")).split("\n\n")]
    summary = next((" ".join(p.split()) for p in paragraphs if p and not p.startswith(("**", "$$", "1."))), "")
    objectives = tuple(
        re.sub(r"^\d+\.\s*", "", " ".join(m.split()))
        for m in re.findall(r"^\d+\.\s.*?(?=^\d+\.\s|\Z)", "\n".join(lines), re.M | re.S)
    )
    return title, summary, objectives


def _nav(pages: list[str], i: int) -> str:
    prev = f'<a href="{pages[i - 1]}.html">← {pages[i - 1]}</a>' if i > 0 else ""
    nxt = f'<a href="{pages[i + 1]}.html">{pages[i + 1]} →</a>' if i + 1 < len(pages) else ""
    return (
        '<nav class="labkit-nav" style="font:14px sans-serif;padding:8px 16px;border-bottom:1px solid #ddd;'
        f'display:flex;gap:24px"><a href="index.html">labkit workbook — index</a>{prev}{nxt}</nav>'
    )


def export_page(executed: Path, out_dir: Path, nav: str) -> tuple[str, str]:
    """Export one executed notebook to `out_dir/<stem>.html` with a navigation bar; return (file, body)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(executed), as_version=4)
    body, _ = HTMLExporter(template_name=TEMPLATE).from_notebook_node(nb)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + nav, body, count=1)
    file = f"{executed.stem}.html"
    (out_dir / file).write_text(body, encoding="utf-8")
    return file, body


def page_of(executed: Path, file: str, body: str, seconds: float | None) -> Page:
    import nbformat

    nb = nbformat.read(str(executed), as_version=4)
    title, summary, objectives = _intro(nb)
    sections = tuple((anchor, _plain(text)) for level, anchor, text in _HEADING_RE.findall(body) if level == "2")
    return Page(
        executed.stem, file, title or executed.stem, summary, objectives, sections, len(_IMG_RE.findall(body)), seconds
    )


def _md(text: str) -> str:
    """Inline markdown (emphasis, code) of a summary or objective, as HTML."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    out = markdown2html_mistune(text).strip()
    return out[3:-4] if out.startswith("<p>") and out.endswith("</p>") else out


def index_html(pages: list[Page], built: str) -> str:
    items = []
    for p in pages:
        objectives = "".join(f"<li>{_md(o)}</li>" for o in p.objectives)
        toc = "".join(f'<li><a href="{p.file}#{a}">{html.escape(t)}</a></li>' for a, t in p.sections)
        items.append(f"""<li class="notebook"><h2><a href="{p.file}">{html.escape(p.title)}</a></h2>
<p>{_md(p.summary)}</p>
{f"<p><b>You will be able to</b></p><ol>{objectives}</ol>" if objectives else ""}
<details><summary>Contents ({len(p.sections)} sections, {p.figures} figures)</summary><ul>{toc}</ul></details></li>""")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>labkit — how data moves between CPUs and GPUs</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 1em;color:#222}}
ol.path>li{{margin-bottom:1.5em}} h2{{margin-bottom:.2em}} .meta{{color:#666;font-size:14px}}</style></head>
<body><h1>labkit — how data moves between CPUs and GPUs, and between GPUs</h1>
<p>Six notebooks that measure PCIe latency, pinned and pageable copies, copy/compute overlap, GPU
peer-to-peer, ring AllReduce written by hand and the bandwidth cliff from GPU memory to the network.
These pages were executed in <b>reference mode</b>: GPU experiments replay recorded measurements from
named real systems (each figure names its source); CPU experiments (host memory, gloo) were measured on
the machine that built the site and say so. Run the notebooks yourself to measure your own machine.</p>
<h2>The learning path</h2>
<ol class="path">{"".join(items)}</ol>
<p class="meta">Built {html.escape(built)} with labkit {__version__}.</p>
</body></html>
"""


def build_site(out_dir, *, executed_dir=None, quick: bool = False, timeout: float = 1800, progress=print) -> list[Page]:
    """Write the site into `out_dir`; execute the notebooks unless `executed_dir` holds executed copies.

    Raises RuntimeError naming every notebook that failed to execute (the site is then not written).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [p.stem for p in available()]
    executed: dict[str, tuple[Path, float | None]] = {}
    if executed_dir is not None:
        for name in names:
            path = Path(executed_dir) / f"{name}.ipynb"
            if not path.exists():
                raise FileNotFoundError(
                    f"{path}: no executed copy of {name} (run the notebooks first, "
                    "or build without executed_dir to execute them)"
                )
            executed[name] = (path, None)
    else:
        failed = []
        for path in available():
            progress(f"executing {path.stem} (reference mode{', quick' if quick else ''}) …")
            r = run_notebook(path, out / "_executed", mode="reference", quick=quick, timeout=timeout)
            if not r["ok"]:
                failed.append(f"{path.stem}: {r['error']}")
            executed[path.stem] = (Path(r["output"]), r["seconds"])
        if failed:
            raise RuntimeError("the site was not built; these notebooks failed:\n  " + "\n  ".join(failed))
    pages = []
    for i, name in enumerate(names):
        path, seconds = executed[name]
        file, body = export_page(path, out, _nav(names, i))
        pages.append(page_of(path, file, body, seconds))
        progress(f"wrote {file} ({pages[-1].figures} figures)")
    built = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (out / "index.html").write_text(index_html(pages, built), encoding="utf-8")
    (out / "site.json").write_text(
        json.dumps({"built": built, "labkit": __version__, "pages": [dataclasses.asdict(p) for p in pages]}, indent=2)
        + "\n"
    )
    return pages
