"""Notebook 01 executed by papermill in reference mode, asserting on its results JSON."""

import pytest

from labkit import reference
from labkit.copies import curves as lc
from labkit.copies import small_copy as sc


@pytest.mark.notebook
def test_nb01_reference_mode(run_nb):
    r = run_nb("01_pcie_latency_curve")
    assert r["mode"] == "reference"
    assert r["experiments"]["h2d_sweep"]["mode"] == "reference"
    # host memory is measured live in every mode, and labelled as such
    assert r["experiments"]["host_copy_sweep"]["mode"] == "live"
    # at least three recorded systems, including the three the course is built on
    shown = r["datasets"]
    assert len(shown) >= 3
    for needle in ("v100_pcie", "quadro_rtx6000", "a100", "t4", "2080"):
        assert any(needle in name for name in shown), f"no dataset with {needle!r} shown: {shown}"
    # and the datacenter-GPU sweep 4 B .. 1 GiB recorded by labkit record on an H100
    assert "h100_vm_labkit_gpu_copy_sweep" in shown
    # the fit is plausible: a latency floor of a few µs and a bandwidth below the PCIe Gen3 spec
    assert 0.5 < r["numbers"]["alpha_us"] < 50
    assert 1 < r["numbers"]["beta_GBps"] < 15.76
    assert r["numbers"]["n_half_bytes"] > 1024
    assert r["all_checks_passed"], r["checks"]
    # the small-copy floor: recorded H100 unblocked loop, D2H flat (the host's per-call issue cost)
    small = r["experiments"]["small_copies"]
    assert small["obtained"] == "recorded" and small["rows"] >= 10
    assert 1.0 < small["d2h_floor_spread"] < 1.1
    # every figure (the widget's too) went through session.figure and has a title, units and a source
    assert r["checks"]["figures_labelled"] and r["figures_checked"] >= 4 and r["figure_problems"] == []
    # unanswered exercises are reported, not crashed on
    assert set(r["experiments"]["exercises"].values()) == {"not attempted"}
    # the "check the claim" table: H2D is at least 10% faster than D2H on none of the ten shipped copy sweeps,
    # and the other shipped measurements show that D2H >= H2D is no law either (H2D ahead on some)
    assert r["checks"]["claim_fails_on_every_copy_sweep"]
    assert r["experiments"]["h2d_vs_d2h"]["claim_holds_on"] == 0 and r["experiments"]["h2d_vs_d2h"]["systems"] == 10
    others = r["experiments"]["h2d_vs_d2h_others"]
    assert others["h2d_ahead"] >= 1 and others["min_d2h_over_h2d"] < 1 < others["max_d2h_over_h2d"]
    # the device-order table ran live (no GPU here: no rows, and it says why)
    assert r["experiments"]["device_order"]["gpus"] == 0
    assert any("CUDA_DEVICE_ORDER" in n for n in r["experiments"]["device_order"]["notes"])
    assert "nvbandwidth_h2d_h100_vm_4gpu_issue6_points" in shown
    _summary_quotes_the_run(r)


def _markdown(name):
    import json

    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook(name).read_text())
    # whitespace normalised: a quoted number may sit across a line break
    return {
        i: " ".join("".join(c["source"]).split()) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
    }


def _section(name, heading):
    return next(t for t in _markdown(name).values() if t.startswith(heading))


def _summary_quotes_the_run(r):
    """The summary's numbers are the ones this run computed (results JSON), as the summary rounds them."""
    text = _section("01_pcie_latency_curve", "## Summary")
    n, claim = r["numbers"], r["experiments"]["h2d_vs_d2h"]
    assert f"α ≈ {n['alpha_us']:.1f} µs, β ≈ {n['beta_GBps']:.1f} GB/s, n½ ≈ {n['n_half_bytes'] / 1024:.0f} KiB" in text
    assert f"median ×{claim['median_d2h_over_h2d']:.2f}, the Dell A100 ×{claim['largest_d2h_over_h2d']:.2f}" in text
    assert "all ten shipped copy sweeps" in text and claim["systems"] == 10


def test_fit_on_recorded_sweep_gives_a_plausible_latency_floor():
    """The CSE 554 sweep times synchronous cudaMemcpy (its README derives ~6-7 µs per call)."""
    name = next(n for n in reference.list_datasets(kind="copy_sweep") if "quadro_rtx6000" in n)
    curves = [c for c in lc.curves_from_dataset(reference.load(name)) if c.direction == "h2d"]
    assert curves
    for c in curves:
        fit = c.fit()
        assert 5.0 < fit.latency_s * 1e6 < 8.0
        assert 8.0 < fit.bandwidth_GBps < 15.76  # below PCIe Gen3 x16 per direction


def test_significant_digits_filter():
    assert reference.significant_digits("0.004") == 1
    assert reference.significant_digits("12.0") == 3
    assert reference.significant_digits("1.5e-4") == 2
    assert reference.significant_digits("0.000151264") == 6


def test_nb01_text_quotes_the_data():
    """Numbers the markdown quotes from data/ (not computed by the run): the other directions, Q4 and Q5, the plateaus."""
    from labkit import specs
    from labkit.copies import directions

    md = "\n".join(_markdown("01_pcie_latency_curve").values())
    others = directions.others().set_index("system")
    gpu7 = others.loc["8-GPU server, busGrind GPU 7 (cuda-samples#357)"]
    assert f"busGrind GPU 7: {gpu7.h2d_GBps:.2f} vs {gpu7.d2h_GBps:.2f} GB/s" in md
    assert f"up to ~{100 * (1 / others.d2h_over_h2d.min() - 1):.0f}%" in md
    # Q5: one packed 40 MB copy, by the H100 fit and at the measured plateau
    h2d = next(
        c for c in lc.curves_from_dataset(reference.load("h100_vm_labkit_gpu_copy_sweep")) if c.direction == "h2d"
    )
    fit, packed = h2d.fit(), 10_000 * 4096
    assert (
        f"≈ {fit.predict(packed) * 1e3:.2f} ms by the fit (α {fit.latency_s * 1e6:.2f} µs, β {fit.bandwidth_GBps:.1f} GB/s"
        in md
    )
    assert f"{packed / (h2d.bandwidth_GBps.max() * 1e9) * 1e3 + fit.latency_s * 1e3:.2f} ms)" in md
    # Q5's small copy and the per-call D2H cost (the no-blocker floor up to 128 KiB), Q4's plateaus
    f = reference.load("h100_vm_labkit_gpu_copy_sweep").frame
    pinned = f[f.memory == "pinned"].set_index(["direction", "nbytes"])
    small = pinned.loc[("h2d", 4096)]
    assert f"4 KiB pinned H2D copy took {small.time_s * 1e6:.1f} µs ({small.bandwidth_GBps:.2f} GB/s" in md
    floor = sorted(
        r["d2h_us (no blocker)"] for r in sc.recorded_floor(sc.RECORDED_SWEEP).data if r["bytes"] <= 128 << 10
    )
    assert f"~{floor[len(floor) // 2]:.1f} µs per `copy_()` call for D2H" in md
    top = pinned.xs(1 << 30, level="nbytes").bandwidth_GBps
    assert f"reached {top['h2d']:.2f} (H2D) / {top['d2h']:.2f} (D2H)" in md
    # Q4: header overheads on Gen5 x16
    gen5 = specs.pcie_spec(5).bandwidth_GBps
    assert (
        f"{gen5 * 256 / 276:.1f} GB/s for completions" in md and f"{gen5 * 256 / 280:.1f} GB/s for 64-bit writes" in md
    )
    # the summary's plateau shares (of the per-direction spec of the generation)
    for name, gen, pct in (("t4_aliyun", 3, 62), ("a100_sxm4_40gb_cloud", 4, 39)):
        f = reference.load(f"bandwidthtest_{name}_vm").frame
        h2d_peak = f[(f.direction == "h2d") & (f.memory == "pinned")].bandwidth_GBps.max()
        assert round(100 * h2d_peak / specs.pcie_spec(gen).bandwidth_GBps) == pct


def test_h2d_vs_d2h_claim_table_matches_the_data():
    """Exercise 4's table: every shipped pinned CE system, D2H >= H2D on all (the claim holds on none)."""
    from labkit.copies import directions

    t = directions.h2d_vs_d2h()
    s = directions.summary(t)
    assert s["systems"] == 10 and s["claim_holds_on"] == 0
    assert s["largest_gap_dataset"] == "bandwidthtest_pinned_pageable_a100_80gb_pcie_dell"
    dell = t.set_index("dataset").loc["bandwidthtest_pinned_pageable_a100_80gb_pcie_dell"]
    assert (dell["h2d_GBps"], dell["d2h_GBps"]) == (17.3, 24.6)
    assert 1.07 < s["median_d2h_over_h2d"] < 1.09
