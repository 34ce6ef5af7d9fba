"""labkit.launch: results by rank, failures named with their traceback, timeouts, nothing left running."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import pytest

from labkit.launch import (
    MAX_RANKS,
    SETUP_DELAY_VAR,
    LaunchTimeout,
    PortInUse,
    RankFailed,
    SetupTimeout,
    launch,
    rank_info,
)

pytestmark = pytest.mark.slow


# Workers live at module level so that the ranks (forked from the fork server, or spawned) can import them by name.
def sum_of_ranks(rank, world_size, extra):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    info = rank_info()
    return {
        "rank": rank,
        "sum": t.item(),
        "extra": extra,
        "pid": os.getpid(),
        "backend": info.backend,
        "env": os.environ.get("LABKIT_TEST_VAR"),
        "gone": os.environ.get("LABKIT_TEST_GONE"),
        "start_method": __import__("multiprocessing").get_start_method(allow_none=True),
    }


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


def killed_mid_collective(rank, world_size, victim):
    import torch
    import torch.distributed as dist

    dist.all_reduce(torch.ones(4))  # the group works
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)  # no Python exit path, no report: the parent sees only the death
    dist.all_reduce(torch.ones(1 << 16))  # the others are inside this collective when the victim dies
    return rank


def _children() -> set[int]:
    """Live descendants of this test process, less multiprocessing's resource tracker and fork server
    (one each, started by the first launch and meant to outlive it); ranks the fork server started count."""
    from labkit.processes import descendants

    return descendants(helpers=False)


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


def test_ranks_see_the_callers_environment_as_of_each_launch(no_leftovers, monkeypatch):
    """The fork server keeps the environment it started with; each launch hands the ranks the current one."""
    monkeypatch.setenv("LABKIT_TEST_GONE", "before")
    first = launch(sum_of_ranks, 2, timeout_s=60, args=("x",))  # starts the fork server if none runs yet
    assert [r["gone"] for r in first] == ["before", "before"]
    monkeypatch.delenv("LABKIT_TEST_GONE")
    monkeypatch.setenv("LABKIT_TEST_VAR", "set after the server started")
    out = launch(sum_of_ranks, 2, timeout_s=60, args=("x",))
    assert [r["env"] for r in out] == ["set after the server started"] * 2
    assert [r["gone"] for r in out] == [None, None]
    out = launch(sum_of_ranks, 2, timeout_s=60, args=("x",), env={"LABKIT_TEST_VAR": "launch env wins"})
    assert [r["env"] for r in out] == ["launch env wins"] * 2
    assert os.environ["LABKIT_TEST_VAR"] == "set after the server started"  # the caller's is untouched


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is the default on Linux only")
def test_linux_ranks_come_from_the_fork_server_and_spawn_still_works(no_leftovers, monkeypatch):
    from labkit.launch import START_METHOD_VAR, start_method

    monkeypatch.delenv(START_METHOD_VAR, raising=False)
    assert start_method() == "forkserver"
    out = launch(sum_of_ranks, 2, timeout_s=60, args=("x",))
    assert [r["start_method"] for r in out] == ["forkserver"] * 2 and out[0]["pid"] != out[1]["pid"]
    monkeypatch.setenv(START_METHOD_VAR, "spawn")  # what macOS and Windows use
    out = launch(sum_of_ranks, 2, timeout_s=60, args=("x",))
    assert [r["start_method"] for r in out] == ["spawn"] * 2 and [r["sum"] for r in out] == [1.0, 1.0]
    monkeypatch.setenv(START_METHOD_VAR, "fork")
    with pytest.raises(ValueError, match="LABKIT_START_METHOD must be one of"):
        launch(sum_of_ranks, 2, timeout_s=60, args=("x",))


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


def test_a_rank_killed_by_a_signal_is_named_with_the_signal(no_leftovers):
    t0 = time.monotonic()
    with pytest.raises(RankFailed) as e:
        launch(killed_mid_collective, 3, timeout_s=30, args=(1,))
    assert time.monotonic() - t0 < 30
    assert e.value.rank == 1
    assert "rank 1 failed" in str(e.value) and "SIGKILL" in str(e.value)


def test_a_peer_that_never_arrives_times_out_set_up_naming_it(no_leftovers):
    """Rank 2 sleeps before set-up, so it never calls init_process_group; the others wait for it there."""
    launch(sum_of_ranks, 1, timeout_s=60, args=("x",))  # the fork server is up: ranks 0 and 1 arrive at once
    t0 = time.monotonic()
    with pytest.raises(SetupTimeout) as e:
        launch(sum_of_ranks, 3, timeout_s=60, setup_timeout_s=6, args=("x",), env={SETUP_DELAY_VAR: "2:600"})
    took = time.monotonic() - t0
    assert 6 <= took < 6 + 10  # the set-up timeout plus the terminate/kill grace, far below timeout_s
    assert e.value.missing == [2] and e.value.waiting == [0, 1]
    assert isinstance(e.value, LaunchTimeout)  # callers catching LaunchTimeout still catch it
    assert "rank(s) 2 did not arrive" in str(e.value) and "init_process_group" in str(e.value)


def _held_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def test_a_port_in_use_is_named_and_nothing_starts(no_leftovers):
    held, port = _held_port()
    with held:
        with pytest.raises(PortInUse, match=f"port {port} .*already in use"):
            launch(sum_of_ranks, 2, timeout_s=30, args=("x",), port=port)


def test_a_taken_master_port_falls_back_to_a_free_port(no_leftovers, monkeypatch):
    held, port = _held_port()
    with held:
        monkeypatch.setenv("MASTER_PORT", str(port))
        with pytest.warns(RuntimeWarning, match=f"MASTER_PORT={port} is already in use"):
            out = launch(sum_of_ranks, 2, timeout_s=60, args=("x",))
    assert [r["sum"] for r in out] == [1.0, 1.0]


def test_more_ranks_than_allowed_fail_before_anything_starts(no_leftovers):
    assert MAX_RANKS == 64
    with pytest.raises(ValueError, match="MAX_RANKS = 64"):
        launch(sum_of_ranks, MAX_RANKS + 1, args=("x",))
    with pytest.raises(ValueError, match="setup_timeout_s"):
        launch(sum_of_ranks, 2, timeout_s=10, setup_timeout_s=20, args=("x",))
    with pytest.raises(ValueError, match="port"):
        launch(sum_of_ranks, 2, port=70000, args=("x",))
