"""The order the suite's files start in (tests/conftest.py): browser, then notebook, then other slow files first."""

from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest


class _Item:
    def __init__(self, path: str, *marks: str):
        self.path, self.marks = Path(path), set(marks)

    def get_closest_marker(self, name):
        return name if name in self.marks else None  # pytest returns the Mark, or None

    def __repr__(self):
        return f"{self.path.name}{sorted(self.marks)}"


def test_longest_files_first_keeps_each_file_together_and_in_order():
    items = [
        _Item("test_a.py"),
        _Item("test_a.py"),
        _Item("test_nb.py", "notebook"),
        _Item("test_nb.py"),  # a file ranks by its highest-ranked test
        _Item("test_slow.py", "slow"),
        _Item("test_b.py"),
        _Item("test_browser.py", "browser", "slow"),
        _Item("test_browser.py", "browser", "slow"),
    ]
    order = list(items)
    conftest._longest_files_first(items)
    assert items == [order[6], order[7], order[2], order[3], order[4], order[0], order[1], order[5]]


@pytest.mark.parametrize(
    ("dist", "args", "reorder"),
    [("loadfile", (), False), ("loadfile", ("--loadscope-reorder",), True), ("load", (), True)],
)
def test_xdist_keeps_the_collection_order_of_files_unless_asked(dist, args, reorder):
    config = SimpleNamespace(
        option=SimpleNamespace(dist=dist, loadscopereorder=True), invocation_params=SimpleNamespace(args=args)
    )
    conftest.pytest_configure(config)
    assert config.option.loadscopereorder is reorder
