"""Soak: 50 consecutive ring runs (gloo, 4 ranks) and repeated launches grow neither files nor processes."""

import pytest

from labkit.soak import child_processes, open_fds, soak


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
