"""H2D against D2H on every shipped system: the data behind notebook 01's "check the claim" exercise.

One row per system: pinned copy-engine copies at the largest size both directions share, values as
stored in data/ (the RTX PRO 6000 row is GPU 0 alone; the 8-GPU concurrent rows of that dataset are a
contention experiment, not a direction comparison). A claim often repeated — "host→device is 10–20%
faster than device→host" — is checked against it: H2D is a DMA *read* of host memory (non-posted
requests, completions split at the root complex's read completion boundary), D2H *posted writes*
(Intel AN 855, "Throughput for Reads"), so D2H is at least as fast on every system shipped.
"""

from __future__ import annotations

import statistics

from ..reference import load

#: (dataset, run or None): the systems with pinned H2D and D2H sweeps in data/.
SYSTEMS = (
    ("bandwidthtest_a100_sxm4_40gb_cloud_vm", None),
    ("bandwidthtest_pinned_pageable_a100_80gb_pcie_dell", None),
    ("bandwidthtest_pinned_pageable_dgx_a100_sxm4_80gb", None),
    ("bandwidthtest_rtx2080ti_autodl_container", None),
    ("bandwidthtest_shmoo_v100_pcie_32gb_superbench", None),
    ("bandwidthtest_t4_aliyun_vm", None),
    ("bandwidthtest_v100_sxm2_16gb_aliyun_vm", None),
    ("cse554_quadro_rtx6000_pageable_vs_pinned_1b_to_1mib", "benchmark_csv"),
    ("h100_vm_labkit_gpu_copy_sweep", None),
    ("host_dma_single_vs_8gpu_concurrent_rtxpro6000_wrx90_rtx6kpro", "single GPU 0 alone"),
)
#: The claim as a test: H2D at least 10% above D2H.
CLAIM_FACTOR = 1.10


def h2d_vs_d2h():
    """DataFrame: system, nbytes, h2d_GBps, d2h_GBps, d2h_over_h2d, claim_holds (recorded data)."""
    import pandas as pd

    rows = []
    for name, run in SYSTEMS:
        ds = load(name)
        f = ds.frame[ds.frame["memory"] == "pinned"]
        if run is not None:
            f = f[f["run"] == run]
        h, d = f[f["direction"] == "h2d"], f[f["direction"] == "d2h"]
        n = max(set(h["nbytes"]) & set(d["nbytes"]))
        hb = float(h[h["nbytes"] == n]["bandwidth_GBps"].iloc[0])
        db = float(d[d["nbytes"] == n]["bandwidth_GBps"].iloc[0])
        rows.append(
            {
                "system": ds.meta["title"],
                "dataset": name,
                "nbytes": int(n),
                "h2d_GBps": hb,
                "d2h_GBps": db,
                "d2h_over_h2d": db / hb,
                "claim_holds": hb >= CLAIM_FACTOR * db,
            }
        )
    return pd.DataFrame(rows)


def summary(table) -> dict:
    """How many systems the claim holds on, the median and the largest D2H/H2D, and where."""
    worst = table.loc[table["d2h_over_h2d"].idxmax()]
    return {
        "systems": len(table),
        "claim_holds_on": int(table["claim_holds"].sum()),
        "median_d2h_over_h2d": float(statistics.median(table["d2h_over_h2d"])),
        "largest_gap_dataset": str(worst["dataset"]),
        "largest_d2h_over_h2d": float(worst["d2h_over_h2d"]),
    }
