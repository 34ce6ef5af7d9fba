"""The student edition: no solution text leaks, the copies keep parameters and metadata, and they still run.

The leak check is written here independently of labkit.tools.student: it finds what the convention says
must go (answer <details> blocks, `solution` and `remove-student` cells) in the instructor notebook
and asserts that no sentence of 8 or more words from it is left anywhere in the student copy.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from labkit.check import NOT_ATTEMPTED
from labkit.tools import cli, student
from labkit.tools.notebooks import available, run_notebook

SENTENCE_WORDS = 8  # a run of 8 words copied from an answer is a leak, not a coincidence
ANSWER_BLOCK = re.compile(r"<details\b[^>]*>\s*<summary\b[^>]*>(.*?)</summary\s*>(.*?)</details\s*>", re.S | re.I)


# --------------------------------------------------------------------------- the leak check
def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def solution_parts(nb) -> list[tuple[str, str]]:
    """(kind, text) of everything the convention removes: 'prose' or 'code'."""
    parts = []
    for cell in nb.cells:
        tags = _tags(cell)
        if "solution" in tags or "remove-student" in tags:
            parts.append(("code" if cell.cell_type == "code" else "prose", cell.source))
        elif cell.cell_type == "markdown":
            parts += [
                ("prose", m.group(2))
                for m in ANSWER_BLOCK.finditer(cell.source)
                if re.search(r"answer|solution", m.group(1), re.I)
            ]
    return parts


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def sentences(kind: str, text: str) -> list[str]:
    """Sentences (prose) or lines (code) of at least SENTENCE_WORDS words, normalised to lower-case words."""
    if kind == "code":
        chunks = text.splitlines()
    else:  # sentence ends, blank lines and list items all end a sentence
        chunks = re.split(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[-*+>]|\d+\.)\s)", text)
    out = [_words(c) for c in chunks]
    return [s for s in out if len(s.split()) >= SENTENCE_WORDS]


def everything_in(nb) -> str:
    """All text a learner can see in a notebook file: sources, outputs, metadata."""
    bits = [json.dumps(nb.metadata)]
    for cell in nb.cells:
        bits += [cell.source, json.dumps(cell.get("metadata", {})), json.dumps(cell.get("outputs", []))]
    return f" {_words(' '.join(bits))} "


def leaks(instructor, student_copy) -> list[str]:
    seen = everything_in(student_copy)
    return [s for kind, text in solution_parts(instructor) for s in sentences(kind, text) if f" {s} " in seen]


# --------------------------------------------------------------------------- a synthetic notebook
ANSWER = (
    "Each GPU sends two times seven eighths of the buffer, which is twenty four and a half gigabytes in "
    "total.\nThe factor of two comes from the reduce-scatter followed by the all-gather phase."
)


def synthetic_notebook():
    v4 = nbformat.v4
    nb = v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "labkit": {"synthetic": True},
        }
    )
    solution = v4.new_code_cell(
        "import math\n"
        "bytes_per_gpu = 2 * (8 - 1) / 8 * 14e9  # the reduce-scatter and the all-gather each move seven eighths of it\n"
        "def ring_steps(n):\n    return 2 * (n - 1)\n"
        "steps = ring_steps(8)\n",
        metadata={"tags": ["solution"], "custom": 1},
        execution_count=3,
        outputs=[v4.new_output("stream", name="stdout", text="24500000000.0\n")],
    )
    nb.cells = [
        v4.new_markdown_cell("# Synthetic ring exercise"),
        v4.new_code_cell(
            'mode = "auto"\nquick = False\nreference = None\nresults_path = None', metadata={"tags": ["parameters"]}
        ),
        v4.new_code_cell(
            "from labkit import check\nfrom labkit.runtime import Session\n"
            'session = Session("synthetic", mode, quick, reference, results_path)'
        ),
        v4.new_markdown_cell(
            "**Exercise.** How many bytes does each GPU send in a ring all-reduce of 14 GB on 8 GPUs?\n\n"
            "<details><summary>Hint</summary>Count the steps of both phases.</details>\n\n"
            f"<details><summary>Answer</summary>\n\n{ANSWER}\n</details>"
        ),
        solution,
        v4.new_code_cell(
            'r = check.numeric("bytes per GPU", bytes_per_gpu, 24.5e9)\n'
            's = check.numeric("ring steps", steps, 14)\n'
            'session.note("exercises", **{x.name: x.status for x in (r, s)})'
        ),
        v4.new_code_cell(
            "# Instructor: students usually forget that the all-gather phase moves as many bytes as the "
            "reduce-scatter phase\nprint('instructor only')",
            metadata={"tags": ["remove-student"]},
        ),
        v4.new_markdown_cell(
            "Model answer: the ring is bandwidth optimal because every link carries the same number "
            "of bytes in every step.",
            metadata={"tags": ["solution"]},
        ),
        v4.new_code_cell("session.save()"),
    ]
    nbformat.validate(nb)
    return nb


def test_synthetic_notebook_student_copy():
    nb = synthetic_notebook()
    copy, removed = student.student_notebook(nb, "synthetic")
    assert len(removed) == 4 and len(copy.cells) == len(nb.cells) - 1  # the remove-student cell is gone
    # the answer block is replaced, the hint stays
    md = copy.cells[3].source
    assert student.REMOVED_ANSWER in md and "Count the steps of both phases." in md and "<summary>Answer" not in md
    # the solution cell: same names, set to None; imports kept; metadata kept; outputs stripped
    code = copy.cells[4]
    for line in ("import math", "bytes_per_gpu = None", "ring_steps = None", "steps = None"):
        assert line in code.source.splitlines()
    assert "2 * (8 - 1)" not in code.source and "return" not in code.source
    assert code.metadata == {"tags": ["solution"], "custom": 1} and code.id == nb.cells[4].id
    assert code.outputs == [] and code.execution_count is None
    assert copy.cells[6].source == student.REMOVED_ANSWER  # a markdown cell tagged solution
    assert copy.cells[1] == nb.cells[1]  # the parameters cell, untouched
    assert copy.metadata == nb.metadata
    assert nb.cells[4].source.startswith("import math\nbytes_per_gpu = 2")  # the input is not modified
    # the leak check finds the answers in the instructor notebook (so it is not vacuous) and none in the copy
    assert len(leaks(nb, nb)) >= 4
    assert leaks(nb, copy) == []


def test_convention_errors_and_nesting():
    with pytest.raises(student.StudentEditionError, match="without a matching </details>"):
        student.strip_answers("<details><summary>Answer</summary>forty two", "nb, cell 3")
    nested = (
        "<details><summary>Hints</summary>Think about the steps.\n"
        "<details><summary>Solution</summary>It is forty two.</details></details>"
    )
    text, removed = student.strip_answers(nested)
    assert removed == ["<details><summary>Solution</summary>It is forty two.</details>"]
    assert "Think about the steps." in text and "forty two" not in text
    nb = synthetic_notebook()
    nb.cells[1].metadata["tags"].append("solution")
    with pytest.raises(student.StudentEditionError, match="parameters cell"):
        student.student_notebook(nb, "synthetic")


def test_no_solution_text_leaks_from_any_notebook(tmp_path):
    assert cli.main(["student", "--out", str(tmp_path)]) == 0
    for path in available():
        nb = nbformat.read(str(path), as_version=4)
        copy = nbformat.read(str(tmp_path / path.name), as_version=4)
        assert leaks(nb, copy) == [], f"{path.name}: solution text left in the student edition"
        params = [c for c in copy.cells if "parameters" in _tags(c)]
        assert params == [c for c in nb.cells if "parameters" in _tags(c)], f"{path.name}: parameters cell changed"
        assert copy.metadata == nb.metadata
        assert not any(c.get("outputs") for c in copy.cells if c.cell_type == "code")
        assert len(copy.cells) == sum("remove-student" not in _tags(c) for c in nb.cells)


def _browser_runs_the_student_copies() -> bool:
    """test_browser.py opens every student copy in JupyterLab (and checks what this test checks) when it can run."""
    import browser_helpers as bh

    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return bh.find_browser() is not None


@pytest.mark.notebook
def test_student_copies_still_run(tmp_path):
    # every notebook's student copy, unless the browser test runs them (it does in CI, where a missing
    # browser fails it): about a minute on two cores, two kernels at a time; the synthetic one always
    written = student.build(tmp_path / "student", available())
    assert len(written) == 6
    if _browser_runs_the_student_copies():
        written = []
    synthetic, _ = student.student_notebook(synthetic_notebook(), "synthetic")
    nbformat.write(synthetic, str(tmp_path / "student" / "synthetic.ipynb"))
    written.append(tmp_path / "student" / "synthetic.ipynb")

    def run(path):
        return run_notebook(path, tmp_path / "run", mode="reference", quick=True, timeout=600)

    with ThreadPoolExecutor(max_workers=2) as pool:  # two kernels at once: the machine has two cores
        results = list(pool.map(run, written))
    for r in results:
        assert r["ok"], f"student copy of {r['notebook']} failed: {r['error']} (executed copy: {r['output']})"
        assert r["results"], f"student copy of {r['notebook']} wrote no results JSON"
        experiments = json.loads(open(r["results"]).read())["experiments"]
        for name, info in experiments.items():
            if "exercise" in name:
                statuses = {k: v for k, v in info.items() if v in ("correct", "try again", NOT_ATTEMPTED)}
                assert set(statuses.values()) <= {NOT_ATTEMPTED}, f"{r['notebook']}: {statuses}"
    synthetic_results = json.loads(open(results[-1]["results"]).read())
    assert synthetic_results["experiments"]["exercises"] == {
        "bytes per GPU": NOT_ATTEMPTED,
        "ring steps": NOT_ATTEMPTED,
    }
