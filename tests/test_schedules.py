"""labkit.allreduce.schedules: the schedules are valid all-reduces, and labkit.models costs them right for every N."""

import math

import pytest

from labkit import collectives, models
from labkit.allreduce import schedules as sc

NS = range(1, 34)
WHOLE_BUFFER = [
    sc.naive_rounds,
    sc.binomial_tree_rounds,
    sc.recursive_doubling_rounds,
    sc.mpich_recursive_doubling_rounds,
]


@pytest.mark.parametrize("builder", WHOLE_BUFFER + [sc.ring_rounds])
def test_single_port_every_round(builder):
    for n in NS:
        assert sc.single_port(builder(1000, n)), (builder.__name__, n)


@pytest.mark.parametrize("builder", WHOLE_BUFFER)
def test_whole_buffer_schedules_all_reduce(builder):
    for n in NS:
        assert sc.all_reduces(builder, n), (builder.__name__, n)


def test_the_symbolic_check_catches_a_broken_schedule():
    def forgets_the_extra_rank(nbytes, n):
        return sc.recursive_doubling_rounds(nbytes, n)[1:]

    assert not sc.all_reduces(forgets_the_extra_rank, 5)


def test_recursive_doubling_rounds_non_power_of_two():
    """⌊log2 N⌋ + 2 rounds when N is not a power of two (labkit and MPICH alike), log2 N when it is."""
    for n in range(2, 65):
        want = n.bit_length() - 1 + (0 if n & (n - 1) == 0 else 2)
        assert len(sc.recursive_doubling_rounds(1, n)) == want
        assert len(sc.mpich_recursive_doubling_rounds(1, n)) == want


def test_models_cost_the_schedules_the_code_runs():
    """allreduce_time equals the α-β cost of the schedule, round by round, for every N up to 32 (the old
    recursive-doubling model used ⌈log2 N⌉ rounds: one round short whenever N is not a power of two)."""
    a, b = 2e-6, 5e9
    for n in range(2, 33):
        S = 1000 * n  # N divides S: every ring chunk S/N
        for name, builder in (
            ("ring", sc.ring_rounds),
            ("naive", sc.naive_rounds),
            ("recursive_doubling", sc.recursive_doubling_rounds),
        ):
            want = sc.schedule_time(builder(S, n), a, b)
            assert models.allreduce_time(S, n, b / 1e9, a, name) == pytest.approx(want), (name, n)
        assert sc.schedule_time(sc.binomial_tree_rounds(S, n), a, b) == pytest.approx(
            2 * math.ceil(math.log2(n)) * (a + S / b)
        )
    assert models.allreduce_time(1e6, 5, 1.0, 1e-6, "recursive_doubling") == pytest.approx(4 * (1e-6 + 1e-3))


def test_ring_bytes_match_the_core_schedule():
    for n in range(1, 20):
        for S in (0, 1, n - 1, n, 3 * n + 2, 1001):
            assert sc.bytes_sent(sc.ring_rounds(S, n), n) == collectives.ring_bytes_sent(S, n, 1)


def test_no_point_to_point_all_reduce_moves_less_than_2_n_minus_1_buffers():
    """nccl-tests PERFORMANCE.md: 2(n−1) transfers per element whatever the algorithm. Ring, naive and both
    trees meet it exactly; recursive doubling exceeds it from N = 4 on."""
    for n in range(2, 40):
        S = 840 * n
        lower = 2 * (n - 1) * S
        for builder in (sc.ring_rounds, sc.binomial_tree_rounds, sc.naive_rounds):
            assert sum(sc.bytes_sent(builder(S, n), n)) == lower
        rd = sum(sc.bytes_sent(sc.recursive_doubling_rounds(S, n), n))
        assert rd >= lower and (rd > lower) == (n >= 4)
        assert sum(sc.double_binary_tree_bytes(n, S)[0]) == pytest.approx(lower)


def _spanning(n, t):
    parent = {r: sc.nccl_dtree(n, r)[t][0] for r in range(n)}
    if sum(p == -1 for p in parent.values()) != 1:
        return False
    for r in range(n):
        seen, x = set(), r
        while parent[x] != -1:
            if x in seen:
                return False
            seen.add(x)
            x = parent[x]
    return all(c == -1 or parent[c] == r for r in range(n) for c in sc.nccl_dtree(n, r)[t][1:])


def test_nccl_double_binary_tree_shape_and_load():
    """Both trees span every N; depth ≤ ⌈log2 N⌉; the busiest rank sends 2·S (N ≥ 4), more than a ring rank's
    2(N−1)/N·S: a tree saves latency, not bytes."""
    for n in range(1, 65):
        assert _spanning(n, 0) and _spanning(n, 1), n
        sent, depths = sc.double_binary_tree_bytes(n, 1.0)
        assert max(sent) <= 2.0 + 1e-12
        if n >= 4:
            assert max(sent) == pytest.approx(2.0)
        if n > 1:
            assert all(d <= math.ceil(math.log2(n)) for d in depths)
            assert max(sent) >= 2 * (n - 1) / n - 1e-12


def test_crossover_is_where_the_models_meet():
    for n in (4, 5, 8, 16, 64, 100):
        for a, b in ((1e-6, 25e9), (5e-6, 50e9)):
            s = sc.tree_ring_crossover_bytes(n, a, b)
            ring = lambda x: models.allreduce_time(x, n, b / 1e9, a, "ring")
            tree = lambda x: models.allreduce_time(x, n, b / 1e9, a, "tree")
            assert ring(s) == pytest.approx(tree(s))
            assert ring(2 * s) < tree(2 * s) and ring(s / 2) > tree(s / 2)
    assert sc.tree_ring_crossover_bytes(64, 2e-6, 25e9) / 1e6 == pytest.approx(182.4)
