"""Notebook 5 executed in reference mode (quick): the gloo ring still runs live, everything checks out."""

from __future__ import annotations

import math

import nbformat
import pytest

from labkit.tools.notebooks import find_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def test_notebook_is_committed_clean_with_a_parameters_cell():
    nb = nbformat.read(str(find_notebook("05_ring_allreduce_by_hand")), as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert all(not c.outputs and c.execution_count is None for c in code), "commit the notebook without outputs"
    text = "\n".join(c.source for c in nb.cells)
    for must in ("<details><summary>", "On your own cluster", "Sources", "session.save()", "check.numeric"):
        assert must in text
    # interview answers are marked as answers, so the student edition removes them (the questions stay)
    assert text.count("<details><summary>Answer</summary>") >= 8
    # NCCL logs its per-call algorithm/protocol choice under TUNING (src/enqueue.cc), not INIT or GRAPH
    assert "NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING" in text and "(and `NCCL_DEBUG_SUBSYS=INIT,GRAPH`)" not in text
    for algo in ("`Ring`", "`Tree`", "`NVLS`", "`NVLSTree`", "`CollNetDirect`", "`CollNetChain`", "`PAT`"):
        assert algo in text, f"NCCL's algorithm table lacks {algo}"


def test_notebook_runs_in_reference_mode(run_nb):
    """One execution (quick, reference mode) through conftest's run_nb; the asserts below read its results."""
    results = run_nb("05_ring_allreduce_by_hand")
    _gloo_ring_still_runs_live(results)
    _every_self_check_passed(results)
    _key_numbers(results)
    _recorded_tables_shown(results)
    _interview_numbers(results)
    _protocols_and_other_collectives(results)
    _summary_quotes_the_run(results)


def _gloo_ring_still_runs_live(results):
    assert results["mode"] == "reference" and results["quick"] is True
    assert results["experiments"]["ring_gloo"]["mode"] == "live"
    assert results["experiments"]["ring_nccl"]["mode"] == "reference"
    assert results["experiments"]["ring_gloo"]["checked_group_sizes"] == [2, 3, 4]


def _every_self_check_passed(results):
    expected = {
        "simulation_sums_exact_N1_to_16",
        "simulation_bytes_per_rank",
        "gloo_bit_identical_on_integer_inputs",
        "gloo_random_floats_within_tolerance",
        "gloo_ring_matches_simulation",
        "gloo_ring_bytes_match_schedule",
        "bench_results_correct",
        "failing_rank_named_in_notebook",
        "others_by_hand_match_library",
        "others_bytes_sent_match_schedule",
        "others_total_bytes_N_minus_1_times_S",
        "figures_labelled",
    }
    assert expected <= set(results["checks"])
    assert results["all_checks_passed"], {k: v for k, v in results["checks"].items() if not v}


def _key_numbers(results):
    n = results["numbers"]
    assert n["ring_GB_sent_per_gpu_8x1GB"] == pytest.approx(1.75)
    assert n["model_7b_fp16_8gpu_32GBps_ring_ms"] == pytest.approx(765.625)  # not the source's 918.8
    assert n["model_7b_fp16_8gpu_nvlink4_ring_ms"] == pytest.approx(54.44, abs=0.01)  # 450 GB/s per direction
    assert n["model_7b_fp16_8gpu_32GBps_tree_ms"] > n["model_7b_fp16_8gpu_32GBps_ring_ms"]
    ratios = [v for k, v in n.items() if k.startswith("gloo_ring_over_library_busbw_")]
    assert len(ratios) == 3 and all(r > 0 for r in ratios)  # measured; speed itself is not a test
    assert n["gloo_library_plateau_busbw_GBps"] > 0


def _recorded_tables_shown(results):
    from labkit.reference import list_datasets

    shown = set(results["datasets"])
    sweeps = set(list_datasets(kind="allreduce_sweep"))
    assert len(shown & sweeps) >= 5
    assert shown - sweeps == {
        "nccl_protocol_latency_issue123_points",
        "nccl_allreduce_small_message_latency_dgxa100_issue123",
    }


def _interview_numbers(results):
    """The interview cell shows this run's gloo numbers, the same ones the cells above computed."""
    from labkit.models import allreduce_time

    iv, n = results["experiments"]["interview"], results["numbers"]
    assert iv["source"].startswith("measured here: ") and "gloo, 4 processes" in iv["source"]
    assert iv["ratio_nbytes"] == 4 << 20
    assert iv["ring_over_library_busbw"] == pytest.approx(n["gloo_ring_over_library_busbw_4MiB"])
    fit = results["experiments"]["gloo_fit"]
    if not fit["fitted"]:
        # 4 ranks on 2 busy cores can give times that do not grow with size: the notebook says so and
        # carries no α, β or 7B estimate (tests/test_ring_views.py makes this case happen on purpose)
        assert "do not grow with size" in fit["reason"] and "64 KiB: " in fit["reason"]
        assert iv["alpha_us"] is iv["beta_GBps"] is iv["ring_7b_8rank_here_s"] is None
        assert "gloo_fitted_alpha_us" not in n and "gloo_fitted_beta_GBps" not in n
        assert 450 < iv["recorded_h100_plateau_GBps"] < 500
        return
    assert fit["reason"] is None
    assert iv["alpha_us"] == pytest.approx(n["gloo_fitted_alpha_us"])
    assert iv["beta_GBps"] == pytest.approx(n["gloo_fitted_beta_GBps"])
    for key in ("ring_over_library_busbw", "alpha_us", "beta_GBps", "ring_7b_8rank_here_s"):
        assert math.isfinite(iv[key]) and iv[key] > 0, key
    # the 7B / 8-rank ring on this run's link, by the same model; gloo over loopback is far below 32 GB/s
    assert iv["ring_7b_8rank_here_s"] == pytest.approx(allreduce_time(14e9, 8, iv["beta_GBps"], iv["alpha_us"] * 1e-6))
    assert iv["beta_GBps"] < 32 and iv["ring_7b_8rank_here_s"] * 1e3 > n["model_7b_fp16_8gpu_32GBps_ring_ms"]
    # recorded 8xH100 (NVLS) plateaus sit above NVLink 4's 450 GB/s per direction: the switch adds
    assert 450 < iv["recorded_h100_plateau_GBps"] < 500


def _protocols_and_other_collectives(results):
    """Section 4b's numbers come from the issue-123 tables and the H200 NVLS/ring sweep; 4c ran live on gloo."""
    n = results["numbers"]
    # least-squares slopes per ring step: LL < LL128 < Simple (nccl-tests#123: ~1 / ~2 / ~6 µs)
    assert n["issue123_LL_us_per_step"] == pytest.approx(0.725, abs=1e-3)
    assert n["issue123_LL128_us_per_step"] == pytest.approx(1.0, abs=1e-3)
    assert n["issue123_Simple_us_per_step"] == pytest.approx(4.786, abs=1e-3)
    assert n["issue123_LL_8gpu_us"] == 21
    # ring below NVLink 4's 450 GB/s per direction, NVLS above it
    assert n["h200_8gpu_ring_busbw_GBps"] == pytest.approx(365.6) and n["h200_8gpu_nvls_busbw_GBps"] == pytest.approx(
        473.1
    )
    assert n["spot_tree_busiest_rank_GB_8x1GB"] == pytest.approx(2.0)
    assert results["experiments"]["others"]["ops"] == ["reduce_scatter", "all_gather", "alltoall", "broadcast"]
    assert set(results["experiments"]["exercises"].values()) == {"not attempted"}
    assert len(results["experiments"]["exercises"]) == 8  # 4b crossover (2), spot the error (3), 4c MoE/log (3)


def _summary_quotes_the_run(results):
    """The summary's numbers are the ones the cells above computed (results JSON), as the summary rounds them."""
    from labkit.allreduce.schedules import tree_ring_crossover_bytes

    nb = nbformat.read(str(find_notebook("05_ring_allreduce_by_hand")), as_version=4)
    text = " ".join(next(c.source for c in nb.cells if c.source.startswith("## Summary")).split())
    n = results["numbers"]
    assert f"≈{5 * round(n['h200_8gpu_ring_busbw_GBps'] / 5)} GB/s on H200" in text
    assert 470 <= n["h200_8gpu_nvls_busbw_GBps"] <= 480 and "≈470–480 GB/s" in text
    assert f"takes ≈{n['issue123_LL_8gpu_us']:.0f} µs with LL" in text
    assert (
        f"≈{n['issue123_LL_us_per_step']:.2f} µs per ring step plus ≈{n['issue123_LL_fixed_us']:.1f} µs fixed" in text
    )
    s_star = tree_ring_crossover_bytes(64, 2e-6, 25e9)
    assert f"({s_star / 1e6:.0f} MB for 64 ranks at 2 µs and 25 GB/s)" in text
