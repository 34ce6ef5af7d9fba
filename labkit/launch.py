"""Launch: run a function on N local processes joined by torch.distributed, from a script or a notebook.

    from labkit.launch import launch
    results = launch(my_worker, world_size=4, backend="gloo", timeout_s=60, args=(nbytes,))

`my_worker(rank, world_size, *args, **kwargs)` runs in each of `world_size` fresh processes with
the default process group already initialised (`torch.distributed` is ready to use); its return
value comes back in `results[rank]`. How it works, step by step:

1. The parent opens a `TCPStore` on 127.0.0.1 with port 0, so the operating system picks a free
   port and no other program can take it between choosing and binding (the rendezvous every
   rank joins; the parent owns it, so it outlives any rank that dies). A port named with
   `port=` must be free, or `PortInUse` says so; a port named only by `MASTER_PORT` in the
   environment is used if free, else a free one is picked with a warning.
2. It starts the ranks from a clean process, never by forking the caller (a Jupyter kernel has
   threads, and a process that has touched CUDA cannot fork a child that uses it). On Linux that is
   multiprocessing's *forkserver*: one server process per caller, started on the first launch,
   imports torch once (it never initialises CUDA) and forks every rank from itself, so a rank is
   ready in about 0.1 s instead of the ~2 s a fresh interpreter needs to import torch. Elsewhere,
   or with `LABKIT_START_METHOD=spawn`, each rank is a fresh interpreter (*spawn*). Both pickle
   `worker_fn` by name, so it must live in an importable module, not in a notebook cell —
   `launch` checks this and says so. The server lives as long as the caller, like
   multiprocessing's resource tracker (about 220 MB with the CPU build of torch). A rank's
   `os.environ` is the caller's as it is at the time of the launch, not as it was when the server
   started; only what a library read while torch was being imported in the server (before any
   launch) keeps the server's value. NCCL and gloo read their variables when the process group
   is created, in the rank; `LABKIT_START_METHOD=spawn` gives every rank a fresh start.
3. Each rank applies `env`, says on its pipe that it has arrived, joins the group with
   `timeout_s` as the init_process_group timeout (rendezvous and collectives: torch's own
   timeout, so a rank waiting for a peer never waits forever), says that it has joined, runs the
   worker, and sends back its result or its formatted traceback through its own pipe.
4. The parent waits on the pipes and the process sentinels together. The first rank to fail
   (an exception, or dying without a word — a signal is named, e.g. SIGKILL) ends the run:
   `RankFailed` names the rank and carries its traceback. If the group has not formed within
   `setup_timeout_s` (default: `timeout_s`), `SetupTimeout` names the ranks that never arrived
   (never called init_process_group). If `timeout_s` passes first, `LaunchTimeout` names the
   ranks still running.
5. Whatever happened, a `finally` block terminates, kills and joins every rank, so no process
   is left behind.

Return plain values or CPU tensors: results are pickled by value (never through shared memory,
which would tie the parent to a child that is about to exit).

At most `MAX_RANKS` ranks; the check comes before anything is started. For teaching and tests,
`env={"LABKIT_SETUP_DELAY": "R:SECONDS"}` makes rank R sleep that long before set-up (a peer
that arrives late, or never).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import multiprocessing as _mp
import os
import pickle
import sys
import time
import traceback
import warnings
from multiprocessing.connection import wait as _wait
from typing import Callable, Sequence

from .processes import TERMINATE_GRACE_S, Reports, exit_text, shutdown, take_report
from .runtime import require_cuda

BACKENDS = ("gloo", "nccl")
#: Start methods launch accepts; see start_method().
START_METHODS = ("forkserver", "spawn")
START_METHOD_VAR = "LABKIT_START_METHOD"
#: Modules the fork server imports once, before it forks any rank.
FORKSERVER_PRELOAD = ("torch", "torch.distributed", "labkit.launch")
#: Default wall-clock budget for a whole launch (process start + rendezvous + work), seconds.
DEFAULT_TIMEOUT_S = 120.0
#: Seconds the parent waits for the last report of a rank whose process has already exited (the
#: pipe may still hold its message).
REPORT_GRACE_S = 1.0
#: After the first failure, seconds to keep listening for other ranks' reports before deciding which
#: rank failed first (its peers' "connection closed" errors arrive within milliseconds).
FAILURE_GRACE_S = 0.5
#: Torch intra-op threads per rank: one, so N ranks on a small machine do not oversubscribe its
#: cores (gloo's own reductions are single-threaded per rank anyway).
DEFAULT_THREADS_PER_RANK = 1
HOST = "127.0.0.1"
#: Most ranks one launch may start. Each rank is a whole Python interpreter with torch imported
#: (a few hundred MB of memory and seconds of start-up each) and gloo connects every pair of ranks
#: (N·(N−1) sockets on one host), so far beyond this a launch on one machine runs out of memory or
#: file descriptors before it teaches anything. A fixed number, not one derived from os.cpu_count():
#: oversubscribing cores is slow but legal (the notebooks run 4-5 ranks on 2 cores), and a bad
#: --ranks must fail the same way on every machine.
MAX_RANKS = 64
#: Environment variable (passed through `env=`) that delays set-up on chosen ranks: "R:SECONDS[,R:SECONDS]".
SETUP_DELAY_VAR = "LABKIT_SETUP_DELAY"


class LaunchError(RuntimeError):
    """A launch did not complete: a rank failed, or the run timed out."""


class RankFailed(LaunchError):
    """A rank raised (or died); `.rank` is which one and `.traceback` is its formatted traceback."""

    def __init__(self, rank: int, error: str, traceback_text: str, others: dict[int, str] | None = None):
        self.rank, self.error, self.traceback = rank, error, traceback_text
        self.others = dict(others or {})  # rank -> error of ranks that failed after it (usually echoes)
        echo = ""
        if self.others:
            echo = (
                f"\n(then rank(s) {', '.join(map(str, sorted(self.others)))} failed too, most likely because "
                f"rank {rank} left the collective: "
                + "; ".join(f"rank {r}: {e.splitlines()[0][:120]}" for r, e in sorted(self.others.items()))
                + ")"
            )
        super().__init__(
            f"rank {rank} failed: {error}{echo}\n\n--- traceback of rank {rank} ---\n{traceback_text.rstrip()}"
        )


class LaunchTimeout(LaunchError):
    """The run took longer than `timeout_s`; `.pending` lists the ranks that had not finished."""

    def __init__(self, timeout_s: float, pending: Sequence[int]):
        self.timeout_s, self.pending = timeout_s, list(pending)
        super().__init__(
            f"timed out after {timeout_s:g} s: rank(s) {', '.join(map(str, self.pending))} had not "
            "finished (a rank waiting for a peer that never sends hangs until the timeout; "
            "look for a straggler or a mismatched send/recv)"
        )


class SetupTimeout(LaunchTimeout):
    """The process group did not form in time; `.missing` lists the ranks that never arrived (never
    called init_process_group), `.waiting` those that did and waited for them."""

    def __init__(self, timeout_s: float, pending: Sequence[int], missing: Sequence[int], waiting: Sequence[int]):
        self.timeout_s, self.pending = timeout_s, list(pending)
        self.missing, self.waiting = list(missing), list(waiting)
        names = lambda rs: ", ".join(map(str, rs))  # noqa: E731
        if self.missing:
            text = (
                f"set-up timed out after {timeout_s:g} s: rank(s) {names(self.missing)} did not arrive (never "
                "called init_process_group: the process did not start, is still starting, or is stuck before "
                "set-up)"
            )
            if self.waiting:
                text += f"; rank(s) {names(self.waiting)} waited for them in init_process_group"
        else:
            text = (
                f"set-up timed out after {timeout_s:g} s: rank(s) {names(self.waiting)} called "
                "init_process_group but the group did not form"
            )
        LaunchError.__init__(self, text)


class PortInUse(LaunchError):
    """The rendezvous port that was asked for is taken by another program."""

    def __init__(self, port: int, source: str):
        self.port = port
        super().__init__(
            f"port {port} on {HOST} ({source}) is already in use — another program, or an earlier "
            "launch still running, is listening on it. Name another port, or leave the port out "
            "(port=None, no MASTER_PORT) so the operating system picks a free one."
        )


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """What a worker may want to know beyond rank and world size (see `rank_info()`)."""

    rank: int
    world_size: int
    backend: str
    device: str  # "cpu" for gloo, "cuda:<i>" for nccl


_INFO: RankInfo | None = None


def rank_info() -> RankInfo:
    """Inside a worker: this rank's rank, world size, backend and device."""
    if _INFO is None:
        raise RuntimeError("rank_info() is only available inside a worker started by labkit.launch.launch")
    return _INFO


def launch(
    worker_fn: Callable,
    world_size: int,
    backend: str = "gloo",
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    args: Sequence = (),
    kwargs: dict | None = None,
    env: dict | None = None,
    threads_per_rank: int | None = DEFAULT_THREADS_PER_RANK,
    setup_timeout_s: float | None = None,
    port: int | None = None,
) -> list:
    """Run `worker_fn(rank, world_size, *args, **kwargs)` on `world_size` processes; return results by rank.

    backend: "gloo" (CPU, always available) or "nccl" (one CUDA device per rank, rank i on GPU i).
    timeout_s: wall-clock limit for the whole launch; also the collective timeout inside the group.
    env: extra environment variables for the ranks only (e.g. {"NCCL_ALGO": "Ring"}); set before
         the process group is created. The parent's environment is not changed.
    threads_per_rank: torch.set_num_threads in each rank (None leaves torch's default).
    setup_timeout_s: seconds (from the start of the launch, process start-up included) for every rank to
         join the group; default and upper limit `timeout_s`.
    port: rendezvous port on 127.0.0.1; None: MASTER_PORT from the environment if set and free, else a
         free port the operating system picks. A `port` given here that is taken raises PortInUse.
    Raises ValueError before anything starts for bad arguments (e.g. more than MAX_RANKS ranks);
    RankFailed (naming the rank, with its traceback), SetupTimeout (naming the ranks that did not
    arrive), LaunchTimeout or PortInUse otherwise; leaves no process behind.
    """
    world_size = _check(worker_fn, world_size, backend, timeout_s)
    if setup_timeout_s is None:
        setup_timeout_s = timeout_s
    if not 0 < setup_timeout_s <= timeout_s:
        raise ValueError(
            f"setup_timeout_s must be positive and at most timeout_s ({timeout_s:g}), got {setup_timeout_s}"
        )
    port, source = _choose_port(port)

    ctx = _context()
    store = _open_store(port, source, timeout_s)
    procs, conns, finished = [], [], False
    try:
        for rank in range(world_size):
            recv_end, send_end = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=_child,
                name=f"labkit-rank{rank}",
                daemon=True,
                args=(
                    worker_fn,
                    rank,
                    world_size,
                    backend,
                    store.port,
                    timeout_s,
                    tuple(args),
                    dict(kwargs or {}),
                    {**os.environ, **(env or {})},
                    threads_per_rank,
                    send_end,
                ),
            )
            p.start()
            send_end.close()  # the parent keeps only the reading end, so EOF means the child is gone
            procs.append(p)
            conns.append(recv_end)
        results = _collect(procs, conns, timeout_s, setup_timeout_s)
        finished = True
        return results
    finally:
        shutdown(procs, let_exit_s=TERMINATE_GRACE_S if finished else 0.0)
        for c in conns:
            c.close()
        del store


def start_method() -> str:
    """How ranks are started: LABKIT_START_METHOD if set, else "forkserver" on Linux and "spawn" elsewhere."""
    method = os.environ.get(START_METHOD_VAR, "").strip() or (
        "forkserver" if sys.platform.startswith("linux") else "spawn"
    )
    if method not in START_METHODS:
        raise ValueError(f"{START_METHOD_VAR} must be one of {START_METHODS}, got {method!r}")
    return method


def _context():
    method = start_method()
    ctx = _mp.get_context(method)
    if method == "forkserver":
        # Takes effect when this process's fork server starts (its first launch); torch is imported
        # there once, so no rank pays for it again. Importing torch does not initialise CUDA.
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    return ctx


def check_world_size(world_size: int) -> int:
    """`world_size` as an int, or ValueError if it is below 1 or above MAX_RANKS (nothing is started)."""
    n = int(world_size)
    if n < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if n > MAX_RANKS:
        raise ValueError(
            f"{n} ranks is more than labkit.launch allows on one machine (MAX_RANKS = {MAX_RANKS}: each "
            "rank is a full Python process with torch, and gloo connects every pair); use fewer ranks"
        )
    return n


def _choose_port(port):
    """(port, where it came from): an explicit port, else MASTER_PORT, else 0 (the OS picks)."""
    if port is not None:
        source = "port="
    elif os.environ.get("MASTER_PORT", "").strip():
        port, source = os.environ["MASTER_PORT"].strip(), "MASTER_PORT"
    else:
        return 0, "free port"
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a port number, got {port!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{source} must be a port number between 0 and 65535, got {port}")
    return port, source


def _open_store(port: int, source: str, timeout_s: float):
    """The parent's TCPStore (the rendezvous) on HOST:port; a taken port is named, or replaced if not asked for."""
    import torch.distributed as dist

    def store_on(p):
        return dist.TCPStore(HOST, p, None, True, timeout=_dt.timedelta(seconds=timeout_s), wait_for_workers=False)

    try:
        return store_on(port)
    except RuntimeError as e:  # DistNetworkError
        if port == 0 or "EADDRINUSE" not in str(e) and "in use" not in str(e):
            raise
        if source == "port=":
            raise PortInUse(port, "asked for with port=") from None
    warnings.warn(
        f"MASTER_PORT={port} is already in use on {HOST}; labkit.launch uses a free port instead",
        RuntimeWarning,
        stacklevel=3,
    )
    return store_on(0)


def _check(worker_fn, world_size, backend, timeout_s) -> int:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    n = check_world_size(world_size)
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if not callable(worker_fn):
        raise TypeError(f"worker_fn must be a function, got {worker_fn!r}")
    module = getattr(worker_fn, "__module__", None)
    qualname = getattr(worker_fn, "__qualname__", "")
    if module in (None, "__main__") or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"worker_fn {qualname or worker_fn!r} must be a top-level function in an importable "
            "module (the ranks import it by name; a function defined in a notebook cell, "
            "a lambda or a nested function cannot be found there). Put it in a .py file."
        )
    if backend == "nccl":
        require_cuda(
            f"backend 'nccl' with {n} ranks (one CUDA device per rank)",
            gpus=n,
            hint=", backend='gloo' (CPU), or fewer ranks",
        )
    return n


def _collect(procs, conns, timeout_s: float, setup_timeout_s: float | None = None) -> list:
    """Wait for every rank's report; raise for the first failure in time, or at the deadline.

    When one rank fails inside a collective its peers usually fail a moment later ("connection
    closed by peer"). Those are echoes, so after the first failure report the parent listens for
    `FAILURE_GRACE_S` more and blames the rank whose exception happened *first* (each rank stamps
    its failure with the system-wide monotonic clock); the echoes go into `RankFailed.others`.

    Each rank also says when it has arrived (is about to call init_process_group) and when it has
    joined the group; a group not formed by `setup_timeout_s` ends the run with `SetupTimeout`,
    naming the ranks that never arrived.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    setup_deadline = start + (timeout_s if setup_timeout_s is None else min(setup_timeout_s, timeout_s))
    n = len(procs)
    st = Reports()
    by_conn = {id(c): r for r, c in enumerate(conns)}
    by_sentinel = {p.sentinel: r for r, p in enumerate(procs)}
    open_conns = list(conns)

    first_failure_seen = float("inf")  # parent's clock when it first learnt of a failure

    def settled(r):
        return r in st.results or r in st.failures

    while not all(settled(r) for r in range(n)):
        now = time.monotonic()
        formed = len(st.joined) == n
        if st.failures and now >= first_failure_seen + FAILURE_GRACE_S:
            break
        if now >= deadline or (not formed and now >= setup_deadline):
            if st.failures:
                break
            if not formed:
                raise _setup_timeout(setup_deadline - start, n, st)
            raise LaunchTimeout(timeout_s, [r for r in range(n) if not settled(r)])
        limit = deadline if formed else min(deadline, setup_deadline)
        wait_s = max(0.0, limit - now) if not st.failures else FAILURE_GRACE_S / 10
        watch = open_conns + [p.sentinel for r, p in enumerate(procs) if not settled(r)]
        for ready in _wait(watch, timeout=wait_s):
            if isinstance(ready, int):  # a process exited: did it report before going?
                r = by_sentinel[ready]
                while conns[r] in open_conns and conns[r].poll(REPORT_GRACE_S):
                    take_report(conns[r], r, st, open_conns)
                if not settled(r):
                    procs[r].join(REPORT_GRACE_S)
                    code = procs[r].exitcode
                    # A silent death is never an echo of another rank's failure, and the parent notices
                    # it late, so it sorts before every reported exception (time = -inf).
                    st.failures[r] = (
                        float("-inf"),
                        f"process ended ({exit_text(code)}) without reporting a result",
                        "(no Python traceback: the process crashed, was killed, or failed while "
                        "starting — its stderr, e.g. the terminal running Jupyter, may say why; a "
                        "script that calls launch() must guard it with "
                        "`if __name__ == '__main__':`)",
                    )
            elif ready in open_conns:
                take_report(ready, by_conn[id(ready)], st, open_conns)
        if st.failures and first_failure_seen == float("inf"):
            first_failure_seen = time.monotonic()
    if st.failures:
        missing = [r for r in range(n) if r not in st.arrived and r not in st.failures]
        if missing and all(r not in st.joined and "timeout" in st.failures[r][1].lower() for r in st.failures):
            # The failed ranks timed out in init_process_group waiting for peers that never came.
            raise _setup_timeout(time.monotonic() - start, n, st)
        first = min(st.failures, key=lambda r: st.failures[r][0])
        _, error, tb = st.failures[first]
        raise RankFailed(first, error, tb, {r: f[1] for r, f in st.failures.items() if r != first})
    return [st.results[r] for r in range(n)]


def _setup_timeout(waited_s: float, n: int, st: "Reports") -> SetupTimeout:
    pending = [r for r in range(n) if r not in st.results]
    missing = [r for r in range(n) if r not in st.arrived]
    waiting = [r for r in range(n) if r in st.arrived and r not in st.joined]
    return SetupTimeout(round(waited_s, 1), pending, missing, waiting)


def _setup_delay(spec: str, rank: int) -> float:
    """Seconds rank `rank` sleeps before set-up, from SETUP_DELAY_VAR ("R:SECONDS[,R:SECONDS]")."""
    for part in filter(None, (x.strip() for x in spec.split(","))):
        r, _, seconds = part.partition(":")
        if int(r) == rank:
            return float(seconds)
    return 0.0


def _child(worker_fn, rank, world_size, backend, port, timeout_s, args, kwargs, env, threads, conn):
    """Entry point of one rank (runs in the new process). `env` is the caller's whole environment at
    launch time with the launch's `env` on top: it replaces what the process inherited (a fork
    server's environment is the caller's as it was when the server started)."""
    global _INFO
    try:
        env = {k: str(v) for k, v in env.items()}
        for k in set(os.environ) - set(env):
            del os.environ[k]
        os.environ.update(env)
        import torch
        import torch.distributed as dist

        if threads:
            torch.set_num_threads(int(threads))
        device = "cpu"
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = f"cuda:{rank}"
        _INFO = RankInfo(rank, world_size, backend, device)
        delay = _setup_delay(os.environ.get(SETUP_DELAY_VAR, ""), rank)
        if delay:
            time.sleep(delay)
        conn.send_bytes(pickle.dumps(("arrived", time.monotonic())))
        timeout = _dt.timedelta(seconds=timeout_s)
        store = dist.TCPStore(HOST, port, None, False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
        conn.send_bytes(pickle.dumps(("joined", time.monotonic())))
        value = worker_fn(rank, world_size, *args, **kwargs)
        payload = pickle.dumps(("ok", value))
    except BaseException as e:  # report everything, KeyboardInterrupt and SystemExit included
        # Report before leaving the group: peers see the connection close only after this is sent.
        payload = pickle.dumps(("error", (time.monotonic(), f"{type(e).__name__}: {e}", traceback.format_exc())))
    conn.send_bytes(payload)
    conn.close()
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # the parent has the result already; a failing teardown changes nothing
        pass
