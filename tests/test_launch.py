"""labkit.launch: results by rank, failures named with their traceback, timeouts, nothing left running."""

from __future__ import annotations

import os
import time

import pytest

from labkit.launch import LaunchTimeout, RankFailed, launch, rank_info

pytestmark = pytest.mark.slow


# Workers live at module level so that spawned processes can import them by name.
def sum_of_ranks(rank, world_size, extra):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    info = rank_info()
    return {"rank": rank, "sum": t.item(), "extra": extra, "pid": os.getpid(), "backend": info.backend,
            "env": os.environ.get("LABKIT_TEST_VAR")}


def raise_on(rank, world_size, bad_rank):
    import torch
    import torch.distributed as dist

    if rank == bad_rank:
        raise ValueError(f"injected failure on rank {rank}")
    dist.all_reduce(torch.zeros(4))  # the others wait for the failed rank inside a collective
    return rank


def sleep_forever(rank, world_size):
    time.sleep(600)


def exit_abruptly(rank, world_size):
    if rank == 1:
        os._exit(3)
    time.sleep(600)


def _children() -> set[int]:
    """Live child processes of this test process, without multiprocessing's resource tracker
    (one per Python process, started by the first spawn and meant to outlive it)."""
    try:
        import psutil
    except ImportError:  # read /proc directly
        out = set()
        me = os.getpid()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z" and b"resource_tracker" not in cmd:
                out.add(int(d))
        return out
    kids = set()
    for c in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE:
                kids.add(c.pid)
        except psutil.NoSuchProcess:
            pass
    return kids


@pytest.fixture
def no_leftovers():
    before = _children()
    yield
    assert _children() - before == set(), "launch left child processes running"


def test_results_come_back_in_rank_order(no_leftovers):
    out = launch(sum_of_ranks, 3, timeout_s=60, args=("x",), env={"LABKIT_TEST_VAR": "seen"})
    assert [r["rank"] for r in out] == [0, 1, 2]
    assert all(r["sum"] == 3.0 and r["extra"] == "x" and r["env"] == "seen" and r["backend"] == "gloo" for r in out)
    assert len({r["pid"] for r in out}) == 3 and os.getpid() not in {r["pid"] for r in out}
    assert "LABKIT_TEST_VAR" not in os.environ


def test_a_failing_rank_is_named_with_its_traceback(no_leftovers):
    t0 = time.monotonic()
    with pytest.raises(RankFailed) as e:
        launch(raise_on, 3, timeout_s=30, args=(2,))
    assert time.monotonic() - t0 < 30
    assert e.value.rank == 2
    assert "rank 2" in str(e.value) and "injected failure on rank 2" in str(e.value)
    assert "raise_on" in e.value.traceback and "Traceback" in e.value.traceback


def test_timeout_names_the_pending_ranks(no_leftovers):
    t0 = time.monotonic()
    with pytest.raises(LaunchTimeout) as e:
        launch(sleep_forever, 2, timeout_s=4)
    assert e.value.pending == [0, 1]
    assert time.monotonic() - t0 < 4 + 10  # the timeout plus the terminate/kill grace


def test_a_rank_that_dies_without_a_word_is_named(no_leftovers):
    with pytest.raises(RankFailed, match="rank 1 .*exit code 3"):
        launch(exit_abruptly, 2, timeout_s=30)


def test_bad_arguments_fail_before_any_process_starts(no_leftovers):
    with pytest.raises(ValueError, match="importable module"):
        launch(lambda rank, ws: rank, 2)
    with pytest.raises(ValueError, match="backend"):
        launch(sum_of_ranks, 2, backend="mpi")
    with pytest.raises(ValueError, match="world_size"):
        launch(sum_of_ranks, 0)
