"""Run the workbook's notebooks headless with papermill (and export HTML), as `labkit run` does."""

from __future__ import annotations

import os
import time
from pathlib import Path

from .. import reference
from ..fileio import atomic_write_text
from ..logs import LogFormatError, parse_log
from ..reference import closest

#: Seconds one notebook cell may run before papermill gives up (`labkit run/site --timeout`).
CELL_TIMEOUT_S = 1800

NOTEBOOKS = (
    "01_pcie_latency_curve",
    "02_pinned_vs_pageable",
    "03_overlap",
    "04_p2p_matrix",
    "05_ring_allreduce_by_hand",
    "06_hierarchy_cliff",
)


def notebooks_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # labkit/
    for candidate in (package.parent / "notebooks", package / "_notebooks"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no notebooks folder next to {package}")


def find_notebook(name: str) -> Path:
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p
    d = notebooks_dir()
    hits = sorted(d.glob(f"{p.stem}*.ipynb")) or sorted(d.glob(f"*{p.stem}*.ipynb"))
    if len(hits) > 1:
        raise FileNotFoundError(f"{name!r} matches several notebooks: {', '.join(x.stem for x in hits)}")
    if not hits:
        have = [x.stem for x in sorted(d.glob("*.ipynb"))]
        raise FileNotFoundError(f"no notebook named {name!r}; {closest(name, have)}")
    return hits[0]


def require_reference_exists(ref, flag: str = "reference=") -> None:
    """Refuse, before any kernel starts, a `reference` that names nothing a notebook can replay.

    A notebook accepts a profile folder or a shipped profile's name, a log file or a folder of logs,
    a dataset's CSV path, or a dataset name (shipped or imported); see labkit.reference.resolve_reference.
    """
    if ref is None:
        return
    path = Path(ref)
    if path.exists() and not (path.is_dir() or path.is_file()):  # /dev/null, a pipe: nothing to replay
        raise FileNotFoundError(
            f"{flag} {str(ref)!r} is neither a file nor a folder: give a log, a profile or a dataset"
        )
    if path.is_file() and path.suffix != ".csv" and not path.name.endswith(".meta.json"):
        try:  # a log no reader can read fails here, once, rather than in every notebook's kernel
            parse_log(path)
        except LogFormatError as e:
            raise ValueError(f"{flag} {e}") from None
        return
    if path.exists() or reference.profile_path(ref) is not None or str(ref) in reference.list_datasets():
        return
    if os.sep in str(ref) or Path(ref).suffix:  # a path
        raise FileNotFoundError(f"{flag} {str(ref)!r}: no such file or folder")
    names = reference.list_profiles() + reference.list_datasets()
    raise FileNotFoundError(
        f"{flag} {str(ref)!r}: no such profile folder, log file, dataset or shipped profile; {closest(ref, names)} "
        "(see `labkit ref list` and `labkit ref profiles`)"
    )


def available() -> list[Path]:
    return [p for p in sorted(notebooks_dir().glob("*.ipynb"))]


#: What `labkit run` / `labkit site` need beyond labkit's core (the `[run]` extra).
RUN_EXTRA_HINT = "pip install 'labkit-workbook[run]'  (papermill, nbconvert and a Jupyter kernel)"


def require_executor():
    """papermill, imported; a clear error naming the extra when the executor stack is not installed."""
    try:
        import nbconvert  # noqa: F401 - the HTML export needs it too
        import papermill
    except ImportError as e:
        raise RuntimeError(f"executing notebooks needs {e.name}, which is not installed: {RUN_EXTRA_HINT}") from None
    return papermill


def copy_notebooks(out_dir, *, force: bool = False) -> list[Path]:
    """Copy the instructor notebooks (as shipped, without outputs) into `out_dir`; return the copies.

    Refuses to overwrite a notebook that is already there unless `force` (it may hold a learner's work).
    """
    import shutil

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sources = available()
    clash = [out / p.name for p in sources if (out / p.name).exists()]
    if clash and not force:
        raise FileExistsError(
            f"{clash[0]} exists (it may hold your work); pass --force to overwrite, or pick another --out"
        )
    copies = []
    for src in sources:
        shutil.copyfile(src, out / src.name)
        copies.append(out / src.name)
    return copies


def run_notebook(
    path,
    out_dir,
    *,
    mode="reference",
    quick=True,
    reference=None,
    html=False,
    timeout=CELL_TIMEOUT_S,
    extra_parameters: dict | None = None,
) -> dict:
    """Execute one notebook; returns {notebook, ok, seconds, output, results, error}."""
    pm = require_executor()

    path = Path(path)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / path.name
    results = out_dir / f"{path.stem}.results.json"
    params = {
        "mode": mode,
        "quick": quick,
        "reference": None if reference is None else str(reference),
        "results_path": str(results.resolve()),
        **(extra_parameters or {}),
    }
    # The kernel inherits this environment: a non-inline MPLBACKEND (Agg, set by test runners) would
    # stop figures from being drawn into the notebook, and so from its HTML export.
    os.environ.pop("MPLBACKEND", None)
    t0 = time.perf_counter()
    error = None
    try:
        pm.execute_notebook(
            str(path),
            str(output),
            parameters=params,
            cwd=str(path.parent),
            execution_timeout=timeout,
            progress_bar=False,
            kernel_name="python3",
        )
    except Exception as e:  # PapermillExecutionError carries the cell and traceback
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else e}"
    seconds = time.perf_counter() - t0
    if html and output.exists():
        export_html(output)
    return {
        "notebook": path.stem,
        "ok": error is None,
        "seconds": seconds,
        "output": str(output),
        "results": str(results) if results.exists() else None,
        "error": error,
    }


def export_html(ipynb: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(ipynb), as_version=4)
    body, _ = HTMLExporter().from_notebook_node(nb)
    out = Path(ipynb).with_suffix(".html")
    return atomic_write_text(out, body)


def run_notebooks(names=None, out_dir="artifacts/run", **kw) -> list[dict]:
    paths = [find_notebook(n) for n in names] if names else available()
    require_reference_exists(kw.get("reference"))  # before any kernel starts
    if kw.get("reference") is not None and Path(kw["reference"]).exists():
        kw["reference"] = str(Path(kw["reference"]).resolve())  # a kernel runs in the notebooks' folder, not here
    return [run_notebook(p, out_dir, **kw) for p in paths]
