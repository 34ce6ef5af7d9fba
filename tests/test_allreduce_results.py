"""Notebook 05's result objects (labkit.allreduce, shown by Session.present): what they record and say, no ranks."""

from __future__ import annotations

import pytest

from labkit.allreduce import correctness, measure, others, protocols, simulation
from labkit.collectives import busbw
from labkit.models import allreduce_time

N = 4
SIZES = [64 << 10, 1 << 20, 4 << 20]


def _records(ring_speedup: float = 1.0, alpha: float = 80e-6, beta: float = 1.5):
    """A clean ring-shaped run: the library follows the α-β ring model, the hand-written ring `ring_speedup` × faster."""
    out = []
    for impl, factor in (("library", 1.0), ("ring", 1 / ring_speedup)):
        for s in SIZES:
            t = allreduce_time(s, N, beta, alpha, "ring") * factor
            out.append({"impl": impl, "nbytes": s, "world_size": N, "seconds": t, "correct": True,
                        "busbw_GBps": busbw("all_reduce", s, t, N), "samples_s": [t]})  # fmt: skip
    return out


def test_small_rings_check_passes_and_names_its_range():
    result = simulation.check_small_rings(max_ranks=5)
    assert result.checks() == {"simulation_sums_exact_N1_to_5": True, "simulation_bytes_per_rank": True}
    assert "exact sum: True" in result.report()


def test_gloo_bench_records_one_ratio_per_size_and_scores_4_mib():
    bench = measure.GlooBench(_records(ring_speedup=2.0), "measured here: test")
    assert bench.numbers() == pytest.approx(
        {
            "gloo_ring_over_library_busbw_64KiB": 2.0,
            "gloo_ring_over_library_busbw_1MiB": 2.0,
            "gloo_ring_over_library_busbw_4MiB": 2.0,
        }  # fmt: skip
    )
    assert bench.at == 4 << 20 and bench.checks() == {"bench_results_correct": True}
    records = _records()
    records[0]["correct"] = False
    assert measure.GlooBench(records, "x").checks() == {"bench_results_correct": False}


def test_a_fit_that_failed_records_no_alpha_beta_and_says_why():
    bench = measure.GlooBench(_records(), "measured here: test")
    fit = measure.GlooFit(bench, None, "times do not grow with size (…)")
    assert fit.numbers() == {} and fit.notes() == {"fitted": False, "reason": "times do not grow with size (…)"}
    assert fit.report().startswith("**No α-β fit on this run:** times do not grow with size")


def test_the_interview_quotes_the_fit_and_the_7b_model_on_it():
    bench = measure.GlooBench(_records(alpha=80e-6, beta=1.5), "measured here: test")
    link = {"alpha_s": 80e-6, "beta_GBps": 1.5}
    fit = measure.GlooFit(bench, link, None)

    class Sweeps:  # the recorded table's part the interview reads
        own = {"plateau_busbw_GBps": 1.0}

        @staticmethod
        def h100_one_node():
            import pandas as pd

            return pd.Series([470.0, 480.0])

        @staticmethod
        def own_span():
            return "median of 64 KiB … 4 MiB"

    import pandas as pd

    nvls = pd.DataFrame({"ring": [365.6]}, index=[8])
    iv = measure.Interview(fit, Sweeps(), nvls, 14e9, 765.625)
    notes = iv.notes()
    assert notes["alpha_us"] == pytest.approx(80) and notes["beta_GBps"] == 1.5
    assert notes["ring_7b_8rank_here_s"] == pytest.approx(allreduce_time(14e9, 8, 1.5, 80e-6))
    assert notes["recorded_h100_plateau_GBps"] == 480.0 and notes["ratio_nbytes"] == 4 << 20
    text = iv.report()
    assert "Q3: dist.all_reduce fitted as a ring: α = 80 µs" in text and "Q6: recorded 8×H100" in text


def test_quick_mode_skips_the_straggler_and_says_how_to_run_it():
    assert "--straggler 2:0.25" in measure.straggler_demo(quick=True)


def test_no_nccl_run_shows_and_records_nothing():
    run = measure.NcclRun(None, 0)
    assert run.figure() is None and run.report() is None and run.notes() == {}


def test_recorded_protocol_numbers():
    small = protocols.SmallMessages()
    n = small.numbers()
    assert n["issue123_LL_us_per_step"] == pytest.approx(0.725, abs=1e-3) and n["issue123_LL_8gpu_us"] == 21
    assert set(small.datasets) == {protocols.PROTOCOL_DATASET, protocols.LATENCY_DATASET}
    nvls = protocols.NvlsVsRing().numbers()
    assert nvls == pytest.approx({"h200_8gpu_ring_busbw_GBps": 365.6, "h200_8gpu_nvls_busbw_GBps": 473.1})


def test_gloo_checks_fail_when_a_ring_sends_other_bytes_than_scheduled():
    row = {"impl": "ring", "group_size": 4, "count": 7, "integer_bit_identical": True, "integer_exact": True,
           "random_within_tolerance": True, "random_max_abs_diff": 0.0, "random_bit_identical": True,
           "matches_simulation": True, "bytes_sent": 48, "ring_bytes_sent": 48}  # fmt: skip
    good = correctness.GlooChecks([[row]], [7], [4])
    assert all(good.checks().values()) and good.notes()["checked_counts"] == [7]
    bad = correctness.GlooChecks([[row | {"bytes_sent": 52}]], [7], [4])
    assert bad.checks()["gloo_ring_bytes_match_schedule"] is False


def test_other_collectives_check_bytes_against_the_schedule():
    rows = [{"op": "reduce_scatter", "impl": "by hand", "rank": r, "count": 8, "matches": True,
             "bytes_sent": others.expected_bytes("reduce_scatter", 8, N, r)} for r in range(N)]  # fmt: skip
    run = others.OthersRun(rows, N, 8, "test")
    assert run.checks() == dict.fromkeys(
        ("others_by_hand_match_library", "others_bytes_sent_match_schedule", "others_total_bytes_N_minus_1_times_S"),
        True,
    )
    rows[1] = rows[1] | {"bytes_sent": rows[1]["bytes_sent"] + 4}
    assert not others.OthersRun(rows, N, 8, "test").checks()["others_bytes_sent_match_schedule"]
