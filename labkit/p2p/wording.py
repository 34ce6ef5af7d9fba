"""How the P2P findings say things: numbers at a sensible precision, GPU pairs, matrix names, likely causes."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from .matrices import P2P_TEXT, nvlink_count

_CONSUMER_RE = re.compile(r"GeForce|RTX\s*[2-5]0[5-9]0(?!.*(PRO|Ada|A\d000))|TITAN", re.I)


_VM_RE = re.compile(r"\bVM\b|virtual machine|hypervisor|Standard_ND|\bND\d", re.I)


def fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def fmt_range(vals: Sequence[float]) -> str:
    import numpy as np

    lo, hi = np.percentile(vals, [10, 90]) if len(vals) >= 5 else (min(vals), max(vals))
    return f"~{fmt(lo)}" if fmt(lo) == fmt(hi) else f"~{fmt(lo)}–{fmt(hi)}"


def pair_text(pairs: Iterable[tuple[int, int]]) -> list[tuple[str, tuple[tuple[int, int], ...]]]:
    """Collapse (i, j) and (j, i) into 'GPUi↔GPUj'; a lone direction stays 'GPUi→GPUj'."""
    pairs = set(pairs)
    out, seen = [], set()
    for i, j in sorted(pairs):
        if (i, j) in seen:
            continue
        if (j, i) in pairs:
            a, b = min(i, j), max(i, j)
            out.append((f"GPU{a}↔GPU{b}", ((a, b), (b, a))))
            seen |= {(i, j), (j, i)}
        else:
            out.append((f"GPU{i}→GPU{j}", ((i, j),)))
            seen.add((i, j))
    return out


def what(kind: str, p2p: str) -> str:
    what = {
        "bandwidth_uni": "unidirectional",
        "bandwidth_bi": "bidirectional",
        "latency_gpu": "latency",
        "latency_cpu": "host-side latency",
    }[kind]
    return f"{what}, {P2P_TEXT[p2p].split(' (')[0]}"


def likely_causes(label: str | None, gpu: str, context: str) -> str:
    causes = []
    if _CONSUMER_RE.search(gpu or ""):
        causes.append(
            "consumer (GeForce) GPUs — the driver does not offer PCIe peer-to-peer on most of "
            "them (both recorded GeForce pairs print 'CANNOT Access Peer')"
        )
    if _VM_RE.search(context or ""):
        causes.append("a virtual machine — the hypervisor must expose the PCIe topology and allow peer traffic")
    if label in ("PIX", "PXB"):
        causes.append(
            f"the pair shares a PCIe switch ({label}), so the hardware path exists: check that the IOMMU "
            "is off or in passthrough and that ACS does not redirect peer traffic to the root complex"
        )
    elif label == "SYS":
        causes.append(
            "the GPUs sit under different CPU sockets (SYS): many platforms do not route PCIe "
            "peer traffic across the socket link"
        )
    elif label in ("PHB", "NODE"):
        causes.append(
            f"the path crosses the CPU's host bridge ({label}): the platform must support "
            "peer-to-peer through its root complex, and IOMMU/ACS must allow it"
        )
    elif label and nvlink_count(label):
        causes.append(
            f"the topology shows {label}, so the NVLink path exists: peer access may be off in "
            "software, or links are down (`nvidia-smi nvlink -s`)"
        )
    if not causes:
        causes.append(
            "consumer GPUs, IOMMU/ACS on the PCIe path, a virtual machine, or GPUs under different "
            "CPU sockets — `nvidia-smi topo -p2p r` says which pairs the driver allows"
        )
    return "; ".join(causes)


def range_text(vals: Sequence[float]) -> str:
    lo, hi = min(vals), max(vals)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"
