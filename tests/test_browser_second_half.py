"""The second half of the notebooks in a real JupyterLab and Chromium (see test_browser.py, which holds
the checks and runs the first half): a file of its own so that another pytest-xdist worker runs it, with
its own server and browser, while test_browser.py runs the first half."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser import (  # noqa: F401 (fixtures, module-scoped: this file gets its own server and browser)
    SECOND_HALF,
    TIMEOUT_S,
    artifacts,
    browser,
    check_notebook_in_jupyterlab,
    chromium,
    lab,
    no_leftovers,
    started,
    student_copies,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize("notebook", SECOND_HALF, ids=lambda p: p.stem)
def test_notebook_in_jupyterlab(notebook: Path, lab, started, artifacts, record_property):  # noqa: F811
    check_notebook_in_jupyterlab(notebook, lab, started[notebook.stem], artifacts, record_property)
