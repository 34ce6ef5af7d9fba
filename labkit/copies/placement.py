"""Where the host side of a copy sits: the CPU socket (NUMA) and the PCIe root complex, from recorded data.

Two shipped measurements (notebook 02):
- a Tesla P100 PCIe server, bandwidthTest with the process and its memory on the GPU's own socket vs
  on the other socket (`numactl -m0 -N0` / `-m1 -N1`; gearshifft PR #82): the DMA crosses the CPU
  interconnect, and both directions drop;
- eight RTX PRO 6000 on PCIe Gen5 switches (WRX90), host DMA of one GPU alone vs 8 GPUs at once: four
  GPUs share each switch's Gen5 x16 uplink, so eight at once measure uplink oversubscription (group A's
  114.10 GB/s H2D aggregate is two saturated uplinks, ~57 GB/s each, 14.26 GB/s per GPU); only the
  difference between group A (two switches on two root complexes) and group B (two switches on one root
  complex, 73.09 GB/s) shows the shared root complex.
Values are as recorded (the P100's in bandwidthTest's "MB/s", as printed — MiB/s by its formula); ratios are unit-free.
"""

from __future__ import annotations

from ..reference import load

NUMA = "bandwidthtest_p100_pcie_numa_local_vs_remote_gearshifft_pr82_points"
CONTENTION = "host_dma_single_vs_8gpu_concurrent_rtxpro6000_wrx90_rtx6kpro"


def _point(frame, direction: str, where: str) -> float:
    rows = frame[frame["quantity"].str.contains(f"bandwidthTest {direction}") & frame["quantity"].str.contains(where)]
    return float(rows["value"].iloc[0])


def host_placement_table():
    """DataFrame: system, case, direction, value, unit, vs_best (the ratio to the local / alone case), dataset."""
    import pandas as pd

    rows = []
    numa = load(NUMA)
    f = numa.frame
    for direction in ("H2D", "D2H"):
        local, remote = _point(f, direction, "GPU-local socket"), _point(f, direction, "remote socket")
        for case, v in (("process and memory on the GPU's socket", local), ("on the other socket", remote)):
            rows.append(
                {
                    "system": "Tesla P100 PCIe, 2 sockets",
                    "case": case,
                    "direction": direction.lower(),
                    "value": v,
                    "unit": "MiB/s (bandwidthTest printed 'MB/s')",
                    "vs_best": v / local,
                    "dataset": NUMA,
                }
            )
    c = load(CONTENTION).frame
    c = c[c["direction"] == "h2d"]
    alone = float(c[c["run"] == "single GPU 0 alone"]["bandwidth_GBps"].iloc[0])
    for run, case in (
        ("single GPU 0 alone", "one GPU alone"),
        (
            "8 GPUs concurrently, group A (GPU 0-7, 2 root complexes): per GPU",
            "8 at once, 4 per switch uplink, 2 root complexes",
        ),
        (
            "8 GPUs concurrently, group B (GPU 8-15, shared root complex): per GPU",
            "8 at once, 4 per switch uplink, 1 shared root complex",
        ),
    ):
        v = float(c[c["run"] == run]["bandwidth_GBps"].iloc[0])
        rows.append(
            {
                "system": "8x RTX PRO 6000, PCIe Gen5 switches (WRX90)",
                "case": case + " (per GPU)",
                "direction": "h2d",
                "value": v,
                "unit": "GB/s",
                "vs_best": v / alone,
                "dataset": CONTENTION,
            }
        )
    return pd.DataFrame(rows)
