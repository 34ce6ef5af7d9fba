"""`labkit record`: a profile folder written atomically, replayable, never half-written, never clobbering."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import reference
from labkit.tools.cli import main
from labkit.tools.record import record

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
    _previous_profile(out)
    (out / "note.txt").write_text("mine")  # a file of the old profile's folder: gone once it is replaced
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(FileExistsError, match="--force"):
        record(out, quick=True, only=["copy"], progress=lambda *_: None)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    record(out, quick=True, only=["copy"], force=True, progress=lambda *_: None)
    assert not (out / "note.txt").exists() and (out / "profile.json").exists()


@pytest.mark.parametrize("force", [False, True])
def test_record_never_replaces_a_folder_that_is_not_a_profile(tmp_path, force):
    out = tmp_path / "Documents"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="no labkit profile"):
        record(out, quick=True, only=["copy"], force=force, progress=lambda *_: None)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("inside", ["", "profiles/h100_pcie5_vm_20261123", "profiles/new"])
def test_record_refuses_an_out_inside_the_shipped_data_even_with_force(tmp_path, monkeypatch, capsys, inside, force):
    # a stand-in for the shipped data/ folder, so that a regression replaces a copy, not the checkout's data
    shipped = tmp_path / "data"
    (shipped / "profiles" / "h100_pcie5_vm_20261123").mkdir(parents=True)
    (shipped / "profiles" / "h100_pcie5_vm_20261123" / "profile.json").write_text("{}")
    (shipped / "a.meta.json").write_text("{}")
    monkeypatch.setattr("labkit.tools.record.data_dir", lambda: shipped)
    monkeypatch.setattr("labkit.tools.record.RECORDERS", {"copy": "labkit.copies.bench_copy"})
    before = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*"))
    assert main(["record", "--out", str(shipped / inside), "--quick", "--only", "copy", *force]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inside labkit's shipped reference data" in err[0] and "--out" in err[0], err
    assert sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*")) == before


def test_unknown_experiment_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown experiment"):
        record(tmp_path / "p", only=["teleport"], progress=lambda *_: None)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("previous", [False, True])
def test_interrupted_record_leaves_previous_profile_or_nothing(tmp_path, sig, previous):
    out = tmp_path / "profile"
    before = _previous_profile(out) if previous else None
    proc = _record_in_child(out)
    _interrupt_after_ready(proc, sig)
    _assert_previous_profile_or_nothing(tmp_path, out, before)


@pytest.mark.parametrize("previous", [False, True])
def test_a_second_interrupt_during_the_clean_up_still_leaves_no_partial_folder(tmp_path, previous):
    """Ctrl-C pressed twice: the second one arrives just as the partial folder is being removed."""
    out = tmp_path / "profile"
    before = _previous_profile(out) if previous else None
    second_ctrl_c = (
        "import os, shutil, signal\n"
        "_rmtree = shutil.rmtree\n"
        "def rmtree(path, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return _rmtree(path, *args, **kwargs)\n"
        "shutil.rmtree = rmtree\n"
    )
    proc = _record_in_child(out, prelude=second_ctrl_c)
    _interrupt_after_ready(proc, signal.SIGINT)
    _assert_previous_profile_or_nothing(tmp_path, out, before)


def test_an_interrupt_between_the_two_renames_of_the_swap_leaves_a_whole_profile(tmp_path):
    """Ctrl-C just after the previous profile was moved aside, before the new one took its place."""
    out = tmp_path / "profile"
    before = _previous_profile(out)
    ctrl_c_mid_swap = (
        "import os, signal\n"
        "_replace = os.replace\n"
        "def replace(src, dst, **kwargs):\n"
        "    _replace(src, dst, **kwargs)\n"
        "    if os.fspath(src) == %r:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "os.replace = replace\n" % os.path.realpath(out)
    )
    proc = _record_in_child(out, prelude=ctrl_c_mid_swap, env={"SLOW_RECORDER_SLEEP": "0"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, f"the Ctrl-C was lost; stderr:\n{err[-3000:]}"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert not leftovers, f"folders left beside the profile: {leftovers}"
    now = {p.name: p.read_bytes() for p in out.iterdir()} if out.exists() else None
    new_profile = (
        now is not None
        and json.loads(now.get("profile.json", b"{}")).get("experiments") == {"slow": ["half_done"]}
        and {"half_done.csv", "half_done.meta.json"} <= set(now)
    )
    assert now == before or new_profile, f"neither the previous profile nor a whole new one: {sorted(now or [])}"


def _previous_profile(out: Path) -> dict:
    """Record a small profile into `out`; return its files' bytes, to check they survive untouched."""
    record(out, quick=True, only=["copy"], progress=lambda *_: None)
    return {p.name: p.read_bytes() for p in out.iterdir()}


def _assert_previous_profile_or_nothing(tmp_path: Path, out: Path, before: dict | None) -> None:
    """No partial folder beside `out`; `out` holds exactly `before` (the previous profile) or does not exist."""
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert not leftovers, f"partial folders left: {leftovers}"
    if before is not None:
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    else:
        assert not out.exists()


def _record_in_child(out: Path, prelude: str = "", env: dict | None = None) -> subprocess.Popen:
    """`labkit record` into `out` in a child process whose only recorder is tests/slow_recorder.py."""
    code = (
        "import sys; sys.path.insert(0, %r)\n" % str(HERE) + prelude + "import labkit.tools.record as r\n"
        "r.RECORDERS = {'slow': 'slow_recorder'}\n"
        "r.record(%r, force=True)\n" % str(out)
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _interrupt_after_ready(proc: subprocess.Popen, sig: int, timeout: float = 30) -> None:
    """Send `sig` once the slow recorder has written half a profile; the child must then exit non-zero."""
    try:
        ready = proc.stdout.readline().strip()
        if ready != "READY":
            proc.wait(timeout=timeout)
            pytest.fail(
                f"the child never reached the slow recorder (rc {proc.returncode}, stdout {ready!r}); "
                f"stderr:\n{proc.stderr.read()[-3000:]}"
            )
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"still running {timeout:.0f} s after signal {sig}; stderr:\n{proc.stderr.read()[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, f"exit status 0 after signal {sig}; stderr:\n{proc.stderr.read()[-3000:]}"


# A recorded profile folder replayed by notebook 01 (reference=): tests/test_executors.py, in its nbconvert run.
