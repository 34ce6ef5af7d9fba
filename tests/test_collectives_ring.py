"""Hand-written all-reduces on real gloo processes, against dist.all_reduce; `labkit bench allreduce`."""

from __future__ import annotations

import json
import time

import pytest

from labkit.allreduce.correctness import check_worker
from labkit.collectives import bus_factor
from labkit.launch import launch
from labkit.tools import cli

pytestmark = pytest.mark.slow

# Awkward sizes: empty, fewer elements than ranks, sizes no rank count divides, a prime.
COUNTS = [0, 1, 3, 7, 1001, 4099]
# The pipelined ring with 256-byte segments: several segments per chunk, the last one short
# (1001 elements over 3 ranks: chunks of 334, 334, 333 elements = 6 segments of ≤ 64 each).
IMPLS = ["ring", ("ring", {"segment_bytes": 256}), "ring_simple", "naive", "tree", "recursive_doubling", "library"]


@pytest.fixture(scope="module")
def reports():
    """One launch of 5 ranks; groups of the first 2, 3, 4 and 5 ranks each run every check."""
    per_rank = launch(check_worker, 5, timeout_s=180, args=(IMPLS, COUNTS), kwargs={"group_sizes": [2, 3, 4, 5]})
    return [r for rank_reports in per_rank for r in rank_reports]


def test_every_group_size_and_count_was_checked(reports):
    seen = {(r["group_size"], r["count"]) for r in reports}
    assert seen == {(k, c) for k in (2, 3, 4, 5) for c in COUNTS}


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_integer_valued_inputs_give_the_librarys_bits_and_the_exact_sum(reports, k):
    for r in reports:
        if r["group_size"] == k:
            assert r["integer_bit_identical"] and r["integer_exact"], r


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_random_floats_agree_within_the_summation_order_tolerance(reports, k):
    for r in reports:
        if r["group_size"] == k:
            assert r["random_within_tolerance"], r


def test_the_real_ring_matches_its_simulation_bit_for_bit(reports):
    rings = [r for r in reports if r["impl"] in ("ring", "ring_simple")]
    assert rings and all(r["matches_simulation"] for r in rings)


def test_the_real_ring_sends_the_bytes_the_schedule_says(reports):
    for r in reports:
        if r["impl"] in ("ring", "ring_simple"):
            assert r["bytes_sent"] == r["ring_bytes_sent"], r


def test_naive_root_sends_n_minus_1_buffers(reports):
    for r in reports:
        if r["impl"] == "naive" and r["count"]:
            assert r["bytes_sent"] in (r["nbytes"], (r["group_size"] - 1) * r["nbytes"])


def test_other_dtypes_bit_identical_on_integers_and_within_tolerance_on_floats():
    per_rank = launch(
        check_worker,
        3,
        timeout_s=120,
        args=(["ring", "ring_simple", "tree"], [7, 1001]),
        kwargs={"dtypes": ("float64", "float16", "bfloat16")},
    )
    reports = [r for rank_reports in per_rank for r in rank_reports]
    assert {r["dtype"] for r in reports} == {"float64", "float16", "bfloat16"}
    for r in reports:
        assert r["integer_bit_identical"] and r["integer_exact"] and r["random_within_tolerance"], r
        assert r.get("matches_simulation", True), r


# --------------------------------------------------------------------------- the command line
def _children():
    from labkit.processes import descendants  # ranks left running; multiprocessing's helpers excluded

    return descendants(helpers=False)


def test_bench_prints_one_json_record_per_impl_and_size(capsys):
    before = _children()
    rc = cli.main(
        [
            "bench",
            "allreduce",
            "--backend",
            "gloo",
            "--ranks",
            "3",
            "--sizes",
            "64KiB,100KiB",
            "--impl",
            "ring,library,naive",
            "--repeats",
            "3",
            "--json",
        ]
    )
    assert rc == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [(r["impl"], r["nbytes"]) for r in recs] == [
        (i, s) for s in (65536, 102400) for i in ("ring", "library", "naive")
    ]
    for r in recs:
        for key in ("impl", "backend", "world_size", "nbytes", "seconds", "algbw_GBps", "busbw_GBps"):
            assert key in r
        assert r["backend"] == "gloo" and r["world_size"] == 3 and r["correct"] is True
        assert r["algbw_GBps"] == pytest.approx(r["nbytes"] / r["seconds"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * bus_factor("all_reduce", 3))
        assert len(r["samples_s"]) == 3 and r["seconds"] > 0
    assert _children() - before == set()


def test_bench_fail_rank_names_the_rank_and_leaves_nothing_running(capsys):
    before = _children()
    t0 = time.monotonic()
    rc = cli.main(
        [
            "bench",
            "allreduce",
            "--ranks",
            "3",
            "--sizes",
            "256KiB",
            "--impl",
            "ring",
            "--repeats",
            "2",
            "--fail-rank",
            "1",
            "--timeout",
            "60",
            "--json",
        ]
    )
    assert rc == 2 and time.monotonic() - t0 < 60
    err = capsys.readouterr().err
    assert "rank 1 failed" in err and "InjectedFailure" in err and "--fail-rank" in err
    assert _children() - before == set()


def test_bench_straggler_delays_everyone(capsys):
    rc = cli.main(
        [
            "bench",
            "allreduce",
            "--ranks",
            "2",
            "--sizes",
            "4KiB",
            "--impl",
            "library",
            "--repeats",
            "2",
            "--warmup",
            "1",
            "--no-check",
            "--straggler",
            "1:0.3",
            "--json",
        ]
    )
    assert rc == 0
    (rec,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    # Rank 0 starts its clock when it leaves the barrier, which can be a little after rank 1 leaves it
    # and starts sleeping (CI measured 0.2995 s once, under load): its wait is the 0.3 s delay less
    # that skew. Without a straggler this 4 KiB all-reduce takes about 2 ms here.
    assert rec["seconds"] >= 0.9 * 0.3 and rec["straggler"] == [1, 0.3]


def test_bench_rejects_bad_options():
    for argv in (
        ["--impl", "magic"],
        ["--fail-rank", "7"],
        ["--straggler", "1"],
        ["--sizes", "6B", "--dtype", "float32"],
    ):
        assert cli.main(["bench", "allreduce", "--ranks", "2", "--timeout", "30", *argv]) == 2


def test_record_writes_a_valid_allreduce_sweep(tmp_path, monkeypatch):
    from labkit.allreduce import bench_allreduce
    from labkit.reference import load

    monkeypatch.setattr(bench_allreduce, "RECORD_RANKS", 2)
    monkeypatch.setattr(bench_allreduce, "RECORD_MIN", "4KiB")
    monkeypatch.setattr(bench_allreduce, "RECORD_QUICK_MAX", "64KiB")
    env = {
        "host": "testhost",
        "cpu": "test cpu",
        "cpu_count": 2,
        "gpus": [],
        "cuda_available": False,
        "date": "2026-01-01T00:00:00+00:00",
        "labkit": "0",
        "torch": "x",
        "python": "3",
    }
    names = bench_allreduce.record(tmp_path, True, env)
    assert names == ["allreduce_gloo_sweep"]
    ds = load("allreduce_gloo_sweep", tmp_path)
    assert ds.kind == "allreduce_sweep" and ds.meta["provenance"] == "measured"
    assert set(ds.frame.nbytes) == {4096, 16384, 65536} and set(ds.frame.world_size) == {2}
    assert {"gloo dist.all_reduce", "gloo ring by hand (labkit.ring)"} == set(ds.frame.config)
    assert (ds.frame.busbw_GBps == ds.frame.algbw_GBps * bus_factor("all_reduce", 2)).all()
