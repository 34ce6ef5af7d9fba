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
    assert set(ex["exercises"].values()) == {"not attempted"} and len(ex["exercises"]) == 10
    assert r["all_checks_passed"], r["checks"]
    assert {"pinned_cap_enforced", "figures_labelled", "pitfall_wrong_before_sync"} <= set(r["checks"])
    assert set(ex["exercises"].values()) == {"not attempted"}
    assert {"MiB→GB/s", "timer for a pageable copy", ".to('cpu', non_blocking=True) pins"} <= set(ex["exercises"])
    # kinds of host memory: every row has a number or says that no source here has one
    kinds = ex["host_memory_kinds"]
    assert kinds["rows"] == 7 and kinds["no_number"] == 2
    assert {
        "nvbandwidth_c2c_dgx_station_gb300_mlengineering_points",
        "nvbandwidth_sm_h2d_vs_d2h_8xh100_issue24_points",
    } <= set(r["datasets"])
    _summary_quotes_the_run(r)
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


def _markdown_text(name="02_pinned_vs_pageable"):
    import json

    from labkit.tools.notebooks import find_notebook

    nb = json.loads(find_notebook(name).read_text())
    return [" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _summary_quotes_the_run(r):
    """The summary's numbers are this run's (results JSON), as the summary rounds them."""
    text = next(t for t in _markdown_text() if t.startswith("## Summary"))
    n, kinds = r["numbers"], r["experiments"]["host_memory_kinds"]
    assert f"from {n['ratio_min']:.2f}× (DGX A100 D2H, 32 MB) to {n['ratio_max']:.2f}× (H100 VM H2D, 1 GiB)" in text
    assert f"slower ({n['dataloader_pinned_speedup']:.2f}×;" in text
    assert f"copies {kinds['c2c_h2d']:.2f} / {kinds['c2c_d2h']:.2f} GB/s pinned" in text
    assert f"({kinds['zero_copy_read_min']:.0f} GB/s on the recorded 8× H100)" in text
    assert f"({kinds['uvm_demand']} vs {kinds['uvm_prefetch']} GB/s" in text


def test_nb02_text_quotes_the_data():
    """Numbers the markdown quotes from data/: the uneven pageable curve, the switch uplinks, exercise 7's time."""
    from labkit import reference

    md = "\n".join(_markdown_text())
    f = reference.load("h100_vm_labkit_gpu_copy_sweep").frame
    h = f[f.direction == "h2d"]
    pinned = h[h.memory == "pinned"].set_index("nbytes")
    pageable = h[h.memory == "pageable"].set_index("nbytes").bandwidth_GBps
    big = pageable[pageable.index >= 64 << 20]
    assert f"{pageable[32 << 20]:.2f} GB/s at 32 MiB, {big.min():.1f}–{big.max():.1f} GB/s from 64 MiB on" in md
    ratio = pinned.bandwidth_GBps / pageable
    assert f"{ratio[32 << 20]:.1f}× at 32 MiB and {ratio[512 << 20]:.1f}× at 512 MiB" in md
    assert f"in {pinned.time_s[256 << 20] * 1e3:.3f} ms (the recorded H100 VM sweep)" in md
    c = reference.load("host_dma_single_vs_8gpu_concurrent_rtxpro6000_wrx90_rtx6kpro").frame.set_index("run")
    a = c[c.direction == "h2d"].bandwidth_GBps
    agg_a = a["8 GPUs concurrently, group A (GPU 0-7, 2 root complexes): aggregate"]
    per_a = a["8 GPUs concurrently, group A (GPU 0-7, 2 root complexes): per GPU"]
    agg_b = a["8 GPUs concurrently, group B (GPU 8-15, shared root complex): aggregate"]
    assert f"group A's {agg_a:.2f} GB/s is two saturated uplinks" in md and f"{per_a:.2f} GB/s per GPU" in md
    assert f"{agg_a:.2f} vs {agg_b:.2f} GB/s aggregate" in md
