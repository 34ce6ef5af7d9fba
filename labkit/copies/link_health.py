"""PCIe link health and GPU numbering: NVML replay counters, and CUDA's device order against PCI bus order (notebook 01).

- Replays: a PCIe link retransmits a packet whose CRC failed (a "replay"); NVML counts them
  (nvmlDeviceGetPcieReplayCounter, `nvidia-smi -q -d PCIE`: "Replays Since Reset"). A link can keep
  its generation and width and still lose bandwidth to replays (signal integrity: risers, retimers,
  dirty contacts); AER messages in the kernel log (`journalctl -k | grep -i aer`) say the same.
- Numbering: CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA Programming
  Guide, "CUDA Environment Variables"); nvidia-smi, NVML and `nvidia-smi topo -m` use PCI bus order.
  On a box of mixed GPUs, torch's cuda:0 need not be nvidia-smi's GPU 0.
"""

from __future__ import annotations

import os
import sys

from ..reference import load
from ..system import no_nvidia_driver, nvml_gpus

#: A recorded link far below its siblings with gen and width not reported: nvbandwidth issue #6 (4x H100 VM).
RECORDED_OUTLIER = "nvbandwidth_h2d_h100_vm_4gpu_issue6_points"


def _replays() -> dict[str, int | None]:
    """PCI bus id (upper case) → PCIe replay count since reset, from NVML; {} without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return {}
    out = {}
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            bus = pynvml.nvmlDeviceGetPciInfo(h).busId
            bus = (bus.decode() if isinstance(bus, bytes) else bus).upper()
            try:
                out[bus] = int(pynvml.nvmlDeviceGetPcieReplayCounter(h))
            except Exception:
                out[bus] = None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _torch_buses() -> list[tuple[str, str]]:
    """(name, PCI bus id as NVML prints it) for each GPU torch sees, in torch's (CUDA's) order."""
    if "torch" not in sys.modules and no_nvidia_driver():
        return []  # no GPU can exist here: do not pay torch's import (seconds) to find none
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        out = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            bus = f"{getattr(p, 'pci_domain_id', 0):08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
            out.append((p.name, bus))
        return out
    except Exception:
        return []


def device_order():
    """DataFrame, one row per GPU torch sees: cuda_index, name, bus_id, nvidia_smi_index, pcie_replays.

    attrs["notes"] holds plain sentences: the two environment variables, and whether the orders agree.
    """
    import pandas as pd

    order_env = os.environ.get("CUDA_DEVICE_ORDER")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    notes = [
        f"CUDA_DEVICE_ORDER={order_env!r}" + ("" if order_env else " (unset: CUDA's default, FASTEST_FIRST)"),
        f"CUDA_VISIBLE_DEVICES={visible!r}" + ("" if visible is not None else " (unset: every GPU visible)"),
    ]
    driver = not no_nvidia_driver()  # without an NVIDIA driver NVML has nothing to say: skip loading it
    smi = {(g.get("bus_id") or "").upper(): g["index"] for g in nvml_gpus()[0]} if driver else {}
    replays = _replays() if driver else {}
    rows = [
        {
            "cuda_index": i,
            "name": name,
            "bus_id": bus,
            "nvidia_smi_index": smi.get(bus.upper()),
            "pcie_replays": replays.get(bus.upper()),
        }
        for i, (name, bus) in enumerate(_torch_buses())
    ]
    frame = pd.DataFrame(rows, columns=["cuda_index", "name", "bus_id", "nvidia_smi_index", "pcie_replays"])
    if frame.empty:
        notes.append("no CUDA GPU visible: nothing to number here (a GPU box prints one row per GPU)")
    elif frame["nvidia_smi_index"].notna().all() and list(frame["nvidia_smi_index"]) != sorted(
        frame["nvidia_smi_index"]
    ):
        notes.append(
            "torch's cuda:i order differs from nvidia-smi's: set CUDA_DEVICE_ORDER=PCI_BUS_ID before comparing"
        )
    else:
        notes.append("torch's order follows PCI bus order here")
    frame.attrs["notes"] = notes
    return frame


def recorded_outlier() -> dict:
    """The recorded 4-GPU H100 VM of nvbandwidth#6: the slow GPU's H2D, the others' range, and the source."""
    ds = load(RECORDED_OUTLIER)
    values = [float(v) for v in ds.frame["value"]]
    return {
        "slow_GBps": min(values),
        "others_min_GBps": sorted(values)[1],
        "others_max_GBps": max(values),
        "title": ds.meta["title"],
        "source": ds.meta["source"],
    }
