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
    # The first launch may start multiprocessing's resource tracker (one helper process for the
    # life of the parent); after that, nothing may grow from one launch to the next.
    after = r["parent_after_each_launch"]
    assert after[-1]["fds"] <= after[0]["fds"], f"parent open files grew across launches: {after}"
    assert after[-1]["children"] <= after[0]["children"] <= r["parent_children_before"] + 1, after
    assert child_processes() <= after[0]["children"]
    assert open_fds() <= after[0]["fds"]
