"""`labkit run --reference X` / a notebook's `reference=`: what is refused before any kernel starts, and what a
notebook that asks for another kind of data does with an nccl-tests log."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import reference
from labkit.tools import notebooks

#: A shipped raw nccl-tests log whose tables name no collective (its binary's name is not in the log).
UNNAMED = (
    Path(__file__).parents[1]
    / "data/raw/nccl_all_reduce_perf_10GiB__OCI_BM.GPU4.8_8xA100_1node_vs_2node_RoCE__ocitutorials.txt"
)


def test_an_nccl_tests_log_given_to_a_copy_notebook_is_no_copy_data_not_an_error():
    # It raised DatasetError "the log does not name its collective" in notebook 1, which shows copy sweeps: an
    # nccl-tests table can never be one, so its collective does not need settling there.
    names = [d.name for d in reference.resolve_reference(UNNAMED, "copy_sweep")]
    assert names == [d.name for d in reference.load_all(None, "copy_sweep")] and names  # the shipped ones only
    with pytest.raises(reference.DatasetError, match="does not name its collective"):
        reference.resolve_reference(UNNAMED, "collective_sweep")  # where it could be one, it must still be named


def test_a_relative_reference_path_reaches_the_kernel_absolute(monkeypatch, tmp_path):
    # The kernel runs in the notebooks' folder: 'data/raw/x.txt' given from the checkout named no file there and
    # was read as a dataset name ("no dataset named 'data/raw/...'").
    seen = {}
    monkeypatch.setattr(notebooks, "run_notebook", lambda p, out, **kw: seen.setdefault("reference", kw["reference"]))
    monkeypatch.chdir(UNNAMED.parents[2])
    notebooks.run_notebooks(["01"], out_dir=tmp_path, reference=str(UNNAMED.relative_to(UNNAMED.parents[2])))
    assert seen["reference"] == str(UNNAMED.resolve())
    notebooks.run_notebooks(["01"], out_dir=tmp_path, reference=None)  # None stays None
    assert seen["reference"] == str(UNNAMED.resolve())


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty input"),
        ("hello world\n", "no nccl-tests, nvbandwidth, bandwidthTest or p2pBandwidthLatencyTest output found"),
    ],
)
def test_a_log_no_reader_can_read_is_refused_once_before_the_kernels(tmp_path, text, message):
    log = tmp_path / "mine.log"
    log.write_text(text)
    with pytest.raises(ValueError, match=message):
        notebooks.require_reference_exists(str(log), "--reference")


def test_a_path_that_is_neither_file_nor_folder_is_refused():
    with pytest.raises(FileNotFoundError, match="neither a file nor a folder"):
        notebooks.require_reference_exists("/dev/null", "--reference")
