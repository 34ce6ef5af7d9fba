"""labkit.copies' notebook results (pinned_lesson for nb02, latency_lesson for nb01) present themselves through
Session.present: what they record, and what an empty result says (no notebook run)."""

import matplotlib
import pytest

from labkit import plots
from labkit import reference as ref
from labkit.copies import dataloader, pin_cost, pinned_lesson, pitfall
from labkit.runtime import Session, Shown

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def survey():
    return pinned_lesson.Survey(ref.load_all(kind="copy_sweep"), measured=[])


def _session():
    return Session("02_pinned_vs_pageable", "reference", gpus=0)


def test_the_survey_draws_the_systems_with_a_ratio_and_those_with_pinned_numbers_only(survey):
    s = _session()
    s.present(survey)
    assert set(s.datasets) == set(survey.ratios.dataset) | set(survey.pinned_only.dataset)
    assert not set(survey.pinned_only.dataset) & set(s.experiments["pinned_vs_pageable"]["recorded_with_both"])
    assert s.figures_checked == 1 and not s.figure_problems
    assert survey.bandwidth("no_such_system", "h2d", "pinned") is None


def test_the_ratio_at_the_largest_size_is_recorded_with_its_range_and_check(survey):
    ratio = pinned_lesson.Ratios(survey, None)
    s = _session()
    s.present(ratio)
    t = ratio.at_largest
    assert s.numbers == {"ratio_min": t.ratio.min(), "ratio_max": t.ratio.max()}
    assert s.checks == {"pinned_not_slower_at_largest_size": bool((t.ratio >= 1).all())}
    assert ratio.of("dgx_a100", "h2d") == pytest.approx(
        t[t.dataset.str.contains("dgx_a100") & (t.direction == "h2d")].ratio.iloc[0]
    )
    assert not plots.figure_problems(ratio.figure())


def test_a_reference_without_pageable_numbers_records_no_ratio_and_says_so():
    only_pinned = [d for d in ref.load_all(kind="copy_sweep") if set(d.frame["memory"]) == {"pinned"}]
    ratio = pinned_lesson.Ratios(pinned_lesson.Survey(only_pinned, measured=[]), "somewhere")
    s = _session()
    s.present(ratio)
    assert s.numbers == {} and s.checks == {}
    assert "reference='somewhere' holds no pageable numbers" in ratio.report()
    assert ratio.of("dgx_a100", "h2d") is None


def test_the_break_even_and_the_interview_quote_the_largest_size(survey):
    pin = pinned_lesson.PinCost.of(pin_cost.recorded(ref.load_all(kind="point")).data)
    s = _session()
    s.present(pin.break_even())
    largest = pin.table.iloc[-1]
    assert s.numbers["break_even_copies_largest"] == largest["break_even_copies"]
    assert s.numbers["break_even_size_bytes"] == largest["nbytes"] and s.checks["break_even_computed"]
    copy_ref = pin_cost.copy_reference(survey.sweeps, survey.ratios)
    iv = pinned_lesson.Interview(pinned_lesson.Ratios(survey, None), pin, copy_ref).notes()
    assert iv["break_even_copies"] == pytest.approx(largest["break_even_copies"]) and iv["ratio_h2d"] > 1
    assert pin.pays_for_one_copy(3) is None
    assert pin.view(pin.default_size(), 1)["copies"] == 1


def test_the_loader_without_a_run_says_nothing_was_recorded():
    empty = pinned_lesson.Loader(Shown("dataloader", "reference", "nothing", None, ""))
    assert empty.figure() is None and empty.numbers() == {} and empty.notes() == {"shown": False}
    assert empty.report() == dataloader.NOTHING_RECORDED


def test_the_pitfall_records_both_checks():
    p = pinned_lesson.Pitfall(pitfall.on_host(1 << 16).data)
    assert p.checks() == {"pitfall_wrong_before_sync": p.result.wrong_before_sync > 0, "pitfall_right_after_sync": True}


def test_host_memory_kinds_and_placement_record_their_datasets():
    s = _session()
    s.present(pinned_lesson.HostMemoryKinds())
    s.present(pinned_lesson.Placement())
    assert s.experiments["host_memory_kinds"]["rows"] == 7
    assert s.checks == {"remote_and_shared_are_slower": True}
    assert "bandwidthtest_p100_pcie_numa_local_vs_remote_gearshifft_pr82_points" in s.datasets
    assert "pinned" in repr(pinned_lesson.HostMemoryKinds().report())


# --------------------------------------------------------------------------- notebook 01 (latency_lesson)
@pytest.fixture(scope="module")
def curves():
    from labkit.copies import curves as lc
    from labkit.copies import latency_lesson

    recorded = [d for d in ref.load_all(kind="copy_sweep") if lc.has_fittable_curve([d])]
    return latency_lesson.Curves(Shown("h2d_sweep", "reference", "nothing", None, ""), recorded)


def test_the_fit_records_the_primary_curves_alpha_beta_and_n_half(curves):
    from labkit.copies import latency_lesson

    s = Session("01_pcie_latency_curve", "reference", gpus=0)
    fits = s.present(latency_lesson.Fits(curves))
    f = curves.sweeps[0].fit()
    assert s.numbers == {"alpha_us": f.latency_s * 1e6, "beta_GBps": f.bandwidth_GBps, "n_half_bytes": f.n_half_bytes}
    assert s.experiments["fit"]["curve"] == fits.primary.label
    s.present(latency_lesson.Invariants(fits))
    assert set(s.checks) == {
        "fits_exist",
        "latency_floor_plausible",
        "fit_median_residual_below_15pct",
        "bandwidth_saturates",
        "within_pcie_spec",
    }
    assert all(s.checks.values()), s.checks


def test_without_curves_there_is_no_fit_and_the_invariants_say_so():
    from labkit.copies import latency_lesson

    empty = latency_lesson.Curves(Shown("h2d_sweep", "reference", "nothing", None, ""), [])
    fits = latency_lesson.Fits(empty)
    assert fits.primary_fit is None and fits.numbers() == {}
    assert latency_lesson.Invariants(fits).checks()["fits_exist"] is False
    assert "No curve has enough sizes" in fits.report()[0]


def test_an_invariant_fails_on_a_curve_faster_than_its_pcie_spec(curves):
    import dataclasses

    from labkit.copies import latency_lesson

    c = max(curves.sweeps, key=lambda c: c.bandwidth_GBps.max())  # a Gen5 H100: above Gen3's 15.75 GB/s
    fast = dataclasses.replace(c, pcie_gen=3, short="too fast")
    bad = latency_lesson.Curves(Shown("h2d_sweep", "reference", "nothing", [fast], ""), [])
    inv = latency_lesson.Invariants(latency_lesson.Fits(bad))
    assert inv.checks()["within_pcie_spec"] is False and inv.over_spec == [fast.label]


def test_the_explore_view_predicts_alpha_plus_n_over_beta(curves):
    from labkit.copies import latency_lesson

    explore = latency_lesson.Explore(curves.sweeps)
    system = explore.systems[0]
    p = explore.view(1 << 20, system)
    f = explore.by_system[system].fit()
    assert p["seconds"] == pytest.approx(f.latency_s + (1 << 20) / (f.bandwidth_GBps * 1e9))


def test_the_claim_and_the_other_directions_record_their_datasets():
    from labkit.copies import latency_lesson

    s = Session("01_pcie_latency_curve", "reference", gpus=0)
    s.present(latency_lesson.Claim())
    s.present(latency_lesson.OtherDirections())
    assert s.checks == {"claim_fails_on_every_copy_sweep": True}
    assert s.experiments["h2d_vs_d2h"]["systems"] == 10 and s.experiments["h2d_vs_d2h_others"]["h2d_ahead"] >= 1
    assert all(isinstance(n, str) for n in s.datasets)


def test_without_a_fit_the_exercises_and_predictions_say_why_they_cannot_be_checked():
    from labkit import check
    from labkit.copies import latency_lesson

    fits = latency_lesson.Fits(latency_lesson.Curves(Shown("h2d_sweep", "reference", "nothing", None, ""), []))
    scored = fits.exercises(1.0, 2.0) + fits.predictions(5.0, 64)
    assert [r.name for r in scored] == ["1 MiB copy time", "batching factor", "latency of a tiny copy", "n½"]
    assert {r.status for r in scored} == {check.NOTHING_TO_CHECK}
    assert all("enough sizes to fit" in r._repr_markdown_() for r in scored)


def test_the_exercises_are_checked_against_the_primary_fit(curves):
    from labkit.copies import latency_lesson

    f = curves.sweeps[0].fit()
    one_mib_us, factor = f.predict(1 << 20) * 1e6, 1000 * f.predict(4096) / f.predict(1000 * 4096)
    right = latency_lesson.Fits(curves).exercises(one_mib_us, factor)
    assert [r.passed for r in right] == [True, True]
    guesses = latency_lesson.Fits(curves).predictions(f.latency_s * 1e6, f.n_half_bytes / 1024)
    assert [r.passed for r in guesses] == [True, True]


def test_the_points_table_says_so_when_every_curve_is_fitted(curves):
    """nb01 showed an empty table with no columns when no curve had a few sizes only."""
    import dataclasses

    from labkit.copies import latency_lesson

    assert not curves.points
    assert "Every curve shown has at least" in latency_lesson.Points(curves).report()
    c = curves.sweeps[0]
    few = dataclasses.replace(c, nbytes=c.nbytes[:1], seconds=c.seconds[:1])  # one size: a point, not a sweep
    table = latency_lesson.Points(latency_lesson.Curves(Shown("h2d_sweep", "live", "measured here", [few], ""), []))
    assert list(table.report().columns) == ["system", "direction", "size", "GB/s"] and len(table.report()) == 1


def test_the_exercises_on_named_systems_say_why_when_the_reference_leaves_them_out(survey):
    from labkit import check

    ratio = pinned_lesson.Ratios(survey, None)
    dgx, dell = ratio.of("dgx_a100", "h2d"), survey.bandwidth("a100_80gb_pcie", "h2d", "pinned")
    assert ratio.check_dgx_a100(dgx).passed and survey.check_dell_pinned(dell).passed
    assert ratio.score_dgx_a100(dgx).passed
    only_pinned = [d for d in ref.load_all(kind="copy_sweep") if set(d.frame["memory"]) == {"pinned"}]
    none = pinned_lesson.Survey(only_pinned, measured=[])
    left_out = [
        pinned_lesson.Ratios(none, "somewhere").check_dgx_a100(dgx),
        pinned_lesson.Ratios(none, "somewhere").score_dgx_a100(dgx),
        none.check_dell_pinned(dell),
    ]
    assert {r.status for r in left_out} == {check.NOTHING_TO_CHECK}
    assert "reference='somewhere' shows no DGX A100" in left_out[0].message
    assert all(pinned_lesson.SHOW_ALL in r.message for r in left_out)


def test_the_one_copy_prediction_says_why_without_a_1_mib_row():
    from labkit import check

    found = pin_cost.recorded(ref.load_all(kind="point")).data
    pin = pinned_lesson.PinCost.of(found)
    assert pin.score_one_copy_pays(pin.pays_for_one_copy(1 << 20)).passed
    table = found.table[found.table.nbytes != 1 << 20]
    without = pinned_lesson.PinCost(table, found.pin_label, found.copy_label, found.what)
    r = without.score_one_copy_pays(True)
    assert r.status == check.NOTHING_TO_CHECK and "no 1 MiB row" in r.message
