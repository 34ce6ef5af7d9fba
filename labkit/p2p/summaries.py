"""Summaries of P2P matrices across systems: one row per system, per link label, bidirectional ÷ unidirectional."""

from __future__ import annotations

import re
from typing import Sequence

from .matrices import (
    P2P_STATES,
    P2P_TEXT,
    UNIT_TEXT,
    as_source,
    diagonal,
    link_label,
    matrix,
    median_off_diagonal,
    metrics,
    off_diagonal,
)


def summary_row(data) -> dict:
    """One line per system: medians over GPU pairs (off-diagonal) of every matrix it has."""
    import numpy as np

    src = as_source(data)
    row = {"system": src.label, "dataset": src.name}
    for kind, p2p in metrics(src.frame):
        m = matrix(src.frame, kind, p2p)
        key = f"{kind}_{p2p}"
        row[key] = median_off_diagonal(m)
        d = diagonal(m)
        if d:
            row[f"{key}_diagonal"] = float(np.median(list(d.values())))
    return row


def link_summary(data):
    """Median of every matrix per topology link label (NV12, PIX, SYS, ...): what each link delivers."""
    import numpy as np
    import pandas as pd

    src = as_source(data)
    topo = src.topology
    if topo is None:
        raise ValueError(f"{src.name}: no topology published, so no link labels to group by")
    out = []
    for kind, p2p in metrics(src.frame):
        m = matrix(src.frame, kind, p2p)
        groups: dict[str, list[float]] = {}
        for i, j, v in off_diagonal(m):
            groups.setdefault(link_label(topo, i, j) or "?", []).append(v)
        for label, vals in groups.items():
            out.append(
                {
                    "link": label,
                    "matrix": kind,
                    "p2p": p2p,
                    "pairs": len(vals),
                    "median": float(np.median(vals)),
                    "min": min(vals),
                    "max": max(vals),
                    "unit": UNIT_TEXT[kind],
                }
            )
    # a one-GPU system (a profile recorded on one GPU) has no pair: an empty table, still with its columns
    return pd.DataFrame(out, columns=["link", "matrix", "p2p", "pairs", "median", "min", "max", "unit"])


def short_name(data) -> str:
    """The system part of a source's label, short enough for a dropdown or a bar label."""
    src = as_source(data)
    s = src.label.split(": ", 1)[-1].split(" — ")[0]
    s = re.sub(r",? ?p2pBandwidthLatencyTest.*$", "", s)
    return s if len(s) <= 60 else s[:57] + "..."


def systems_table(sources: Sequence):
    """One row per system: what it is, which matrices it has, and where the numbers come from."""
    import pandas as pd

    rows = []
    for d in sources:
        src = as_source(d)
        meta = getattr(d, "meta", {}) or {}
        rows.append(
            {
                "dataset": src.name,
                "system": short_name(src),
                "GPUs": meta.get("gpu_count"),
                "interconnect": meta.get("interconnect", ""),
                "topology": "yes" if src.topology_text else "no",
                "matrices": len(metrics(src.frame)),
                "quality": meta.get("quality", ""),
                "source": src.label.split(" — ", 1)[-1],
            }
        )
    return pd.DataFrame(rows)


def ratio_table(sources: Sequence):
    """Per system: bidirectional ÷ unidirectional and staged ÷ P2P latency, medians over GPU pairs.

    A full-duplex link (NVLink, PCIe peer-to-peer) gives bi/uni ≈ 2; a copy staged through host
    memory shares the host's links and memory in both directions, so it gets far less.
    """
    import numpy as np
    import pandas as pd

    rows = []
    for d in sources:
        r = summary_row(d)
        row = {"system": short_name(d)}
        for state in P2P_STATES:
            uni, bi = r.get(f"bandwidth_uni_{state}"), r.get(f"bandwidth_bi_{state}")
            row[f"bi ÷ uni, {P2P_TEXT[state].split(' (')[0]}"] = bi / uni if uni and bi else np.nan
        on, off = r.get("latency_gpu_enabled"), r.get("latency_gpu_disabled")
        row["latency P2P on (µs)"] = on if on else np.nan
        row["latency staged (µs)"] = off if off else np.nan
        row["staged ÷ P2P latency"] = off / on if on and off else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def staged_bandwidth_model(h2d_GBps: float, d2h_GBps: float) -> dict:
    """Model (not a measurement) of a copy staged through host memory, from one-way PCIe rates.

    pipelined: chunks leave the source while earlier ones land, so the slower leg sets the pace →
    min(H2D, D2H). serial: each byte crosses one leg, then the other → 1 / (1/H2D + 1/D2H).
    """
    if h2d_GBps <= 0 or d2h_GBps <= 0:
        raise ValueError("both one-way bandwidths must be positive (GB/s)")
    return {"pipelined_GBps": min(h2d_GBps, d2h_GBps), "serial_GBps": 1.0 / (1.0 / h2d_GBps + 1.0 / d2h_GBps)}
