"""Files follow the umask: an instructor's profile and student edition can be read by the learners' accounts."""

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from labkit import fileio
from labkit.tools.record import record
from labkit.tools.student import build

NOBODY = 65534  # the unprivileged account every Linux distribution has


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def shared_folder():
    """A folder every account may enter, as a workshop's shared folder is (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="labkit-shared-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _can_switch_user() -> bool:
    """Root with setpriv, and allowed to use it (a container may drop CAP_SETUID): else modes are checked."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    switch = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "true"]
    return subprocess.run(switch, capture_output=True, timeout=30).returncode == 0


def read_as_another_user(path: Path) -> str:
    """The file's text as read by the `nobody` account (setpriv), or by its mode bits where no switch is possible."""
    if not _can_switch_user():
        assert path.stat().st_mode & stat.S_IROTH, f"{path} is not readable by other users"
        return path.read_text()
    r = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "cat", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, f"another user cannot read {path}: {r.stderr.strip()}"
    return r.stdout


def test_a_profile_and_a_student_edition_are_readable_by_another_user(umask_022, shared_folder):
    profile = record(shared_folder / "profile", quick=True, only=["copy"], progress=lambda *_: None)
    assert stat.S_IMODE(profile.stat().st_mode) == 0o755
    files = sorted(profile.iterdir())
    assert {p.name for p in files} >= {"profile.json", "host_copy_sweep.csv", "host_copy_sweep.meta.json"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
        assert read_as_another_user(p) == p.read_text()
    student = build(shared_folder / "student", ["01"])
    assert len(student) == 1
    assert stat.S_IMODE(student[0].stat().st_mode) == 0o644
    assert '"cells"' in read_as_another_user(student[0])


def test_atomic_writes_take_the_mode_the_umask_gives(tmp_path):
    old = os.umask(0o077)  # a private umask stays private
    try:
        f = fileio.atomic_write_text(tmp_path / "a.json", "{}\n")
        d = fileio.temporary_folder(tmp_path / "profile")
    finally:
        os.umask(old)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and stat.S_IMODE(d.stat().st_mode) == 0o700
    os.umask(0o002)  # a group-shared umask (a workshop group): group may write
    try:
        assert fileio.umask() == 0o002
        f = fileio.atomic_write_bytes(tmp_path / "a.json", b"[]\n")  # replaces the file atomically
        d = fileio.temporary_folder(tmp_path / "profile2")
    finally:
        os.umask(old)
    assert stat.S_IMODE(f.stat().st_mode) == 0o664 and stat.S_IMODE(d.stat().st_mode) == 0o775
    assert f.read_bytes() == b"[]\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["a.json"], "a temporary file was left"


def test_an_atomic_write_that_cannot_happen_names_the_file_and_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        fileio.atomic_write_text(tmp_path / "missing" / "a.json", "x")
    assert e.value.filename == str(tmp_path / "missing" / "a.json")
    target = tmp_path / "is_a_folder"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        fileio.atomic_write_text(target, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["is_a_folder"]
