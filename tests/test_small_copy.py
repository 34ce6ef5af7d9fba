"""CPU tests of the small-copy timing method (simulated stream; behaviour only, never wall time)."""

import pytest
from stand_ins import NeverHeld

from labkit import reference, timing
from labkit.copies import small_copy as sc


def run(issue_us, gpu_us, **kw):
    s = timing.FakeStream(issue_s=issue_us * 1e-6, gpu_copy_s=gpu_us * 1e-6)
    return s, sc.time_small_copy(s, s.copy, 4, **kw)


def test_host_bound_loop_measures_the_host_but_the_blocked_stream_measures_the_copy():
    _, r = run(issue_us=7.0, gpu_us=2.0, n=100, repeats=5)
    assert r.pipelined_median_s == pytest.approx(7.0e-6, rel=0.02)  # what the Python loop reports
    assert r.gpu_median_s == pytest.approx(2.0e-6, rel=1e-9)  # what nvbandwidth's method reports
    assert r.issue_median_s == pytest.approx(7.0e-6, rel=1e-9)
    assert r.host_bound


def test_device_bound_copies_agree_between_methods():
    _, r = run(issue_us=1.0, gpu_us=5.0, n=100, repeats=5)
    assert r.gpu_median_s == pytest.approx(5.0e-6, rel=1e-9)
    assert r.pipelined_median_s == pytest.approx(5.0e-6, rel=0.02)
    assert not r.host_bound


def test_a_blocker_that_ends_too_early_is_detected_and_lengthened():
    # 100 copies take the host 700 µs to issue: 0.1, 0.2, 0.4 ms end early, 0.8 ms holds, and stays for later samples
    _, r = run(issue_us=7.0, gpu_us=2.0, n=100, repeats=3, blocker_s=1e-4)
    assert r.retries == 3 and r.released_early == 0 and r.warnings == []
    assert r.gpu_median_s == pytest.approx(2.0e-6, rel=1e-9)  # every kept sample is valid


def test_after_three_doublings_an_early_sample_is_kept_and_warned_about():
    s = NeverHeld(issue_s=7e-6, gpu_copy_s=2e-6)
    r = sc.time_small_copy(s, s.copy, 4, n=10, repeats=2)
    # the one rule (timing.time_blocked): first spin = 2 × the issue time of one batch + 1 ms, doubled 3 times
    first = timing.SPIN_MARGIN * 10 * 7e-6 + timing.SPIN_FLOOR_S
    assert s.spins[:4] == pytest.approx([first, 2 * first, 4 * first, 8 * first])
    assert len(s.spins) == 2 * (timing.MAX_SPIN_RETRIES + 1)
    assert r.retries == 2 * timing.MAX_SPIN_RETRIES and r.released_early == 2 and len(r.gpu_s) == 2
    assert len(r.warnings) == 1 and "includes host time" in r.warnings[0]


def test_without_the_validity_check_an_early_release_would_look_like_the_host_rate():
    s = timing.FakeStream(issue_s=7e-6, gpu_copy_s=2e-6)
    s.block(1e-5)
    start = s.record()
    for _ in range(100):
        s.copy()
    end = s.record()
    assert s.query(start)
    s.synchronize()
    assert s.elapsed(start, end) / 100 > 6e-6


def test_graph_replay_amortises_the_launch():
    s = timing.FakeStream(issue_s=7e-6, gpu_copy_s=2e-6)
    per_copy = sc.time_small_copy_graph(s, lambda: s.graph(100), n=100, repeats=3)
    assert all(p == pytest.approx((100 * (2.0e-6 + 0.3e-6) + 8e-6) / 100, rel=1e-9) for p in per_copy)
    assert all(p < 7e-6 for p in per_copy)


def test_every_copy_is_enqueued_n_times_per_sample_plus_warmup():
    s, r = run(issue_us=3.0, gpu_us=1.0, n=10, repeats=4)
    assert s.copies == 3 + 10 + 4 * (10 + 10)  # warm-up, one host-timed batch sizing the spin, blocked + unblocked
    row = sc.rows_of("h2d", r)
    assert row["bytes"] == 4 and row["issue_us (host, per call)"] == pytest.approx(3.0)


def test_recorded_floor_of_the_h100_sweep_shows_d2h_flat_and_h2d_above_it():
    found = sc.recorded_floor(reference.load(sc.RECORDED_SWEEP))
    rows = {r["bytes"]: r for r in found.data}
    assert rows[4]["h2d_us (no blocker)"] == pytest.approx(7.755858757916617)
    assert rows[65536]["h2d_us (no blocker)"] == pytest.approx(5.816533451988584)
    d2h = [rows[b]["d2h_us (no blocker)"] for b in rows if b <= 128 * 1024]
    assert 3.7 < min(d2h) and max(d2h) < 4.1  # flat from 4 B to 128 KiB: the host's issue rate
    assert found.datasets == (sc.RECORDED_SWEEP,)


def test_d2h_floor_spread_reads_recorded_and_live_rows():
    found = sc.recorded_floor(reference.load(sc.RECORDED_SWEEP))
    assert 1.0 < sc.d2h_floor_spread(found.data) < 1.1
    live = [
        {"direction": "d2h", "bytes": 4, "pipelined_us (no blocker)": 4.0},
        {"direction": "h2d", "bytes": 4, "pipelined_us (no blocker)": 9.0},
        {"direction": "d2h", "bytes": 65536, "pipelined_us (no blocker)": 5.0},
    ]
    assert sc.d2h_floor_spread(live) == 1.25
