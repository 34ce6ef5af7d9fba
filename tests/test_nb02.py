"""Notebook 02 (pinned vs pageable) executed by papermill in reference mode, asserting on its results JSON."""

import math

import pytest


@pytest.mark.notebook
def test_nb02_reference_mode(run_nb):
    r = run_nb("02_pinned_vs_pageable")
    assert r["mode"] == "reference"
    ex = r["experiments"]
    # GPU experiments replay recorded data; the cheap CPU ones run live, labelled as such
    assert ex["pinned_vs_pageable"]["mode"] == "reference"
    assert ex["dataloader"]["mode"] == "reference"
    assert ex["nonblocking_pitfall"]["mode"] == "reference"
    assert ex["pin_cost"]["mode"] == "live"
    # a pin-cost run recorded on a GPU (labkit record, H100) is replayed, labelled as recorded
    assert ex["pin_cost"]["pin"].startswith("recorded:") and "H100" in ex["pin_cost"]["pin"]
    assert ex["pin_cost"]["copies"].startswith("recorded:")
    # the recorded systems the issue names: Quadro sweep, DGX A100 and A100-PCIe 32 MB points, 2080 Ti points
    with_both = ex["pinned_vs_pageable"]["recorded_with_both"]
    for needle in ("quadro_rtx6000", "dgx_a100", "a100_80gb_pcie"):
        assert any(needle in n for n in with_both), f"{needle} has no ratio shown: {with_both}"
    assert any("rtx2080ti" in n for n in r["datasets"])
    # systems with pinned numbers only are listed as having no ratio
    only = ex["pinned_only"]["datasets"]
    assert any("rtx2080ti" in n for n in only) and not set(only) & set(with_both)
    # the first datacenter-GPU sweep 4 B .. 1 GiB with both memories, recorded by labkit record
    assert "h100_vm_labkit_gpu_copy_sweep" in with_both
    # the ratio is not a constant "about 2x"
    assert r["numbers"]["ratio_min"] > 1.0
    assert r["numbers"]["ratio_max"] / r["numbers"]["ratio_min"] > 1.5
    assert r["numbers"]["break_even_copies_largest"] > 0
    # the DataLoader run recorded on the H100 is shown; it is the only one in data/
    assert ex["dataloader"]["shown"] is True
    assert "h100_vm_labkit_dataloader_throughput" in r["datasets"]
    assert ex["nonblocking_pitfall"]["wrong_before"] > 0 and ex["nonblocking_pitfall"]["wrong_after"] == 0
    # NUMA and a shared root complex, recorded: the remote socket and 8 GPUs at once are slower than local / alone
    assert r["checks"]["remote_and_shared_are_slower"]
    assert "bandwidthtest_p100_pcie_numa_local_vs_remote_gearshifft_pr82_points" in r["datasets"]
    assert set(ex["exercises"].values()) == {"not attempted"} and len(ex["exercises"]) == 8
    assert r["all_checks_passed"], r["checks"]
    assert {"pinned_cap_enforced", "figures_labelled", "pitfall_wrong_before_sync"} <= set(r["checks"])
    assert set(ex["exercises"].values()) == {"not attempted"}
    assert {"MiB→GB/s", "timer for a pageable copy"} <= set(ex["exercises"])
    # the interview numbers come from this run: the replayed H100 sweep and pin cost, per direction
    iv = ex["interview"]
    assert iv["ratio_source"].startswith("recorded:") and "H100" in iv["ratio_source"]
    for direction in ("h2d", "d2h"):
        ratio = iv[f"ratio_{direction}"]
        assert math.isfinite(ratio) and ratio > 1.0  # pinned beats pageable at the largest size
        assert r["numbers"]["ratio_min"] <= ratio <= r["numbers"]["ratio_max"]  # it is one of the ratios shown
    assert iv["ratio_nbytes"] == 1 << 30  # the sweep's largest size (4 B .. 1 GiB)
    assert math.isfinite(iv["break_even_copies"])
    assert iv["break_even_copies"] == pytest.approx(r["numbers"]["break_even_copies_largest"])
    assert iv["break_even_size_bytes"] == r["numbers"]["break_even_size_bytes"]
    assert iv["break_even_source"] == ex["pin_cost"]["pin"]
    assert r["_seconds"] < 60


# reference= naming a point set without a pin-cost run: tests/test_executors.py, in its nbconvert run.
