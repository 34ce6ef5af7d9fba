"""Summaries of P2P matrices across systems: one row per system, per link label, bidirectional ÷ unidirectional."""

from __future__ import annotations

import re
from typing import Sequence

from ..reference import list_datasets, load
from ..specs import compare_to_spec, spec
from .diagnosis import diagnose
from .matrices import (
    P2P_STATES,
    P2P_TEXT,
    UNIT_TEXT,
    as_source,
    diagonal,
    is_nvlink_system,
    link_label,
    matrix,
    median_off_diagonal,
    metrics,
    off_diagonal,
    validate,
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
    memory shares the host's links and memory in both directions, so it gets far less. A system with none of
    these pairs of numbers has no row; a blank (NaN) cell is a pair that system's source did not measure.
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
    table = pd.DataFrame(rows)
    return table.dropna(how="all", subset=[c for c in table.columns if c != "system"])


def staged_bandwidth_model(h2d_GBps: float, d2h_GBps: float) -> dict:
    """Model (not a measurement) of a copy staged through host memory, from one-way PCIe rates.

    pipelined: chunks leave the source while earlier ones land, so the slower leg sets the pace →
    min(H2D, D2H). serial: each byte crosses one leg, then the other → 1 / (1/H2D + 1/D2H).
    """
    if h2d_GBps <= 0 or d2h_GBps <= 0:
        raise ValueError("both one-way bandwidths must be positive (GB/s)")
    return {"pipelined_GBps": min(h2d_GBps, d2h_GBps), "serial_GBps": 1.0 / (1.0 / h2d_GBps + 1.0 / d2h_GBps)}


# --------------------------------------------------------------------------- notebook 04's results
class OnOffMedians:
    """One recorded system's medians over all GPU pairs: one-way bandwidth and small-copy time, P2P on and off."""

    def __init__(self, data, key: str):
        med = {
            (k, s): median_off_diagonal(matrix(data, k, s))
            for k in ("bandwidth_uni", "latency_gpu")
            for s in P2P_STATES
        }
        self.data, self.key, self.pairs = data, key, len(off_diagonal(matrix(data, "bandwidth_uni", "enabled")))
        self.uni_on, self.uni_off = med["bandwidth_uni", "enabled"], med["bandwidth_uni", "disabled"]
        self.lat_on, self.lat_off = med["latency_gpu", "enabled"], med["latency_gpu", "disabled"]

    def numbers(self) -> dict:
        k = self.key
        return {f"{k}_uni_p2p_GBps": self.uni_on, f"{k}_uni_staged_GBps": self.uni_off,
                f"{k}_latency_p2p_us": self.lat_on, f"{k}_latency_staged_us": self.lat_off}  # fmt: skip

    def report(self) -> str:
        return (
            f"{short_name(self.data)}, median over the {self.pairs} pairs: P2P on {self.uni_on:.1f} GB/s, staged "
            f"{self.uni_off:.2f} GB/s (x{self.uni_on / self.uni_off:.0f}); latency {self.lat_on:.2f} µs vs "
            f"{self.lat_off:.2f} µs (x{self.lat_off / self.lat_on:.1f})"
        )


def links_table(sources: Sequence):
    """`link_summary` of every system that published its topology, side by side (the CPU-timed latency left out)."""
    import pandas as pd

    tables = []
    for d in sources:
        if d.meta.get("topology"):
            t = link_summary(d)
            t.insert(0, "system", short_name(d))
            tables.append(t[t["matrix"] != "latency_cpu"])
    return (pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()).round(2)


class NvlinkPromise:
    """What NV12 promises per direction (the spec table) against the recorded unidirectional P2P medians."""

    def __init__(self, a100, h100_bridge):
        self.nvl3, self.bridge = spec("NVLink 3"), spec("NVLink bridge")
        self.a100_uni_on = median_off_diagonal(matrix(a100, "bandwidth_uni", "enabled"))
        self.h100_uni_on = median_off_diagonal(matrix(h100_bridge, "bandwidth_uni", "enabled"))
        self.systems = short_name(a100), short_name(h100_bridge)

    def warnings(self) -> str:
        """What `compare_to_spec` says about the A100 figure against NVLink 3, one note a line."""
        return "  \n".join(f"note: {w}" for w in compare_to_spec(self.a100_uni_on, "unidirectional", self.nvl3)[1])

    def report(self):
        import pandas as pd

        rows = [(self.systems[0], self.nvl3, self.a100_uni_on), (self.systems[1], self.bridge, self.h100_uni_on)]
        t = pd.DataFrame([{"system": name, "link": "NV12", "spec": s.name, "spec per direction (GB/s)": s.per_direction_GBps(),
                           "recorded, unidirectional P2P on (GB/s)": got} for name, s, got in rows])  # fmt: skip
        t["reached (%)"] = 100 * t["recorded, unidirectional P2P on (GB/s)"] / t["spec per direction (GB/s)"]
        return t.round(1)

    def numbers(self) -> dict:
        return {
            "a100_nvlink_reached_pct": 100 * self.a100_uni_on / self.nvl3.per_direction_GBps(),
            "h100_bridge_uni_p2p_GBps": self.h100_uni_on,
        }


class StagingModel:
    """The RTX 2080 Ti box: recorded one-way PCIe (bandwidthTest) → staged-copy model, against its staged matrix."""

    experiment = "staging_model"

    def __init__(self, rtx2080):
        bt = load(next(n for n in list_datasets(kind="copy_sweep") if "rtx2080ti" in n))
        self.datasets = (bt.name,)
        self.one_way = bt.frame.set_index("direction")["bandwidth_GBps"]
        self.model = staged_bandwidth_model(self.one_way["h2d"], self.one_way["d2h"])
        self.staged = median_off_diagonal(matrix(rtx2080, "bandwidth_uni", "disabled"))

    def numbers(self) -> dict:
        return {"rtx2080_staged_GBps": self.staged}

    def notes(self) -> dict:
        return {
            "h2d_GBps": self.one_way["h2d"],
            "d2h_GBps": self.one_way["d2h"],
            **self.model,
            "recorded_GBps": self.staged,
        }

    def report(self) -> str:
        m = self.model
        return "  \n".join([
            f"recorded one-way PCIe (bandwidthTest, 32 MB): H2D {self.one_way['h2d']} GB/s, D2H {self.one_way['d2h']} GB/s",
            f"model: pipelined staging {m['pipelined_GBps']:.2f} GB/s; serial staging {m['serial_GBps']:.2f} GB/s",
            f"recorded staged GPU→GPU (p2pBandwidthLatencyTest): {self.staged:.2f} GB/s",
        ])  # fmt: skip


class GeforceP2P:
    """GeForce P2P: the stock driver stages every copy; with peer access on, the same generation runs real P2P."""

    SYSTEMS = (("2× RTX 5090, stock driver (nccl-tests#287)", "rtx5090_stock"),
               ("4× RTX PRO 6000 + 2× RTX 5090 (rtx6kpro)", "rtx5090_mix"))  # fmt: skip

    def __init__(self, stock, mixed):
        self.sets = stock, mixed

    def _spans(self):
        for (name, key), d in zip(self.SYSTEMS, self.sets):
            bw, lat = (matrix(d, k, "enabled") for k in ("bandwidth_uni", "latency_gpu"))
            yield (
                name,
                key,
                d,
                [v for *_, v in off_diagonal(bw)],
                [v for *_, v in off_diagonal(lat)],
                median_off_diagonal(bw),
            )

    def report(self) -> str:
        return "  \n".join(
            f"{name}: 'P2P on' one way {min(bw):.2f}–{max(bw):.2f} GB/s (median {med:.1f}), "
            f"small copy {min(lat):.2f}–{max(lat):.2f} µs — recorded: {d.meta['source'][:60]}…"
            for name, _, d, bw, lat, med in self._spans()
        )

    def numbers(self) -> dict:
        return {f"{key}_uni_p2p_median_GBps": med for _, key, _, _, _, med in self._spans()}


class RecordedFindings:
    """`diagnose` on every recorded system: per system its warnings (or notes), four at most."""

    experiment = "diagnosis"
    SHOWN = 4

    def __init__(self, sources: Sequence):
        self.sources = list(sources)
        self.findings = {d.name: diagnose(d) for d in self.sources}

    def report(self) -> str:
        parts = []
        for d in self.sources:
            found = self.findings[d.name]
            warns = [f for f in found if f.level == "warn"]
            parts.append(f"**{short_name(d)}** — {len(warns)} warning(s), {len(found) - len(warns)} note(s)")
            parts += [f._repr_markdown_() for f in (warns or found)[: self.SHOWN]]
            if len(found) > self.SHOWN:
                parts.append(f"   ... and {len(found) - self.SHOWN} more: `diagnosis.diagnose(shipped[{d.name!r}])`")
        return "\n\n".join(parts)

    def notes(self) -> dict:
        return {name: len(f) for name, f in self.findings.items()}


def staged_outlier_pairs(data) -> set:
    """The GPU pairs `diagnose` flags as outliers of the unidirectional, P2P-off matrix (exercise 2's answer)."""
    return {
        tuple(sorted(f.pairs[0]))
        for f in diagnose(data)
        if f.rule == "outlier_pair" and "unidirectional, P2P off" in f.message
    }


def bidirectional_at_least_unidirectional(sources: Sequence) -> bool:
    """On every NVLink system with both matrices, each pair's bidirectional P2P-on figure ≥ its unidirectional one."""
    both = [d for d in sources if is_nvlink_system(d)
            and {("bandwidth_uni", "enabled"), ("bandwidth_bi", "enabled")} <= set(metrics(d))]  # fmt: skip
    return all(
        v >= matrix(d, "bandwidth_uni", "enabled").loc[i, j]
        for d in both
        for i, j, v in off_diagonal(matrix(d, "bandwidth_bi", "enabled"))
    )


class RecordedChecks:
    """The recorded data's invariants and what `diagnose` must find in it (tests/test_p2p_recorded.py asserts them)."""

    def __init__(self, sources: Sequence, a100, h100_bridge, geforce: Sequence):
        self.problems = {d.name: validate(d) for d in sources}
        self.bi_over_uni = bidirectional_at_least_unidirectional(sources)
        self.a100_odd_pairs = staged_outlier_pairs(a100)
        self.geforce_flagged = all(any(f.rule == "peer_access" for f in diagnose(d)) for d in geforce)
        self.bridge_quiet = not [f for f in diagnose(h100_bridge) if f.level == "warn"]

    def checks(self) -> dict:
        return {
            "recorded_matrices_valid": not any(self.problems.values()),
            "bidirectional_at_least_unidirectional_on_nvlink": self.bi_over_uni,
            "diagnosis_finds_a100_staged_outliers": self.a100_odd_pairs == {(4, 5), (6, 7)},
            "diagnosis_finds_geforce_without_p2p": self.geforce_flagged,
            "diagnosis_quiet_on_healthy_nvlink_bridge": self.bridge_quiet,
        }

    def report(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.checks().items())
