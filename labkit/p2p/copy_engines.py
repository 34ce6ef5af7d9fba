"""Copy engines vs SM copies: nvbandwidth's `*_ce` and `*_sm` testcases side by side, from recorded data.

nvbandwidth README, "Test Details": *"There are two types of copies implemented, Copy Engine (CE) or Steaming
Multiprocessor (SM) … CE copies use memcpy APIs. SM copies use kernels."* A CE copy is the GPU's DMA engine
issuing the transfers (what `cudaMemcpy`, `tensor.copy_` and NCCL's CE paths use); an SM copy is GPU threads
issuing 16-byte loads and stores — it competes with kernels for SMs, and its packets are smaller (NCCL's
maintainer: *"SMs are limited to 128B payload size … when Copy Engines can use 256B"*, nccl-tests#149).
"""

from __future__ import annotations

import statistics

from .. import reference as ref


def _point(name: str, starts: str) -> float:
    f = ref.load(name).frame
    return float(f[f.quantity.str.startswith(starts)].value.iloc[0])


def _points(name: str, contains: str) -> list[float]:
    f = ref.load(name).frame
    return [float(v) for v in f[f.quantity.str.contains(contains, regex=False)].value]


H200_CE = "nvbandwidth_8xh200_pcie5_nvlink_mlengineering_points"
H200_SM = "nvbandwidth_sm_azure_ndh200v5_points"
H100_SM_ISSUE24 = "nvbandwidth_sm_h2d_vs_d2h_8xh100_issue24_points"
A100_SM = "nvbandwidth_sm_azure_nda100v4_points"
DATASETS = (H200_CE, H200_SM, H100_SM_ISSUE24, A100_SM)


def ce_vs_sm_table():
    """One row per path: the recorded CE and SM figures (GB/s = 1e9 B/s), their direction, and where each comes
    from. CE and SM were recorded on different machines of the same class unless the row says otherwise."""
    import pandas as pd

    i24_h2d, i24_d2h = _points(H100_SM_ISSUE24, "host_to_device"), _points(H100_SM_ISSUE24, "device_to_host")
    rows = [
        ("8× H200 (NVSwitch)", "GPU↔GPU, both directions at once (sum)", "bidirectional",
         _point(H200_CE, "nvbandwidth -i 10 -t device_to_device_bidirectional"), _point(H200_SM, "nvbandwidth 'Device to Device"),
         "CE: ml-engineering (write_ce, total); SM: Azure ND H200 v5 (read_sm, sum)"),
        ("8× H200 (PCIe Gen5 x16)", "host→GPU", "unidirectional",
         _point(H200_CE, "nvbandwidth host-to-device"), _point(H200_SM, "nvbandwidth 'Host to Device"),
         "CE: ml-engineering; SM: Azure ND H200 v5"),
        ("8× H200 (PCIe Gen5 x16)", "GPU→host", "unidirectional",
         _point(H200_CE, "nvbandwidth device-to-host"), _point(H200_SM, "nvbandwidth 'Device to Host"),
         "CE: ml-engineering; SM: Azure ND H200 v5"),
        ("8× H100 (nvbandwidth#24)", "host→GPU, SM (median of 8 GPUs)", "unidirectional",
         float("nan"), statistics.median(i24_h2d), "SM only: a user's report, same machine as the next row"),
        ("8× H100 (nvbandwidth#24)", "GPU→host, SM (median of 8 GPUs)", "unidirectional",
         float("nan"), statistics.median(i24_d2h), "SM only: a user's report"),
        ("8× A100 (Azure ND A100 v4)", "GPU→host, SM", "unidirectional",
         float("nan"), _point(A100_SM, "nvbandwidth 'Device to Host"), "SM only; its H2D SM is 26.28 GB/s"),
    ]  # fmt: skip
    cols = ["system", "path", "direction", "copy engine (GB/s)", "SM copy (GB/s)", "recorded: source"]
    return pd.DataFrame(rows, columns=cols)


class CeVsSm:
    """`ce_vs_sm_table` shown, with the 8× H200 GPU↔GPU pair of figures it leads with."""

    datasets = DATASETS

    def __init__(self):
        self.table = ce_vs_sm_table()

    def report(self):
        return self.table

    def numbers(self) -> dict:
        first = self.table.iloc[0]
        return {"h200_d2d_bi_ce_GBps": first["copy engine (GB/s)"], "h200_d2d_bi_sm_GBps": first["SM copy (GB/s)"]}
