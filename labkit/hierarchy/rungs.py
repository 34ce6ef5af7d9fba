"""The ladder in one number per level: measured here, recorded (H100/H200 class) and spec, with the ratio at each boundary."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Sequence

from .. import plots
from ..reference import load
from ..schema import DatasetError, short_source
from ..specs import spec
from ..units import format_bytes
from .ladder import LEVEL_NAMES, LEVELS, LevelSweep, last_level_cache_bytes


@dataclasses.dataclass(frozen=True)
class Rung:
    """One level of one ladder: a one-way data rate and its origin."""

    ladder: str  # "measured here", "recorded (H100-class)", "spec (H100 SXM node)"
    level: str
    GBps: float
    how: str  # measured / recorded / spec
    source: str
    dataset: str | None = None  # the reference dataset it was read from


#: A recorded H100/H200-class ladder: (level, dataset, filters, column, factor, reducer, note).
RECORDED_RUNGS = (
    (
        "gpu_gpu",
        "p2p_uni_writes_8xh100_nvswitch_mlengineering",
        {"matrix": "bandwidth_uni", "p2p": "enabled"},
        "bandwidth_GBps",
        1.0,
        "offdiag_median",
        "8×H100 p2pBandwidthLatencyTest, unidirectional, median pair",
    ),
    (
        "host_gpu",
        "nvbandwidth_8xh200_pcie5_nvlink_mlengineering_points",
        {"quantity": "nvbandwidth host-to-device, per GPU (each H200 on its own PCIe 5 x16 link)"},
        "value",
        1.0,
        "first",
        "H200 nvbandwidth H2D, PCIe Gen5 x16",
    ),
    (
        "network",
        "nccl_expected_ndr_nic_and_h100_node_issue290_points",
        {"unit": "GB/s"},
        "value",
        1.0,
        "ndr_low_high",
        "NCCL per InfiniBand NDR NIC (maintainer's expected 46-48, midpoint)",
    ),
)


def recorded_rungs() -> tuple[list[Rung], dict[str, str]]:
    """The recorded ladder's rungs, and for each level left out, the dataset and why (did not load, no rows)."""
    out, missing = [], {}
    for level, name, where, column, factor, how, note in RECORDED_RUNGS:
        try:
            ds = load(name)
        except DatasetError as e:
            missing[level] = f"{name}: {e}"
            continue
        f = ds.frame
        for col, val in where.items():
            f = f[f[col] == val]
        if how == "offdiag_median":
            f = f[f["src"] != f["dst"]]
            values = list(f[column])
            v = statistics.median(values) if values else None
        elif how == "ndr_low_high":
            f = f[f["quantity"].str.contains("NDR")]
            v = statistics.mean(f[column]) if len(f) else None
        else:
            v = float(f[column].iloc[0]) if len(f) else None
        if v is None:
            missing[level] = f"{name}: no rows match {where}"
            continue
        out.append(
            Rung(
                "recorded (H100/H200 class)",
                level,
                float(v) * factor,
                "recorded",
                f"{note} — {short_source(ds.meta['source'])}",
                ds.name,
            )
        )
    return out, missing


def spec_rungs() -> list[Rung]:
    """An H100 SXM node from labkit.specs.SPECS, every figure as a one-way rate."""
    hbm, nvl, pcie, ndr = spec("HBM3 (H100"), spec("NVLink 4"), spec("PCIe Gen5 x16"), spec("NDR 400")
    return [
        Rung(
            "spec (H100 SXM node)",
            "gpu_memory",
            hbm.bandwidth_GBps / 2,
            "spec",
            f"{hbm.name} {hbm.bandwidth_GBps:g} GB/s reads+writes ÷2 = copy rate",
        ),
        Rung(
            "spec (H100 SXM node)",
            "gpu_gpu",
            nvl.per_direction_GBps(),
            "spec",
            f"{nvl.name} {nvl.bandwidth_GBps:g} GB/s bidirectional ÷2 = per direction",
        ),
        Rung("spec (H100 SXM node)", "host_gpu", pcie.per_direction_GBps(), "spec", f"{pcie.name} per direction"),
        Rung("spec (H100 SXM node)", "network", ndr.per_direction_GBps(), "spec", f"{ndr.name} per direction, per NIC"),
    ]


def measured_rungs(sweeps: Sequence[LevelSweep], llc_bytes: int | None = None) -> list[Rung]:
    """This machine's rungs: caches = best host-copy rate; DRAM = the largest sizes; others = plateau."""
    out = []
    for s in sweeps:
        if s.how != "measured":
            continue
        if s.level == "host_memory":
            fits = [bw for n, bw in zip(s.nbytes, s.bandwidth_GBps) if llc_bytes is None or 2 * n <= llc_bytes]
            out.append(
                Rung(
                    "measured here",
                    "host_cache",
                    max(fits or s.bandwidth_GBps),
                    "measured",
                    f"{s.label} — best rate, buffers in cache",
                )
            )
            big = [bw for n, bw in zip(s.nbytes, s.bandwidth_GBps) if llc_bytes is not None and 2 * n > llc_bytes]
            if big:
                out.append(
                    Rung(
                        "measured here",
                        "host_memory",
                        statistics.median(big),
                        "measured",
                        f"{s.label} — buffers beyond the {format_bytes(llc_bytes)} last-level cache",
                    )
                )
        else:
            out.append(Rung("measured here", s.level, s.plateau_GBps, "measured", f"{s.label} — plateau"))
    return out


def ladder_table(rungs: Sequence[Rung]):
    """One row per rung, fastest first within each ladder, with the ratio to the next rung down."""
    import pandas as pd

    rows = []
    for name in dict.fromkeys(r.ladder for r in rungs):
        mine = sorted((r for r in rungs if r.ladder == name), key=lambda r: LEVELS.index(r.level))
        for i, r in enumerate(mine):
            nxt = mine[i + 1] if i + 1 < len(mine) else None
            rows.append(
                {
                    "ladder": name,
                    "level": r.level,
                    "level_name": LEVEL_NAMES[r.level],
                    "GBps": r.GBps,
                    "how": r.how,
                    "next_level": nxt.level if nxt else None,
                    "ratio_to_next": r.GBps / nxt.GBps if nxt else None,
                    "source": r.source,
                }
            )
    return pd.DataFrame(rows)


def plot_rungs(table, *, title: str = "The ladder, one number per level, and the ratio at each boundary"):
    """Rungs as steps (log scale), one line per ladder, each boundary annotated with its ratio."""
    fig, ax = plots.figure(width=9.5, height=5.0)
    markers = {"measured": "o", "recorded": "s", "spec": "D"}
    for i, name in enumerate(dict.fromkeys(table["ladder"])):
        t = table[table["ladder"] == name]
        x = [LEVELS.index(lv) for lv in t["level"]]
        how = t["how"].iloc[0]
        label = name if name.startswith(("measured", "recorded", "spec")) else f"{how}: {name}"
        ax.plot(
            x,
            t["GBps"],
            marker=markers.get(how, "o"),
            ls=":" if how == "spec" else "-",
            lw=1.5,
            color=f"C{i}",
            label=label,
        )
        for xi, (_, row) in zip(x, t.iterrows()):
            if row["ratio_to_next"] is not None and row["ratio_to_next"] == row["ratio_to_next"]:
                xn = LEVELS.index(row["next_level"])
                ym = (row["GBps"] * row["GBps"] / row["ratio_to_next"]) ** 0.5
                ax.annotate(
                    f"×{row['ratio_to_next']:.3g}",
                    ((xi + xn) / 2, ym),
                    xytext=(4, 10 * i - 10),
                    textcoords="offset points",
                    fontsize=7,
                    color=f"C{i}",
                    ha="left",
                    va="center",
                )
    ax.set_yscale("log")
    ax.set_xticks(range(len(LEVELS)))
    ax.set_xticklabels([LEVEL_NAMES[lv].replace(" (", "\n(").replace(": ", ":\n") for lv in LEVELS], fontsize=7)
    plots.finish(
        ax,
        title,
        "level, fastest to slowest (ordered categories)",
        "one-way data rate (GB/s)",
        source="ratio = this level ÷ the next one down its own ladder; spec figures converted to one direction",
    )
    return fig


class LadderRungs:
    """Notebook 06's ladder as one number per level: measured here, recorded, spec; the ratio at each step down."""

    def __init__(self, host: LevelSweep, processes: LevelSweep, gpu_levels: Sequence[LevelSweep], sizes):
        self.mine = [host, processes] + [c for c in gpu_levels if c.how == "measured"]
        recorded, self.missing = recorded_rungs()
        self.table = ladder_table(measured_rungs(self.mine, last_level_cache_bytes()) + recorded + spec_rungs())
        self.datasets = [r.dataset for r in recorded if r.dataset]
        self.same_sizes = tuple(host.nbytes) == tuple(processes.nbytes) == tuple(sizes)
        self.processes_GBps = processes.plateau_GBps

    def rate(self, ladder: str, level: str) -> float | None:
        """GB/s of `level` on the first ladder whose name starts with `ladder` ("measured", "recorded", "spec");
        None where that ladder has no such level (a recorded dataset that did not load: `missing` says why)."""
        t = self.table[(self.table["ladder"].str.startswith(ladder)) & (self.table["level"] == level)]
        return float(t["GBps"].iloc[0]) if len(t) else None

    def ratio(self, ladder: str, upper: str, lower: str) -> float | None:
        """`upper` ÷ `lower` on one ladder; None where either level is missing from it."""
        a, b = self.rate(ladder, upper), self.rate(ladder, lower)
        return None if a is None or b is None else a / b

    def ratio_text(self, ladder: str, upper: str, lower: str) -> str:
        """The ratio in words: "×9.4 spec", or "no recorded rate: <the level missing and why>", never "×nan"."""
        r = self.ratio(ladder, upper, lower)
        if r is not None:
            return f"×{r:.1f} {ladder}"
        why = [
            f"{LEVEL_NAMES[lv]} missing ({self.missing.get(lv, 'not on this ladder')})"
            for lv in (upper, lower)
            if self.rate(ladder, lv) is None
        ]
        return f"no {ladder} rate: {'; '.join(why)}"

    def figure(self):
        return plot_rungs(self.table)

    def report(self):
        return self.table[["ladder", "level_name", "GBps", "ratio_to_next", "source"]].round(3)

    def numbers(self) -> dict:
        out = {}
        if "host_memory" in set(self.table[self.table["ladder"] == "measured here"]["level"]):
            out["host_cache_over_dram"] = self.ratio("measured", "host_cache", "host_memory")
            out["dram_over_processes"] = self.ratio("measured", "host_memory", "processes")
        ratios = {
            "spec_nvlink_over_pcie": self.ratio("spec", "gpu_gpu", "host_gpu"),
            "recorded_nvlink_over_network": self.ratio("recorded", "gpu_gpu", "network"),
        }  # a ratio with a level missing is left out (the interview line says why), never recorded as NaN
        return out | {"processes_GBps": self.processes_GBps} | {k: v for k, v in ratios.items() if v is not None}

    def checks(self) -> dict:
        return {
            "ladder_same_sizes_every_level": self.same_sizes,
            "spec_nvlink4_per_direction_450": self.rate("spec", "gpu_gpu") == 450.0,
            "measured_rates_positive": all(b > 0 for s in self.mine for b in s.bandwidth_GBps),
        }

    def measured_steps(self):
        """The measured ladder's rows that have a level below them."""
        t = self.table
        return t[(t["ladder"] == "measured here") & t["ratio_to_next"].notna()]


class Interview:
    """Notebook 06's interview numbers: the recorded cliff, the hierarchical speed-up and bytes, the ladder's steps."""

    experiment = "interview"

    def __init__(self, rungs: LadderRungs, cliff, compare, across):
        """`cliff`: cluster.views.H100Cliff; `compare`: comparison.CompareView; `across`: comparison.SlowLinkBytes."""
        self.rungs, self.cliff, self.compare, self.across = rungs, cliff, compare, across

    def report(self) -> str:
        c, cmp, r = self.cliff, self.compare, self.rungs
        lines = [
            f"Q1: 8×H100, 4 GiB, 1 → 2 nodes: busbw {c.one:g} → {c.two:g} GB/s, ÷{c.recorded_cliff:.2f} — {c.label} "
            f"(a misconfigured cluster); healthy, model: ring ÷{c.healthy_cliff:.2f}, NCCL's default "
            f"{c.pick.algorithm} ÷{c.pick_cliff:.2f}",
            f"Q2: flat ring ÷ hierarchical at {format_bytes(cmp.n_top)}: ×{cmp.cmp.speedup():.2f} "
            f"(model ×{cmp.model_speedup:.2f}); sent across: flat {format_bytes(self.across.total('flat_ring'))}, "
            f"hierarchical {format_bytes(self.across.total('hierarchical'))} — measured here; slow link between "
            f"groups: {cmp.cmp.short_link_text}",
            f"Q3: NVLink 4 ÷ NDR NIC, per direction: {r.ratio_text('spec', 'gpu_gpu', 'network')}, "
            f"{r.ratio_text('recorded', 'gpu_gpu', 'network')}",
        ]
        lines += [
            f"ladder: {s.level_name} ÷ {LEVEL_NAMES[s.next_level]}: ×{s.ratio_to_next:.1f} — {s.source}"
            for s in r.measured_steps().itertuples()
        ]
        return "  \n".join(lines)

    def notes(self) -> dict:
        r, cmp = self.rungs, self.compare.cmp
        steps = {
            f"ladder_{s.level}_over_{s.next_level}": float(s.ratio_to_next) for s in r.measured_steps().itertuples()
        }
        return {
            "cliff_recorded": self.cliff.recorded_cliff,
            "cliff_source": self.cliff.label,
            "flat_over_hierarchical": cmp.speedup(),
            "slow_link": cmp.short_link_text,
            "bytes_across": {impl: self.across.total(impl) for impl in ("flat_ring", "hierarchical")},
            "spec_nvlink_over_nic": r.ratio("spec", "gpu_gpu", "network"),
            "recorded_nvlink_over_nic": r.ratio("recorded", "gpu_gpu", "network"),
        } | steps
