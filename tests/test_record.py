"""`labkit record`: a profile folder written atomically, replayable, never half-written, never clobbering."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import reference
from labkit.record import record

HERE = Path(__file__).resolve().parent


def test_record_host_only_profile_and_replay(tmp_path):
    out = tmp_path / "profile"
    record(out, quick=True, only=["copy"], progress=lambda *_: None)
    info = json.loads((out / "profile.json").read_text())
    assert info["experiments"]["copy"] == ["host_copy_sweep"]
    assert info["environment"]["labkit"]
    ds = reference.load("host_copy_sweep", out)
    assert ds.meta["provenance"] == "measured" and ds.label.startswith("measured here:")
    assert ds.meta["environment"]["host"] == info["host"]
    # a notebook's reference= accepts the folder: its datasets come first, then the shipped ones
    got = reference.resolve_reference(out, "copy_sweep")
    assert got[0].name == "host_copy_sweep" and len(got) > 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary folders left behind"


def test_record_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "profile"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="--force"):
        record(out, quick=True, only=["copy"], progress=lambda *_: None)
    assert (out / "keep.txt").read_text() == "mine"
    record(out, quick=True, only=["copy"], force=True, progress=lambda *_: None)
    assert not (out / "keep.txt").exists() and (out / "profile.json").exists()


def test_shipped_data_is_never_overwritten_without_force():
    before = sorted(p.name for p in reference.data_dir().iterdir())
    with pytest.raises(FileExistsError, match="shipped reference data"):
        record(reference.data_dir(), quick=True, only=["copy"], progress=lambda *_: None)
    assert sorted(p.name for p in reference.data_dir().iterdir()) == before


def test_unknown_experiment_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown experiment"):
        record(tmp_path / "p", only=["teleport"], progress=lambda *_: None)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("previous", [False, True])
def test_interrupted_record_leaves_previous_profile_or_nothing(tmp_path, sig, previous):
    out = tmp_path / "profile"
    if previous:
        record(out, quick=True, only=["copy"], progress=lambda *_: None)
        before = {p.name: p.read_bytes() for p in out.iterdir()}
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import labkit.record as r\n"
        "r.RECORDERS = {'slow': 'slow_recorder'}\n"
        "r.record(%r, force=True)\n" % (str(HERE), str(out))
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert not leftovers, f"partial folders left: {leftovers}"
    if previous:
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    else:
        assert not out.exists()


@pytest.mark.notebook
def test_a_recorded_profile_folder_is_replayed_by_a_notebook(tmp_path, run_nb):
    """An instructor's `labkit record` folder, given as reference=, is what notebook 01 shows first."""
    import shutil

    prof = tmp_path / "classroom_node"  # a real recorded profile (1x H100), as an instructor would hand it out
    shutil.copytree(reference.profile_path("h100_pcie5_vm_20261123"), prof)
    r = run_nb("01_pcie_latency_curve", reference=str(prof))
    assert r["reference"] == str(prof)
    assert r["datasets"][0] == "gpu_copy_sweep"  # the profile's sweep, ahead of the shipped ones
    assert r["all_checks_passed"], r["checks"]
