"""Across machines with torchrun: the command each node runs (c10d rendezvous), and two local agents standing in for two nodes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..processes import descendants

#: Seconds an agent gets to stop its workers after SIGTERM before everything left is killed.
TORCHRUN_GRACE_S = 5.0


def torchrun_command(
    node_rank: int,
    *,
    nnodes: int = 2,
    nproc_per_node: int = 2,
    endpoint: str = "HOST:29500",
    rdzv_id: str = "labkit-hierarchy",
    sizes: str = "1MiB",
    repeats: int = 3,
    out: str | None = None,
    python: str = "python",
) -> list[str]:
    """The command one node runs: a torchrun agent (c10d rendezvous) starting the hierarchy worker."""
    cmd = [
        python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        rdzv_id,
        "--node-rank",
        str(node_rank),
        "-m",
        "labkit.hierarchy.worker",
        "--sizes",
        sizes,
        "--repeats",
        str(repeats),
        "--json",
    ]
    return cmd + (["--out", out] if out else [])


def _free_port() -> int:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs) -> None:
    """SIGTERM the agents (they stop their workers), then SIGKILL whatever of the tree is left."""

    tree = {p.pid: descendants(p.pid) for p in procs}  # torchrun starts workers in sessions of their own
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + TORCHRUN_GRACE_S
    for p in procs:
        try:
            p.wait(max(0.0, end - time.monotonic()))
        except Exception:
            pass
    for p in procs:
        for pid in {p.pid} | tree[p.pid] | descendants(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        p.wait()


def torchrun_local(
    nnodes: int = 2, nproc_per_node: int = 2, sizes: str = "1MiB", repeats: int = 3, timeout_s: float = 180.0
) -> dict:
    """Start `nnodes` torchrun agents on 127.0.0.1, each standing for one machine; return rank 0's records.

    Exactly what runs on a real cluster, except that every "node" is this host: one agent per
    node, c10d rendezvous at one endpoint, LOCAL_WORLD_SIZE processes per agent. Bounded by
    `timeout_s`; every agent and worker is stopped before this returns, whatever happened.
    """

    with tempfile.TemporaryDirectory(prefix="labkit-torchrun-") as d:
        out = str(Path(d) / "records.json")
        endpoint = f"127.0.0.1:{_free_port()}"
        logs, procs = [], []
        try:
            for node in range(nnodes):
                log = open(Path(d) / f"agent{node}.log", "w+")
                logs.append(log)
                cmd = torchrun_command(
                    node,
                    nnodes=nnodes,
                    nproc_per_node=nproc_per_node,
                    endpoint=endpoint,
                    rdzv_id=f"labkit-{Path(d).name}",
                    sizes=sizes,
                    repeats=repeats,
                    out=out if node == 0 else None,
                    python=sys.executable,
                )
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            deadline = time.monotonic() + timeout_s
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.2)
            timed_out = any(p.poll() is None for p in procs)
        finally:
            _stop(procs)
        codes = [p.returncode for p in procs]
        tails = []
        for i, log in enumerate(logs):
            log.seek(0)
            tails.append(f"--- agent {i} ---\n" + "".join(log.readlines()[-15:]))
            log.close()
        if timed_out:
            raise TimeoutError(f"torchrun did not finish within {timeout_s:g} s; agents stopped.\n" + "\n".join(tails))
        if any(codes) or not Path(out).exists():
            raise RuntimeError(f"torchrun agents exited with {codes}\n" + "\n".join(tails))
        with open(out) as f:
            records = json.load(f)
    return {
        "endpoint": endpoint,
        "nnodes": nnodes,
        "nproc_per_node": nproc_per_node,
        "records": records,
        "command_node0": " ".join(
            torchrun_command(
                0, nnodes=nnodes, nproc_per_node=nproc_per_node, endpoint=endpoint, sizes=sizes, repeats=repeats
            )
        ),
    }


class TwoAgents:
    """Notebook 06's torchrun demo: two agents on this host stand for two machines (~15-30 s on a small machine)."""

    def __init__(self, run: dict | None):
        self.run = run  # torchrun_local's result, or None where the notebook skipped it (quick mode)
        self.experiment = None if run is None else "torchrun"  # a skipped run records no experiment

    def report(self):
        if self.run is None:
            return (
                "quick mode: the two-agent torchrun run is skipped here (tests/test_torchrun.py runs it); "
                "set quick = False to run it in this notebook"
            )
        import pandas as pd

        columns = ["impl", "world_size", "group_size", "nodes", "nbytes", "seconds", "busbw_GBps", "correct"]
        return pd.DataFrame(self.run["records"])[columns]

    def _correct(self) -> bool:
        return all(r["correct"] for r in self.run["records"])

    def checks(self) -> dict:
        return {} if self.run is None else {"torchrun_hierarchical_correct": self._correct()}

    def notes(self) -> dict:
        return {} if self.run is None else {"endpoint": self.run["endpoint"], "correct": self._correct()}


def two_agents(run: bool) -> TwoAgents:
    """Run the hierarchical all-reduce under two local torchrun agents (2 processes each) if `run`, else skip it."""
    return TwoAgents(torchrun_local(nnodes=2, nproc_per_node=2, sizes="1MiB", repeats=3) if run else None)
