"""Soak: 50 consecutive ring runs (gloo, 4 ranks) and repeated launches grow neither files nor processes."""

import re

import pytest

from labkit.tools.soak import child_processes, open_fds, soak


@pytest.mark.slow
def test_fifty_ring_runs_and_repeated_launches_leak_nothing():
    r = soak(runs=50, world_size=4, nbytes=256 << 10, launches=2, timeout_s=120)
    for first, last in r["rank_fds_first_last"]:
        assert last <= first, f"a rank's open files grew over 50 runs: {first} -> {last}"
    for first, last in r["rank_threads_first_last"]:
        assert last <= first, f"a rank's threads grew over 50 runs: {first} -> {last}"
    # No rank outlives its launch. The first launch may start multiprocessing's two helpers (the
    # resource tracker and the fork server, one each for the life of the parent); nothing more.
    after = r["parent_after_each_launch"]
    assert after[-1]["fds"] <= after[0]["fds"], f"parent open files grew across launches: {after}"
    assert all(a["children"] == r["parent_children_before"] for a in after), after
    assert all(a["helpers"] == after[0]["helpers"] <= 2 for a in after), after
    assert child_processes() == r["parent_children_before"]
    assert open_fds() <= after[0]["fds"]


@pytest.mark.slow
def test_labkit_bench_soak_prints_the_counts_a_leak_would_show(capsys):
    from labkit.tools.cli import main

    assert main(["bench", "soak", "--runs", "5", "--launches", "2", "--ranks", "2", "--size", "64KiB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("soak: 5 ring all-reduces of 64 KiB on 2 ranks in one launch, then 2 more launches")
    assert re.fullmatch(
        r"  each rank, run 1 -> run 5: open files \d+->\d+, \d+->\d+; threads \d+->\d+, \d+->\d+", out[1]
    )
    assert out[3].startswith("  processes left running: ") and out[3].endswith("after each later launch: 0, 0")
    assert out[4].startswith("  multiprocessing helpers")
