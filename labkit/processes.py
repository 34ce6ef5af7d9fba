"""The processes of a launch: what a rank reports on its pipe, stopping ranks, and the process tree left behind.

labkit.launch starts the ranks and waits for them with these; `descendants()` checks that nothing outlives a
launch (labkit bench soak) and stops every process torchrun started.
"""

from __future__ import annotations

import pickle
import signal
import time

#: Seconds a rank gets to exit on its own after SIGTERM before it is killed with SIGKILL.
TERMINATE_GRACE_S = 2.0


class Reports:
    """What the ranks have said so far."""

    def __init__(self):
        self.results: dict[int, object] = {}
        self.failures: dict[int, tuple[float, str, str]] = {}  # rank -> (when, error, traceback)
        self.arrived: set[int] = set()  # about to call init_process_group
        self.joined: set[int] = set()  # init_process_group returned


def take_report(conn, rank: int, st: Reports, open_conns: list) -> None:
    """Read one message of `rank`; its last one (result or error) or EOF closes its pipe for listening."""
    try:
        payload = conn.recv_bytes()
    except (EOFError, OSError):
        open_conns.remove(conn)
        return
    status, value = pickle.loads(payload)
    if status == "arrived":
        st.arrived.add(rank)
        return
    if status == "joined":
        st.arrived.add(rank)
        st.joined.add(rank)
        return
    open_conns.remove(conn)
    if status == "ok":
        st.results[rank] = value
    else:
        st.failures[rank] = value  # (when, error, traceback)


def _join_within(procs, seconds: float) -> None:
    """Join every process, all of them together waiting `seconds` at most."""
    end = time.monotonic() + seconds
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))


def shutdown(procs, let_exit_s: float = 0.0) -> None:
    """Let ranks exit on their own for `let_exit_s` (after success), then terminate, kill and join the rest."""
    _join_within(procs, let_exit_s)
    for p in procs:
        if p.is_alive():
            p.terminate()
    _join_within(procs, TERMINATE_GRACE_S)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
        p.close()


def exit_text(code) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} ({-code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


#: multiprocessing's own helper processes: one of each per parent, started by its first launch and meant
#: to live as long as the parent does. Recognised by their command line.
MP_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def descendants(pid: int | None = None, *, helpers: bool = True) -> set[int]:
    """PIDs of the live (non-zombie) descendants of `pid` (default: this process).

    `helpers=False` leaves out multiprocessing's helpers among the direct children (MP_HELPERS); what a
    fork server forked (a rank, which carries the server's command line) still counts. Used to check that
    nothing outlives a launch (labkit bench soak) and to stop every process torchrun started.
    """
    return _process_tree(pid)[0 if helpers else 1]


def helper_processes(pid: int | None = None) -> set[int]:
    """PIDs of multiprocessing's helpers among the children of `pid` (resource tracker, fork server)."""
    return _process_tree(pid)[2]


def _process_tree(pid: int | None) -> tuple[set[int], set[int], set[int]]:
    """(every live descendant, the same less the helpers, the helpers)."""
    import psutil

    every, found, helpers = set(), set(), set()
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return every, found, helpers
    for child in children:
        try:
            is_helper = any(h in " ".join(child.cmdline()) for h in MP_HELPERS)
            tree = [child] + child.children(recursive=True)
        except psutil.Error:
            continue
        if is_helper:
            helpers.add(child.pid)
        for proc in tree:
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
            except psutil.Error:
                continue
            every.add(proc.pid)
            if proc is not child or not is_helper:
                found.add(proc.pid)
    return every, found, helpers
