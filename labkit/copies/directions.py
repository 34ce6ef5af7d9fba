"""H2D against D2H on every shipped system: the data behind notebook 01's "check the claim" exercise.

One row per system: pinned copy-engine copies at the largest size both directions share, values as
stored in data/ (the RTX PRO 6000 row is GPU 0 alone; the 8-GPU concurrent rows of that dataset are a
contention experiment, not a direction comparison). A claim often repeated — "host→device is 10–20%
faster than device→host" — is checked against it: H2D is a DMA *read* of host memory (non-posted
requests, completions split at the root complex's read completion boundary), D2H *posted writes*
(Intel AN 855, "Throughput for Reads": "read throughput is somewhat lower than write throughput").
That makes D2H *often* a little ahead — not always: the claim fails on every copy sweep shipped, but
other shipped measurements (`others()`: busGrind per GPU, nvbandwidth on 8x H200, the RTX PRO 6000
group aggregate) have H2D ahead by up to ~5%. The directions are usually within a few percent.
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
#: Other shipped measurements with both directions of the same host link (point datasets and the RTX PRO 6000
#: contention rows): (dataset, h2d quantity or run, d2h quantity or run, label). Values are read from data/.
OTHERS = (
    (
        "nvbandwidth_8xh200_pcie5_nvlink_mlengineering_points",
        "nvbandwidth host-to-device",
        "nvbandwidth device-to-host",
        "8x H200, nvbandwidth CE, per GPU (ml-engineering)",
    ),
    (
        "host_dma_single_vs_8gpu_concurrent_rtxpro6000_wrx90_rtx6kpro",
        "group A (GPU 0-7, 2 root complexes): aggregate",
        "group A (GPU 0-7, 2 root complexes): aggregate",
        "8x RTX PRO 6000 at once, group A aggregate (rtx6kpro)",
    ),
    *(
        (
            "busgrind_host_device_8gpu_issue357_points",
            f"host-to-device bandwidth (pinned), GPU {g}",
            f"device-to-host bandwidth (pinned), GPU {g}",
            f"8-GPU server, busGrind GPU {g} (cuda-samples#357)",
        )
        for g in range(8)
    ),
    (
        "nvbandwidth_c2c_dgx_station_gb300_mlengineering_points",
        "(host_to_device_memcpy_ce)",
        "(device_to_host_memcpy_ce)",
        "DGX Station GB300, NVLink-C2C, nvbandwidth CE (ml-engineering)",
    ),
)


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


def _rows(ds, needle: str):
    f = ds.frame
    if "quantity" in f.columns:  # a point dataset: the one row whose quantity names it
        rows = f[f["quantity"].str.contains(needle, regex=False)]
    else:  # a copy sweep: the run named, pinned
        rows = f[f["run"].str.contains(needle, regex=False) & (f["memory"] == "pinned")]
    return rows


def others():
    """DataFrame: label, dataset, h2d_GBps, d2h_GBps, d2h_over_h2d — shipped points outside the copy sweeps."""
    import pandas as pd

    rows = []
    for name, h_key, d_key, label in OTHERS:
        ds = load(name)
        h, d = _rows(ds, h_key), _rows(ds, d_key)
        if "direction" in ds.frame.columns:
            h, d = h[h["direction"] == "h2d"], d[d["direction"] == "d2h"]
        col = "value" if "value" in ds.frame.columns else "bandwidth_GBps"
        if len(h) != 1 or len(d) != 1:
            raise ValueError(f"{name}: expected one H2D and one D2H value for {label!r}, found {len(h)} and {len(d)}")
        hb, db = float(h[col].iloc[0]), float(d[col].iloc[0])
        rows.append({"system": label, "dataset": name, "h2d_GBps": hb, "d2h_GBps": db, "d2h_over_h2d": db / hb})
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
