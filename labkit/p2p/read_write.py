"""P2P reads against P2P writes in the shipped matrices (notebook 04): which GPU initiates, and what that costs.

A peer *write* (the source GPU's copy engine pushes into the peer's memory) is a posted transaction: it
needs no reply. A peer *read* (the destination pulls) sends a request and waits for the completion with
the data — a round trip through NVSwitch, a PCIe switch or the root complex. cuda-samples
p2pBandwidthLatencyTest times writes by default (`P2P_WRITE`) and reads with `--p2p_read`; nvbandwidth
has `device_to_device_memcpy_read_ce` and `..._write_ce` (testcases_ce.cpp: the read test runs in the
destination's context, the write test in the source's).

No shipped source measured both kinds on the same machine: the pairs below are the same GPU class and
fabric measured by different people and tools, so a difference of a few percent is not a read/write
effect. No shipped source has PCIe P2P reads at all — the PCIe systems published writes only.
"""

from __future__ import annotations

from ..reference import load
from .matrices import matrix, median_off_diagonal

#: (label, read dataset, write dataset, write tool): the same GPU class and fabric, read vs write.
PAIRS = (
    (
        "8x H100 SXM, NVSwitch",
        "nvbandwidth_d2d_read_ce_8xh100_azure_nd96isr_v5",
        "p2p_uni_writes_8xh100_nvswitch_mlengineering",
        "p2pBandwidthLatencyTest (P2P writes), ml-engineering",
    ),
)
READ_TOOL = "nvbandwidth device_to_device_memcpy_read_ce (v0.4), Azure ND96isr H100 v5 health-check notes"


def table():
    """DataFrame: system, initiated by, tool, dataset, median unidirectional GB/s over all GPU pairs (recorded)."""
    import pandas as pd

    rows = []
    for label, read, write, write_tool in PAIRS:
        rows.append(
            {
                "system": label,
                "access": "read (destination pulls: request + completion)",
                "tool": READ_TOOL,
                "dataset": read,
                "median_GBps": _median(read),
            }
        )
        rows.append(
            {
                "system": label,
                "access": "write (source pushes: posted)",
                "tool": write_tool,
                "dataset": write,
                "median_GBps": _median(write),
            }
        )
    return pd.DataFrame(rows)


def _median(name: str) -> float:
    return float(median_off_diagonal(matrix(load(name), "bandwidth_uni", "enabled")))


class ReadVsWrite:
    """Notebook 04's section 6: the read/write table, and the 8× H100 NVSwitch medians it compares."""

    def __init__(self):
        self.table = table()
        self.datasets = tuple(self.table["dataset"])
        read, write = self.table["median_GBps"].iloc[:2]  # PAIRS[0], 8x H100 NVSwitch: read row, then write row
        self.read_over_write = read / write  # two different machines and tools
        self.h100_read, self.h100_pair = read, write  # each pair measured alone, writing one way: the median pair

    def report(self):
        return self.table.round(2)

    def numbers(self) -> dict:
        return {"h100_p2p_read_over_write": self.read_over_write, "h100_nvswitch_pair_uni_GBps": self.h100_pair}

    def summary_line(self) -> str:
        return (
            f"read ÷ write, medians over the 56 pairs: {self.read_over_write:.3f} — recorded, two machines, two tools"
        )
