"""Writing files atomically, with the permissions the user's umask gives (as `open()` would).

Everything labkit writes for a user (profiles, datasets, notebooks, results JSON) goes through here,
so that a reader sees either the old file or the complete new one, never half of one, and so that
an instructor's profile in a shared folder can be read by the learners' accounts. `tempfile`'s
mkstemp/mkdtemp create 0600 files and 0700 folders whatever the umask; the helpers below give the
temporary file or folder the mode `open()`/`mkdir()` would (0o666/0o777 less the umask) before it is
renamed into place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's umask, read without changing it where Linux says it (/proc/self/status, 4.7+)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere the only way to read it is to set it; put it straight back
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets from `open()` under this umask: 0o666 & ~umask (0o644 under umask 022)."""
    return 0o666 & ~umask()


def folder_mode() -> int:
    """The mode a new folder gets from `mkdir()` under this umask: 0o777 & ~umask (0o755 under umask 022)."""
    return 0o777 & ~umask()


def _named(e: OSError, path: Path) -> OSError:
    """The same error about `path` (the file the user asked for), not about a hidden temporary name."""
    return OSError(e.errno, e.strerror, str(path))  # OSError(errno, ...) is the right subclass again


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` through a temporary sibling renamed into place; mode as the umask gives."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise _named(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), file_mode())
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _named(e, path) from None
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """`atomic_write_bytes` for text (UTF-8 unless told)."""
    return atomic_write_bytes(path, text.encode(encoding))


def temporary_folder(dest: str | os.PathLike) -> Path:
    """A new hidden folder next to `dest` (`.NAME.partial-XXXX`), to be filled and renamed onto `dest`.

    Its mode is what `mkdir()` gives under the umask (mkdtemp's is 0700). An error names `dest`.
    """
    dest = Path(dest)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    except OSError as e:
        raise _named(e, dest) from None
    os.chmod(tmp, folder_mode())
    return tmp


def replace_folder(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Rename the complete folder `tmp` (from `temporary_folder`) onto `dest`, an existing `dest` included.

    A folder cannot be renamed over a non-empty one, so an existing `dest` is first renamed aside and removed only
    once `tmp` is in place (put back if that fails): `dest` is never half written, only absent for the instant
    between the two renames.
    """
    tmp, dest = Path(tmp), Path(dest)
    if not dest.exists():
        os.replace(tmp, dest)
        return
    backup = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    os.replace(dest, backup)
    try:
        os.replace(tmp, dest)
    except BaseException:
        os.replace(backup, dest)
        raise
    shutil.rmtree(backup, ignore_errors=True)
