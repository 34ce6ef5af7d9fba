"""The Sphinx project behind `labkit site`: conf.py, the index page, local MathJax, the build itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ... import __version__

#: where the project is published when no package metadata says otherwise ([project.urls] Repository)
DEFAULT_REPOSITORY = "https://github.com/labkit-workbook/labkit"
SITE_TITLE = "labkit: how data moves between CPUs and GPUs"

CONF = """\
# Written by labkit.tools.site for one build; see labkit/tools/site/sphinx.py.
project = {project!r}
version = release = {version!r}
extensions = ["myst_nb"]
exclude_patterns = ["_build", "_extra", "**.ipynb_checkpoints"]
# the notebooks were executed by labkit's reference-mode run (papermill); render their outputs as they are
nb_execution_mode = "off"
nb_ipywidgets_js = {{}}  # widgets were rendered as static views; no widget manager from a CDN
nb_render_markdown_format = "myst"  # markdown outputs (display(Markdown(...))) get the same math as cells
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 2
html_theme = "sphinx_book_theme"
html_title = {title!r}
html_static_path = ["_static"]
html_extra_path = ["_extra"]
html_css_files = ["labkit.css"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {{
    "repository_url": {repository!r},
    "use_repository_button": False,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "toc_title": "On this page",
}}
# MathJax 2.7 from the site itself (the jupyter-server-mathjax package's copy): no network needed to read
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {{
    # myst-nb marks a notebook's section tex2jax_ignore and its formulas class "math" (as MathJax 3 expects)
    "tex2jax": {{
        "inlineMath": [["\\\\(", "\\\\)"]],
        "displayMath": [["\\\\[", "\\\\]"]],
        "processEscapes": True,
        "ignoreClass": "tex2jax_ignore|mathjax_ignore",
        "processClass": "math|tex2jax_process|mathjax_process|output_area",
    }},
    "HTML-CSS": {{"availableFonts": [], "webFont": "STIX-Web", "imageFont": None}},
    "showMathMenu": False,
    "messageStyle": "none",
}}
"""

CSS = """\
.labkit-links { display: flex; gap: .75em; flex-wrap: wrap; margin: .5em 0 1.5em; }
.labkit-links a { border: 1px solid var(--pst-color-border); border-radius: 4px; padding: .25em .75em;
  text-decoration: none; font-size: .9em; }
.labkit-path > li { margin-bottom: 1.2em; }
"""


def repository() -> str:
    """The repository URL from the installed package's metadata ([project.urls] Repository in pyproject.toml)."""
    from importlib import metadata

    try:
        for entry in metadata.metadata("labkit-workbook").get_all("Project-URL") or []:
            name, _, url = entry.partition(",")
            if name.strip().lower() == "repository":
                return url.strip().rstrip("/")
    except metadata.PackageNotFoundError:
        pass
    return DEFAULT_REPOSITORY


def colab_url(repo: str, name: str) -> str:
    """Open notebook `name` from the repository's main branch in Colab (as the README's badges do)."""
    path = re.sub(r"^https?://github\.com/", "", repo)
    return f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{name}.ipynb"


def mathjax_dir() -> Path:
    import jupyter_server_mathjax

    return Path(jupyter_server_mathjax.__file__).parent / "static"


def index_md(names, titles: dict, summaries: dict, repo: str) -> str:
    """The home page: what the course is, the learning path with objectives, the (sidebar) table of contents."""
    items = []
    for n in names:
        summary, objectives = summaries[n]
        item = f"- **[{titles[n]}]({n}.ipynb)**: {summary}"
        if objectives:
            item += "\n\n   You will be able to:\n\n" + "\n".join(f"   - {o}" for o in objectives)
        items.append(item)
    toctree = "\n".join(names)
    path = "\n\n".join(items)
    return f"""# {SITE_TITLE}

Six notebooks that measure PCIe latency, pinned and pageable copies, copy/compute overlap, GPU
peer-to-peer, ring AllReduce written by hand, and the bandwidth cliff from GPU memory to the network.

These pages were executed in **reference mode**: GPU experiments replay recorded measurements from
named real systems (each figure names its source); CPU experiments (host memory, gloo) were measured on
the machine that built the site and say so. Cells that only set parameters, install labkit on Colab or
record results for the test suite are not shown; the downloadable notebooks have them. Run the
notebooks yourself (each page has an "Open in Colab" link) to measure your own machine.

## The learning path

{path}

Source: [{repo}]({repo}) · labkit {__version__}

```{{toctree}}
:hidden:
:maxdepth: 2
:caption: The learning path

{toctree}
```
"""


def write_sources(src: Path, names, titles: dict, summaries: dict, repo: str) -> None:
    """conf.py, index.md, the stylesheet and MathJax into the Sphinx source folder `src`."""
    src = Path(src)
    (src / "conf.py").write_text(
        CONF.format(project=SITE_TITLE, version=__version__, title="labkit workbook", repository=repo),
        encoding="utf-8",
    )
    (src / "index.md").write_text(index_md(names, titles, summaries, repo), encoding="utf-8")
    static = src / "_static"
    static.mkdir(exist_ok=True)
    (static / "labkit.css").write_text(CSS, encoding="utf-8")
    shutil.copytree(mathjax_dir(), static / "mathjax", dirs_exist_ok=True)


def run_sphinx(src: Path, out: Path, timeout: float = 600) -> None:
    """`sphinx-build -b html` in a child process (Sphinx keeps global state); raise with its log on failure."""
    doctrees = Path(out) / ".doctrees"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", "-d", str(doctrees), str(src), str(out)]
    env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"sphinx-build did not finish in {timeout:g} s (rendering the pages into {out})") from None
    if r.returncode != 0:
        raise RuntimeError(f"sphinx-build failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    shutil.rmtree(doctrees, ignore_errors=True)
    warnings = [ln for ln in r.stderr.splitlines() if "WARNING" in ln]
    if warnings:
        print(f"sphinx: {len(warnings)} warnings, first: {warnings[0][:300]}", file=sys.stderr)
