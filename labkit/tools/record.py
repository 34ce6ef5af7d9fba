"""`labkit record`: run every experiment this machine can run; write one profile folder atomically.

The profile is written into a temporary sibling folder and renamed into place only when complete,
so an interrupted run leaves either the previous profile or a complete new one, and no temporary
folder. Ctrl-C (SIGINT) and SIGTERM act only while the recorders run; while the temporary folder
is made, swapped into place or removed they are held and act right after, so a signal (or a
second Ctrl-C during the clean-up) can never cut those steps in half. Each experiment's recorder
lives in its experiment's module (labkit.tools.benches): `record(folder, quick, env) -> list[str]` (dataset
names written), and returns [] when this machine cannot run it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path

from ..fileio import atomic_write_text, replace_folder, temporary_folder
from ..reference import PROFILE_FILE, data_dir
from ..schema import SCHEMA_VERSION
from ..system import environment
from .benches import load, recorders

#: experiment → module with a `record(folder, quick, env)` function; None: every experiment in
#: labkit.tools.benches.BENCHES whose module defines one (tests put their own recorders here).
RECORDERS: dict[str, str] | None = None


def record(out: str | os.PathLike, quick: bool = False, force: bool = False, only=None, progress=print) -> Path:
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file, not a profile folder: give --out a new folder's name")
    shipped = data_dir().resolve()
    if out == shipped or shipped in out.parents:  # --force or not: a profile replaces the whole folder it names
        raise ValueError(
            f"--out {out} is inside labkit's shipped reference data ({shipped}): record into a folder of your own "
            f"(a shipped profile is copied into {shipped / 'profiles'} afterwards, untouched)"
        )
    if out.exists() and any(out.iterdir()):
        if not (out / PROFILE_FILE).exists():  # --force replaces a profile, never a folder of other files
            raise FileExistsError(
                f"{out} holds files but no labkit profile (no {PROFILE_FILE}): give --out a new or empty folder"
            )
        if not force:
            raise FileExistsError(f"{out} already holds a profile; pass --force to replace it")
    known = recorders() if RECORDERS is None else RECORDERS
    unknown = set(only or ()) - set(known)
    if unknown:
        raise ValueError(
            f"--only {', '.join(sorted(unknown))}: unknown experiment; choose from {', '.join(sorted(known))}"
        )
    env = environment(command="labkit record", parameters={"quick": quick, "only": only})
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(e.errno, f"cannot make the folder that holds it ({e.strerror})", str(out)) from None
    # Ctrl-C and SIGTERM act only while the recorders run (`gate.open`); at any other moment they
    # are held and act when record() returns, so no KeyboardInterrupt can fall between making the
    # temporary folder and knowing its name, between the two renames of the swap, or into the
    # clean-up after a first interrupt. The gate opens and closes by one attribute store each,
    # which no signal can come between.
    gate = _InterruptGate()
    try:
        gate.install()
        try:  # its mode is what the umask gives, so learners' accounts can read an instructor's profile
            tmp = temporary_folder(out)
        except OSError as e:
            raise OSError(e.errno, f"cannot create a folder there ({e.strerror})", str(out)) from None
        try:
            try:
                gate.open = True
                gate.act_on_held()
                written = _run_recorders(known, tmp, quick, only, env, progress)
            finally:
                gate.open = False
            info = {
                "schema_version": SCHEMA_VERSION,
                "created": env["date"],
                "host": env["host"],
                "experiments": written,
                "environment": env,
            }
            atomic_write_text(tmp / PROFILE_FILE, json.dumps(info, indent=2, default=str) + "\n")
            replace_folder(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        gate.uninstall()
    return out


def _run_recorders(known: dict, tmp: Path, quick: bool, only, env: dict, progress) -> dict:
    """Run each selected experiment's recorder into `tmp`; returns experiment → dataset names."""
    written = {}
    for name, mod_name in known.items():
        if only and name not in only:
            continue
        mod = load(mod_name)
        if mod is None:
            progress(f"record: {name}: not available in this version, skipped")
            continue
        names = mod.record(tmp, quick, env)
        written[name] = list(names)
        progress(f"record: {name}: {', '.join(names) if names else 'this machine cannot run it, skipped'}")
    if not any(written.values()):
        raise RuntimeError("no experiment could run on this machine; nothing recorded")
    return written


class _InterruptGate:
    """The SIGINT/SIGTERM handler while `record` runs: KeyboardInterrupt while open, held while closed.

    Python runs signal handlers in the main thread, between bytecodes, whichever OS thread the
    signal reached — so holding has to happen here, in the handler: blocking the signals in the
    main thread's mask would not stop the kernel handing them to another thread (torch's, a
    pool's), and Python would still raise KeyboardInterrupt in the main thread. A held signal is
    raised again once the old handlers are back (`uninstall`), so it acts as it would have then.
    Signals reach Python handlers only in the main thread; elsewhere this installs nothing.
    A signal that was ignored (SIG_IGN) stays ignored.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.open = False
        self.held: list[int] = []
        self.old: dict[int, object] = {}

    def __call__(self, signum, frame):
        if not self.open:
            self.held.append(signum)
            return
        old = self.old.get(signum)
        if signum == signal.SIGINT and callable(old):
            old(signum, frame)  # Python's default_int_handler: KeyboardInterrupt
        else:  # SIGTERM, too, becomes KeyboardInterrupt, so the partial folder is cleaned up as on Ctrl-C
            raise KeyboardInterrupt(f"signal {signum}")

    def install(self) -> None:
        if not _main_thread():
            return
        for signum in self.SIGNALS:
            old = signal.getsignal(signum)
            if old is None or old == signal.SIG_IGN:  # not set from Python, or ignored: leave it
                continue
            self.old[signum] = old
            signal.signal(signum, self)

    def act_on_held(self) -> None:
        """Called just after opening: a signal held before the recorders started interrupts them now."""
        if self.held:
            self(self.held.pop(0), None)

    def uninstall(self) -> None:
        old, self.old = self.old, {}
        try:
            if signal.SIGTERM in old:
                signal.signal(signal.SIGTERM, old[signal.SIGTERM])
        finally:
            if signal.SIGINT in old:
                signal.signal(signal.SIGINT, old[signal.SIGINT])
        held, self.held = list(dict.fromkeys(self.held)), []
        for signum in held:
            signal.raise_signal(signum)  # the old handler acts now (KeyboardInterrupt, or the end)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
