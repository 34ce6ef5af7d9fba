"""The hierarchy benchmark under torchrun: two agents on 127.0.0.1 stand for two machines (c10d rendezvous)."""

from __future__ import annotations

import os

import pytest

from labkit.cluster.views import slow_link_bytes
from labkit.hierarchy import torchrun


def _labkit_workers() -> set[int]:
    """Live processes running a torchrun agent or worker of the hierarchy benchmark."""
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "labkit.hierarchy.worker" in cmd:
            out.add(int(d))
    return out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_torchrun_agents_run_the_hierarchical_benchmark():
    res = torchrun.torchrun_local(nnodes=2, nproc_per_node=2, sizes="4KiB,64KiB", repeats=2, timeout_s=180)
    recs = res["records"]
    assert {r["impl"] for r in recs} == {"library", "flat_ring", "hierarchical"}
    for r in recs:
        assert r["launcher"] == "torchrun" and r["world_size"] == 4 and r["nodes"] == 2
        assert r["group_size"] == 2  # LOCAL_WORLD_SIZE: the ranks of one agent form one group
        assert r["correct"], r
        assert r["seconds"] > 0 and r["busbw_GBps"] > 0
    hier = [r for r in recs if r["impl"] == "hierarchical" and r["nbytes"] == 64 * 1024][0]
    assert hier["counted_inter_bytes_per_rank"] == [slow_link_bytes(64 * 1024, 2, 2)["hier_per_rank"]] * 4
    assert "--rdzv-backend c10d" in res["command_node0"] and "--node-rank 0" in res["command_node0"]
    assert not _labkit_workers(), "torchrun left processes behind"


def test_torchrun_command_reads_like_the_docs():
    cmd = torchrun.torchrun_command(1, nnodes=4, nproc_per_node=8, endpoint="node0:29500", sizes="64MiB")
    text = " ".join(cmd)
    assert "--nnodes 4 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint node0:29500" in text
    assert "--node-rank 1 -m labkit.hierarchy.worker --sizes 64MiB" in text


def test_worker_outside_torchrun_says_how_to_start_it(monkeypatch):
    from labkit.hierarchy import worker

    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(SystemExit, match="torchrun"):
        worker.main(["--sizes", "4KiB"])


def test_the_worker_runs_as_the_module_notebook_06_names():
    """Notebook 06's text names `python -m labkit.hierarchy.worker`: outside torchrun it says how to start it."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    r = subprocess.run(
        [sys.executable, "-m", "labkit.hierarchy.worker", "--sizes", "4KiB"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode != 0 and "start this module with torchrun" in r.stderr, r.stderr[-2000:]
