"""labkit.allreduce.others: the hand-written reduce-scatter, all-gather, all-to-all and broadcast on gloo equal the
library (bit for bit on integer-valued inputs) and send exactly the bytes their schedules say."""

import pytest

from labkit.allreduce import others
from labkit.launch import launch


@pytest.mark.parametrize("n", [3])
def test_by_hand_equals_library_and_bytes_match_the_schedule(n):
    counts = [n, 12, 1001, 2]  # divisible, divisible, not divisible, fewer elements than ranks
    out = launch(others.check_worker, n, "gloo", timeout_s=120, args=(counts, 12, 2))
    timed = [r for per_rank in out for r in per_rank if "seconds" in r]
    rows = [r for per_rank in out for r in per_rank if "seconds" not in r]
    assert {r["op"] for r in rows} == set(others.OPS)
    # timed through labkit.timing.time_collectives: 2 repeats of each op and implementation on every rank
    assert len(timed) == n * len(others.OPS) * 2 * 2 and all(r["seconds"] > 0 for r in timed)
    assert {(r["impl"], r["repeat"]) for r in timed} == {(i, k) for i in ("by hand", "library") for k in (0, 1)}
    assert others.summary(timed + rows, n).filter(like="busbw").notna().all().all()
    for r in rows:
        assert r["matches"], r
        assert r["bytes_sent"] == others.expected_bytes(r["op"], r["count"], n, r["rank"]), r
    for count in counts:
        for op in others.OPS:
            sent = [r["bytes_sent"] for r in rows if r["op"] == op and r["count"] == count]
            if sent:  # every chunk crosses N−1 links; the broadcast's N−1 receivers get S each
                assert sum(sent) == (n - 1) * 4 * count, (op, count)


def test_expected_bytes_and_where_used():
    assert others.expected_bytes("reduce_scatter", 8, 4, 0) == 24
    assert others.expected_bytes("broadcast", 8, 8, 0) == 3 * 32  # the root sends log2 8 times
    assert sum(others.expected_bytes("broadcast", 5, 5, r) for r in range(5)) == 4 * 20
    t = others.where_used(8)
    assert list(t["bus factor (N = 8)"]) == [1.75, 0.875, 0.875, 0.875, 1.0]


def test_ops_are_labkit_collectives():
    from labkit.collectives import OPS

    assert set(others.OPS) <= set(OPS)
