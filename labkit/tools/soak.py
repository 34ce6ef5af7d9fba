"""Soak: many consecutive ring all-reduces (gloo) and launches, watching open files and processes.

A leak that one run hides — a socket not closed, a rank not reaped, a thread per call — shows as
growth over many runs. `labkit bench soak` reports the counts before and after, per run.
"""

from __future__ import annotations

import os
import time

from ..allreduce.ring import ring_allreduce_
from ..launch import check_world_size, launch
from ..processes import descendants, helper_processes
from ..units import format_bytes, parse_size


def open_fds() -> int:
    """Open file descriptors of this process (Linux /proc; -1 where unavailable)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def child_processes() -> int:
    """How many processes this one has left running: live descendants, less multiprocessing's helpers."""
    return len(descendants(helpers=False))


def soak_worker(rank: int, world_size: int, runs: int, nbytes: int) -> dict:
    """Inside one launch: `runs` consecutive ring all-reduces, checked, with fd/thread counts per run."""
    import threading

    import torch
    import torch.distributed as dist

    count = max(1, nbytes // 4)
    fds, threads = [], []
    for i in range(runs):
        x = torch.full((count,), float(rank + 1))
        ring_allreduce_(x)
        expected = world_size * (world_size + 1) / 2
        if not bool((x == expected).all()):
            raise AssertionError(f"run {i}: ring result wrong on rank {rank}")
        fds.append(open_fds())
        threads.append(threading.active_count())
    dist.barrier()
    return {"fds": fds, "threads": threads}


def soak(
    runs: int = 50, world_size: int = 4, nbytes: int = 1 << 20, launches: int = 3, timeout_s: float = 120.0
) -> dict:
    """`runs` ring runs inside one launch, then `launches` consecutive launches; counts before/after."""
    world_size = check_world_size(world_size)  # nothing starts for a bad --ranks
    fds0, kids0, helpers0 = open_fds(), child_processes(), len(helper_processes())
    t0 = time.perf_counter()
    per_rank = launch(soak_worker, world_size, "gloo", timeout_s=timeout_s, args=(runs, nbytes))
    after_launch = []
    for _ in range(launches):
        launch(soak_worker, world_size, "gloo", timeout_s=timeout_s, args=(1, nbytes))
        after_launch.append({"fds": open_fds(), "children": child_processes(), "helpers": len(helper_processes())})
    return {
        "runs": runs,
        "world_size": world_size,
        "nbytes": nbytes,
        "launches": 1 + launches,
        "seconds": time.perf_counter() - t0,
        "parent_fds_before": fds0,
        "parent_children_before": kids0,
        "parent_helpers_before": helpers0,
        "parent_after_each_launch": after_launch,
        "rank_fds_first_last": [(r["fds"][0], r["fds"][-1]) for r in per_rank],
        "rank_threads_first_last": [(r["threads"][0], r["threads"][-1]) for r in per_rank],
    }


def add_arguments(parser) -> None:
    parser.add_argument("--runs", type=int, default=50, help="ring all-reduces inside one launch")
    parser.add_argument("--launches", type=int, default=3, help="further consecutive launches")
    parser.add_argument("--ranks", type=int, default=4, help="processes (default 4, at most labkit.launch.MAX_RANKS)")
    parser.add_argument("--size", default="1MiB")


def text(rec: dict) -> str:
    """`labkit bench soak` without --json: the counts a leak would show, before and after."""
    after = rec["parent_after_each_launch"]

    def seq(key):
        return ", ".join(str(a[key]) for a in after)

    return "\n".join(
        [
            f"soak: {rec['runs']} ring all-reduces of {format_bytes(rec['nbytes'])} on {rec['world_size']} ranks in one "
            f"launch, then {len(after)} more launches — {rec['seconds']:.1f} s",
            "  each rank, run 1 -> run {}: open files {}; threads {}".format(
                rec["runs"],
                ", ".join(f"{a}->{b}" for a, b in rec["rank_fds_first_last"]),
                ", ".join(f"{a}->{b}" for a, b in rec["rank_threads_first_last"]),
            ),
            f"  this process, open files: {rec['parent_fds_before']} before, after each later launch: {seq('fds')}",
            f"  processes left running: {rec['parent_children_before']} before, after each later launch: {seq('children')}",
            f"  multiprocessing helpers (resource tracker, fork server; live as long as this process): "
            f"{rec['parent_helpers_before']} before, then {seq('helpers')}",
        ]
    )


def bench(args):
    if args.runs < 1 or args.launches < 0:
        raise ValueError("--runs must be >= 1 and --launches >= 0")
    yield soak(args.runs, args.ranks, parse_size(args.size), args.launches)
